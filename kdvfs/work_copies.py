"""What a copy between layouts moves through L2 and device memory, from its operands' strides (issue 12, session 13).

A copy whose two operands have different strides (``x.transpose(1, 2).contiguous()``, a channels-last tensor made
contiguous, ``out.copy_(a.t())``) runs ATen's non-vectorised ``elementwise_kernel`` over a TensorIterator, which
orders the dimensions by the OUTPUT's strides (``reorder_dimensions``: operand 0 decides) and merges those that are
contiguous in both operands. Consecutive threads then write consecutive elements, and read elements one source
stride apart. Every global access moves whole 32-byte sectors (L1 ↔ L2 ↔ DRAM); the L2 holds them in 128-byte
lines. Per side (size: its dtype's bytes; s₀: its stride along the iteration's innermost dimension, in elements):

- a contiguous side (s₀ = 1) reads or writes runs of ``r`` elements (the innermost extent, on through the outer
  dimensions while the side stays contiguous), starting ``R`` elements apart:
  ``sector bytes per element = min(⌈r·size / 32⌉·32, R·size) / r`` — the useful ``size`` for a contiguous tensor,
  more for runs shorter than a sector or ending inside one (a [N, 511] slice of 512-wide rows, a rotary half of 8
  elements); each sector is fetched once, so DRAM moves the same;
- a strided side (s₀ > 1) touches ``min(32, s₀·size)`` bytes of sector per element. A sector holds
  ``k = ⌊32 / (s_c·size)⌋`` used elements (``s_c``: the side's smallest stride, 1 where it has a contiguous
  dimension), which the iteration reaches one period ``P`` apart (``P``: the product of the iteration extents inside
  that dimension; for ``[B, L, C] → [B, C, L]`` the next channel, ``P = L``). Between two uses of one of its lines
  the kernel touches ``W = P · (min(128, s₀·size) + the other side's sector bytes per element)`` of L2 (one line per
  strided element, least-recently-used replacement). Then

      DRAM bytes per element = 32 / k                        (each sector fetched once: the useful size where s_c = 1)
                               if k ≥ 2 and W ≤ L2 / L2_PARTITIONS,
                             = min(32, s₀·size)              otherwise (the lines leave L2 first, or k = 1):
                                                               the whole sector traffic reaches DRAM.

The L2 that one SM's reads can use is half the card's: A100, H100 and H200 split the L2 into two partitions, each of
which caches the data the SMs of its own GPCs access (NVIDIA A100 whitepaper, "L2 cache"), and a copy's neighbouring
elements are read by blocks on every SM. The capacities are the cards' ``l2CacheSize`` (``L2_BYTES``, as
``kdvfs.occupancy.SM_COUNT`` gives their SM counts); nothing here is fitted.

Session 13's diagnosis (``validation/h200/copies/README.md``): the zoo's strided copies whose lines stay in L2 ran at
~5 TB/s of sector traffic (a transpose at 16384², one at 8192² in fp32, a channels-last copy at 56²); the one whose
lines do not (``copy_nhwc_fp32_16x150x512x512``, W = 35 MB > 26 MB) at 3.8 TB/s, with DRAM carrying the sectors.

cuDNN's layout conversions (``nchwToNhwcKernel``/``nhwcToNchwKernel``) transpose 32 × 32 tiles through shared memory:
both sides read and write rows of 32 elements (or whole tiles where a dimension is shorter), so their sectors are
full and only partial tiles at the edges waste any (``layout_copy_traffic``).

Without recorded strides (a trace made without ``record_shapes``'s ``Input Strides``, or an op other than
``copy_``) a copy is counted as contiguous: its useful bytes, as before this rule. The kernel's name can say that it
is a strided copy (``kdvfs.access.strided_copy``) but not along which dimension, and the DRAM traffic depends on that
only through ``W``; most strided copies of the measured steps keep their lines in L2, where the fallback is exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kdvfs.work import Work, _size

__all__ = ["L2_BYTES", "L2_BYTES_DEFAULT", "L2_PARTITIONS", "LINE_BYTES", "SECTOR_BYTES", "TILE", "CopyTraffic",
           "channels_last_strides", "contiguous_strides", "copy_traffic", "copy_traffic_work", "l2_bytes_of",
           "layout_copy_traffic", "transpose_strides"]

SECTOR_BYTES = 32
"""The unit of every global memory access on NVIDIA GPUs since Maxwell (L1 ↔ L2 ↔ DRAM), bytes."""

LINE_BYTES = 128
"""An L2 line (four sectors): the unit the L2 allocates, bytes."""

L2_PARTITIONS = 2
"""A100, H100 and H200 split their L2 into two partitions, each caching what the SMs of its own GPCs access."""

L2_BYTES = {"a100": 40 * 2**20, "h100": 50 * 2**20, "h200": 50 * 2**20}
"""Each card's L2 (``cudaDeviceProp.l2CacheSize``: A100 40 MiB; H100 and H200 50 MiB), by catalog name."""

