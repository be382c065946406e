"""Finding the repeated structure of a kernel sequence: transformer layers, per-parameter optimizer launches.

Two sources, used by the Kineto importer:

- **module units** (traces recorded with ``with_stack=True``/``with_modules=True``): every kernel carries the module
  instance that launched it (``GPT2Block_3``); consecutive instances of one module class whose kernel sequences are
  identical become one segment with a repeat count (``forward.GPT2Block`` × 24);
- **period detection** (any trace): a tandem repeat — a block of ``p`` kernels executed ``c`` times in a row — is found
  from the kernel keys alone. Candidate periods are the most frequent gaps between consecutive occurrences of the same
  key (a block repeated ``c`` times leaves ``c − 1`` gaps of exactly ``p`` for each of its kernels); each candidate is
  checked with one vectorised comparison ``key[i] == key[i + p]``. With ``K`` candidates that is O(n log n + K·n) per
  level, and the search recurses only into the parts left of and right of the repeat it takes.

Keys are small integers: equal keys mean the same kernel (name, launch configuration and input shapes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Block", "find_blocks", "merge_units", "tandem_repeat", "unit_group_repeat"]

# a repeat worth a segment: two repetitions of a block of ≥ 4 kernels, or ≥ 4 back-to-back launches of one kernel
MIN_COVER = 8
RUN_MIN = 4
CANDIDATES = 16


@dataclass(frozen=True, slots=True)
class Block:
    """A run of kernel instances ``start … start + period·count − 1`` that repeats a block of ``period`` kernels.

    Attributes:
        start: index of the first instance.
        period: kernels per repetition.
        count: repetitions (1 for a part with no repeat).
        unit: the module class that launched it, when the trace says.
    """

    start: int
    period: int
    count: int
    unit: str | None = None

    @property
    def stop(self) -> int:
        return self.start + self.period * self.count


def tandem_repeat(keys: np.ndarray, min_cover: int = MIN_COVER, candidates: int = CANDIDATES) -> Block | None:
    """The tandem repeat covering the most instances (ties: the shorter period), or None."""
    n = len(keys)
    if n < min(min_cover, RUN_MIN):
        return None
    order = np.argsort(keys, kind="stable")
    ks = keys[order]
    same = ks[1:] == ks[:-1]
    gaps = (order[1:] - order[:-1])[same]
    if not len(gaps):
        return None
    vals, cnt = np.unique(gaps, return_counts=True)
    top = vals[np.argsort(-cnt, kind="stable")[:candidates]]
    best: Block | None = None
    for p in sorted(int(v) for v in top):
        if 2 * p > n:
            continue
        eq = np.concatenate([[False], keys[:-p] == keys[p:], [False]])
        d = np.diff(eq.astype(np.int8))
        starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
        if not len(starts):
            continue
        lens = ends - starts
        i = int(np.argmax(lens))
        count = (int(lens[i]) + p) // p
        if count < 2:
            continue
        cover = count * p
        if (p == 1 and count < RUN_MIN) or (p > 1 and cover < min_cover):
            continue
        if best is None or cover > best.period * best.count:
            best = Block(int(starts[i]), p, count)
    return best


def find_blocks(keys: np.ndarray, min_cover: int = MIN_COVER) -> list[Block]:
    """Split ``keys`` into consecutive blocks: repeats where found, plain parts (count 1) between them."""
    keys = np.asarray(keys, dtype=np.int64)
    out: list[Block] = []
    stack = [(0, len(keys))]
    parts: list[Block] = []
    while stack:  # iterative: deep recursion on long plain runs would hit Python's limit
        lo, hi = stack.pop()
        if hi <= lo:
            continue
        b = tandem_repeat(keys[lo:hi], min_cover)
        if b is None:
            parts.append(Block(lo, hi - lo, 1))
            continue
        parts.append(Block(lo + b.start, b.period, b.count))
        stack.append((lo, lo + b.start))
        stack.append((lo + b.stop, hi))
    out = sorted(parts, key=lambda b: b.start)
    return out


def merge_units(keys: np.ndarray, units: list[str | None]) -> list[Block]:
    """Blocks from module units: a unit is a maximal run of one module instance; consecutive units of one class with
    identical kernel keys merge into one block. Runs without a unit (``None``) are split by period detection."""
    n = len(keys)
    runs: list[tuple[int, int, str | None]] = []  # (start, stop, unit instance)
    i = 0
    while i < n:
        j = i + 1
        while j < n and units[j] == units[i]:
            j += 1
        runs.append((i, j, units[i]))
        i = j
    out: list[Block] = []
    r = 0
    while r < len(runs):
        s, e, u = runs[r]
        if u is None:
            out += [Block(s + b.start, b.period, b.count) for b in find_blocks(keys[s:e])]
            r += 1
            continue
        cls = unit_class(u)
        count = 1
        block = keys[s:e]
        while r + count < len(runs):
            s2, e2, u2 = runs[r + count]
            if u2 is None or unit_class(u2) != cls or e2 - s2 != e - s or not np.array_equal(keys[s2:e2], block):
                break
            count += 1
        out.append(Block(s, e - s, count, cls))
        r += count
    return out


def unit_group_repeat(keys: np.ndarray, blocks: list[Block]) -> tuple[tuple[str, ...], int] | None:
    """Where ``merge_units``' blocks repeat as a group of several module instances of different classes with identical
    kernels (``SqueezeBertSelfAttention, ConvDropoutLayerNorm, ConvActivation, ConvDropoutLayerNorm`` × 12): the
    classes of one group and its repetitions, for the largest such repeat; None where there is none.

    Such a group is a layer whose own module ran without hooks (Hugging Face's SqueezeBERT calls ``layer.forward(...)``
    directly, which runs neither ``with_modules`` frames nor ``kdvfs.module:`` ranges), so only its sub-modules are
    seen. They are not folded into one segment: the trace format repeats one module's segment, and a runtime counting
    the group's first class would miscount where that class occurs twice in a group (backward: ConvDropoutLayerNorm)."""
    ids: dict[tuple, int] = {}
    seq = []
    for i, b in enumerate(blocks):
        if b.unit is None:
            seq.append(-1 - i)  # a part no module launched matches nothing
        else:
            seq.append(ids.setdefault((b.unit, b.count, keys[b.start:b.stop].tobytes()), len(ids)))
    rep = tandem_repeat(np.asarray(seq, dtype=np.int64), min_cover=4)
    if rep is None or rep.period < 2:
        return None
    group = blocks[rep.start:rep.start + rep.period]
    if len({b.unit for b in group}) < 2:
        return None
    return tuple(str(b.unit) for b in group), rep.count


def unit_class(unit: str) -> str:
    """``GPT2Block_3`` → ``GPT2Block`` (the profiler numbers module instances per class)."""
    head, _, tail = unit.rpartition("_")
    return head if head and tail.isdigit() else unit