L2_BYTES_DEFAULT = max(L2_BYTES.values())
"""For a trace priced without knowing its card (the importer's case) and for the zoo: the largest modelled L2 (the
H200's), so waste is counted as reaching DRAM only where no modelled card would hold it."""

TILE = 32
"""cuDNN's layout conversions move 32 × 32 tiles (``kdvfs.work_passes.layout_tiles``)."""


def l2_bytes_of(card: str | None) -> int:
    """The L2 of a card by catalog name (``h200``) or device name (``NVIDIA H200``); ``L2_BYTES_DEFAULT`` when unknown."""
    key = (card or "").lower().replace("nvidia", "").replace(" ", "").replace("-", "")
    for name, size in L2_BYTES.items():
        if key.startswith(name):
            return size
    return L2_BYTES_DEFAULT


@dataclass(frozen=True, slots=True)
class CopyTraffic:
    """What one copy moves.

    Attributes:
        numel: elements copied.
        read_bytes: useful bytes read (``numel × source dtype size``).
        write_bytes: useful bytes written.
        read_sector_bytes: bytes of the sectors the reads touch (L1 ↔ L2).
        write_sector_bytes: bytes of the sectors the writes touch.
        reuse_bytes: ``W``, the L2 a strided side's lines need between two uses (0 where no side is strided).
        l2_bytes: the L2 one partition holds, that ``W`` was compared with.
        read_dram_bytes: bytes the reads move from device memory (module docstring).
        write_dram_bytes: bytes the writes move to device memory.
        spills: whether a strided side's sectors are fetched once per element (``W`` above ``l2_bytes``, or a side
            whose sectors hold one used element each).
        source: ``strides`` (from recorded or known strides) or ``tiles`` (cuDNN's tiled conversions).
    """

    numel: int
    read_bytes: float
    write_bytes: float
    read_sector_bytes: float
    write_sector_bytes: float
    reuse_bytes: float
    l2_bytes: float
    read_dram_bytes: float
    write_dram_bytes: float
    spills: bool
    source: str = "strides"

    @property
    def useful_bytes(self) -> float:
        """One read and one write of every element."""
        return self.read_bytes + self.write_bytes

    @property
    def sector_bytes(self) -> float:
        """Bytes the two sides move between the SMs and L2."""
        return self.read_sector_bytes + self.write_sector_bytes

    @property
    def dram_bytes(self) -> float:
        """Bytes to and from device memory."""
        return self.read_dram_bytes + self.write_dram_bytes


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """Row-major strides (elements) of ``shape``."""
    out, acc = [], 1
    for s in reversed(list(shape)):
        out.append(acc)
        acc *= max(int(s), 1)
    return out[::-1]


def channels_last_strides(shape: Sequence[int]) -> list[int]:
    """Strides of an (N, C, spatial…) tensor in channels-last memory (``torch.channels_last``): C innermost."""
    n, c, *sp = (int(s) for s in shape)
    sps = contiguous_strides(sp) if sp else []
    return [c * math.prod(sp), 1, *(st * c for st in sps)]


def transpose_strides(rows: int, cols: int) -> list[int]:
    """Strides of ``a.t()`` for a contiguous ``a`` of ``rows × cols`` (the view is ``cols × rows``)."""
    return [1, cols]


def _iteration(shape: Sequence[int], dst: Sequence[int], src: Sequence[int]) -> list[tuple[int, int, int]]:
    """TensorIterator's dimensions for ``dst.copy_(src)``, innermost first, as (extent, dst stride, src stride):
    size-1 dimensions dropped, ordered by the destination's strides (then the source's), and neighbours merged where
    both operands are contiguous across them."""
    dims = [(int(n), abs(int(a)), abs(int(b))) for n, a, b in zip(shape, dst, src) if int(n) > 1]
    dims.sort(key=lambda d: (d[1], d[2]))
    out: list[tuple[int, int, int]] = []
    for n, a, b in dims:
        if out and a == out[-1][1] * out[-1][0] and b == out[-1][2] * out[-1][0]:
            n0, a0, b0 = out[-1]
            out[-1] = (n0 * n, a0, b0)
        else:
            out.append((n, a, b))
    return out


def _side(dims: list[tuple[int, int, int]], which: int, size: int) -> tuple[float, int, int, int]:
    """One side of the copy (``which`` 1: destination, 2: source): (sector bytes per element, its stride along the
    innermost dimension ``s₀``, its smallest stride ``s_c`` (1: it has a contiguous dimension), the period ``P``: the
    iterations inside that dimension)."""
    s0 = dims[0][which]
    if s0 == 1:
        # a contiguous run: the innermost extent, and on through the outer dimensions while the side stays
        # contiguous across them (a [N, C, 1-pixel] destination is one run). Contiguous throughout: the useful bytes.
        # Else runs start R elements apart: each touches whole sectors (the last partly used), or, where runs are
        # closer than that, the span between their starts (neighbouring runs share the sector)
        run = dims[0][0]
        for n, a, b in dims[1:]:
            nxt = (a, b)[which - 1]
            if nxt != run:
                per_run = min(math.ceil(run * size / SECTOR_BYTES) * SECTOR_BYTES, nxt * size)
                return max(float(size), per_run / run), 1, 1, 1
            run *= n
        return float(size), 1, 1, 1
    per_el = float(min(SECTOR_BYTES, s0 * size))
    sc = min(d[which] for d in dims)
    period = 1
    for n, a, b in dims:  # how many iterations lie inside the side's smallest-stride dimension
        if (a, b)[which - 1] == sc:
            break
        period *= n
    return per_el, s0, sc, period


def copy_traffic(shape: Sequence[int], dst_strides: Sequence[int], src_strides: Sequence[int], dst_dtype: str,
                 src_dtype: str | None = None, *, l2_bytes: float = L2_BYTES_DEFAULT) -> CopyTraffic | None:
    """What ``dst.copy_(src)`` moves, both of ``shape``, from their strides (elements) and dtypes (module docstring).
    ``None`` where the strides do not describe the copy (lengths differ, a broadcast source of stride 0)."""
    if not (len(shape) == len(dst_strides) == len(src_strides)) or any(int(s) < 0 for s in shape):
        return None
    so, si = _size(dst_dtype), _size(src_dtype or dst_dtype)
    numel = int(math.prod(int(s) for s in shape))
    part = l2_bytes / L2_PARTITIONS
    rb, wb = float(numel * si), float(numel * so)
    if any(int(n) > 1 and int(s) == 0 for n, s in zip(shape, src_strides)):
        return None  # an expanded source: each distinct element read once is the elementwise rule's count
    dims = _iteration(shape, dst_strides, src_strides)
    if not dims:  # one element (or none): a sector each way; DRAM counted as the useful bytes, as for any coalesced side
        sec = float(SECTOR_BYTES if numel else 0)
        return CopyTraffic(numel, rb, wb, sec, sec, 0.0, part, rb, wb, False)
    sides = {w: _side(dims, w, sz) for w, sz in ((1, so), (2, si))}
    dram, reuse, spills = {}, 0.0, False
    for w, sz in ((1, so), (2, si)):
        per_el, s0, sc, period = sides[w]
        if s0 == 1:  # coalesced: its sectors, each fetched once (the useful bytes but for short runs' partial sectors)
            dram[w] = numel * per_el
            continue
        k = SECTOR_BYTES // (sc * sz)  # used elements per sector, reached one period apart
        if k <= 1:  # one used element per sector: each is fetched for that element alone
            dram[w], spills = numel * per_el, True
            continue
        other = sides[3 - w][0]
        ws = period * (min(LINE_BYTES, s0 * sz) + other)
        reuse = max(reuse, float(ws))
        if ws > part:  # the lines leave L2 before the period is over: every sector fetched again
            dram[w], spills = numel * per_el, True
        else:  # each sector fetched once (its unused bytes, where s_c > 1, with it)
            dram[w] = numel * SECTOR_BYTES / k
    return CopyTraffic(numel, rb, wb, numel * sides[2][0], numel * sides[1][0], reuse, part, dram[2], dram[1], spills)


def copy_traffic_work(traffic: CopyTraffic, dtype: str, source: str = "shapes") -> Work:
    """A copy's ``Work``: no FLOPs, its DRAM bytes (``CopyTraffic.dram_bytes``)."""
    return Work(0.0, float(traffic.dram_bytes), dtype, False, source)


def _tile_side_sectors(contig: int, other: int, size: int) -> int:
    """Sectors one side of a 32 × 32-tiled conversion of a [contig × other] plane touches (the side contiguous along
    ``contig``): rows of up to ``TILE`` elements, or, where ``contig`` is shorter than a tile, a tile's rows side by
    side as one run. Rows are taken to start on a sector (alignment not modelled)."""
    def sectors(run: int) -> int:
        return -(-run * size // SECTOR_BYTES)

    if contig < TILE:
        full, part = divmod(other, TILE)
        return full * sectors(contig * TILE) + (sectors(contig * part) if part else 0)
    full, part = divmod(contig, TILE)
    return other * (full * sectors(TILE) + (sectors(part) if part else 0))


def layout_copy_traffic(shape: Sequence[int], dtype: str, *, l2_bytes: float = L2_BYTES_DEFAULT) -> CopyTraffic:
    """What one of cuDNN's layout conversions of an (N, C, spatial…) tensor moves: NCHW rows along the pixels and
    NHWC rows along the channels, each cut into 32-element tile rows. Neighbouring tile rows share the partial
    sectors at their ends and are read by the same or the next block, so nothing spills: DRAM moves the useful
    bytes; the sectors count the partial tiles."""
    n, c = int(shape[0]), int(shape[1])
    hw = int(math.prod(int(s) for s in shape[2:]))
    size = _size(dtype)
    numel = n * c * hw
    nchw = n * _tile_side_sectors(hw, c, size) * SECTOR_BYTES
    nhwc = n * _tile_side_sectors(c, hw, size) * SECTOR_BYTES
    useful = float(numel * size)
    return CopyTraffic(numel, useful, useful, float(nchw), float(nhwc), 0.0, l2_bytes / L2_PARTITIONS, useful, useful,
                       False, "tiles")
