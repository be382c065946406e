"""Profiles: time, power and energy of every kernel of a trace at every clock setting of a GPU.

One CSV row per (kernel, core_mhz, mem_mhz); the driver's own choice is the literal ``auto``. The first line may be a
comment ``# kdvfs-profile/1 gpu=NAME trace=NAME trace_sha=HEX`` naming the card and trace (``kdvfs.identity``). Documented in ``docs/profile-format.md``.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import zlib
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from pathlib import Path
from urllib.parse import quote, unquote

import numpy as np

from kdvfs.arrays import frozen_array, unique_pairs
from kdvfs.errors import FormatError, UnsupportedClockError
from kdvfs.gpus import AUTO, GpuSpec
from kdvfs.model import KernelParams, evaluate
from kdvfs.trace import Trace

__all__ = ["Profile", "build_profile", "load_profile", "save_profile", "fmt_clock", "parse_clock", "SOURCES"]

FORMAT = "kdvfs-profile/1"
SOURCES = ("measured", "model", "fitted")


def fmt_clock(v: int) -> str:
    return "auto" if int(v) == AUTO else str(int(v))


MAX_CLOCK_MHZ = 100_000
"""No GPU clock comes near 100 GHz: a larger number in a file is damage, refused before it overflows an array."""


def parse_clock(v: str | int, what: str = "clock") -> int:
    if isinstance(v, (int, np.integer)):  # a JSON number (schedule runs): the same range as a clock in text
        n = int(v)
        if n != AUTO and not 0 < n <= MAX_CLOCK_MHZ:
            raise FormatError(f"{what} {v!r} must be a positive whole number of MHz (at most {MAX_CLOCK_MHZ}) or 'auto'")
        return n
    s = str(v).strip().lower()
    if s == "auto":
        return AUTO
    try:
        f = float(s)
    except ValueError:
        raise FormatError(f"{what} {v!r} is not a number of MHz or 'auto'") from None
    if not math.isfinite(f) or f <= 0 or f != int(f) or f > MAX_CLOCK_MHZ:
        raise FormatError(f"{what} {v!r} must be a positive whole number of MHz (at most {MAX_CLOCK_MHZ}) or 'auto'")
    return int(f)


@dataclass(frozen=True, slots=True)
class Profile:
    """Time, power and energy of each kernel at each setting.

    Attributes:
        keys: kernel keys (``segment.index``), matching a trace.
        settings: (core_mhz, mem_mhz) pairs, ``AUTO`` = 0 for the driver's choice.
        time_s: shape (kernels, settings).
        power_w: shape (kernels, settings).
        source: shape (kernels, settings), one of ``SOURCES``.
        gpu: catalog name of the card, when known.
        trace: name of the trace, when known.
        trace_sha: content hash of the trace's kernels (``kdvfs.identity.trace_sha``), when known.
        eff_core_mhz: shape (kernels, settings): the core clock each kernel runs at there (after power-cap
            throttling; the driver's choice at ``auto``), when known (model-built profiles; optional column).
        card: the one card the model was adapted to (``profile build --anchors``), as (key, value) pairs: the anchor
            run, its card's UUID and the fitted parameters (``CardAnchor.header_items``); written as ``card.KEY=VALUE``
            words of the header line; empty for the bundled fit.
    """

    keys: tuple[str, ...]
    settings: tuple[tuple[int, int], ...]
    time_s: np.ndarray
    power_w: np.ndarray
    source: np.ndarray
    gpu: str = ""
    trace: str = ""
    trace_sha: str = ""
    eff_core_mhz: np.ndarray | None = None
    card: tuple[tuple[str, str], ...] = ()
    _index: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        # during construction only: the frozen value keeps read-only copies of the arrays it was given
        object.__setattr__(self, "time_s", frozen_array(self.time_s, float))
        object.__setattr__(self, "power_w", frozen_array(self.power_w, float))
        object.__setattr__(self, "source", frozen_array(self.source))
        if self.eff_core_mhz is not None:
            object.__setattr__(self, "eff_core_mhz", frozen_array(self.eff_core_mhz, float))
        shape = (len(self.keys), len(self.settings))
        for nm in ("time_s", "power_w", "source") + (("eff_core_mhz",) if self.eff_core_mhz is not None else ()):
            if getattr(self, nm).shape != shape:
                raise FormatError(f"profile: {nm} has shape {getattr(self, nm).shape}, expected {shape}")
        bad = ~np.isfinite(self.time_s) | (self.time_s <= 0) | ~np.isfinite(self.power_w) | (self.power_w <= 0)
        if bad.any():
            k, s = np.argwhere(bad)[0]
            raise FormatError(
                f"profile: kernel {self.keys[k]!r} at {fmt_clock(self.settings[s][0])}/{fmt_clock(self.settings[s][1])} MHz "
                f"has time {float(self.time_s[k, s])!r} s and power {float(self.power_w[k, s])!r} W; both must be positive "
                "numbers"
            )
        self._index.update({st: i for i, st in enumerate(self.settings)})

    @property
    def energy_j(self) -> np.ndarray:
        return self.time_s * self.power_w

    def setting_index(self, core_mhz: int, mem_mhz: int) -> int:
        try:
            return self._index[(int(core_mhz), int(mem_mhz))]
        except KeyError:
            raise UnsupportedClockError(
                f"setting core {fmt_clock(core_mhz)} / memory {fmt_clock(mem_mhz)} MHz is not in the profile "
                f"{self.gpu or ''} ({len(self.settings)} settings); build the profile over that setting or pick one it has"
            ) from None

    def settings_index(self, core_mhz: np.ndarray, mem_mhz: np.ndarray) -> np.ndarray:
        """``setting_index`` of many (core, memory) pairs at once (each distinct pair looked up once), as int64."""
        core = np.asarray(core_mhz, dtype=np.int64)
        pairs, inverse = unique_pairs(core, mem_mhz)
        return self.pairs_index(pairs)[inverse].reshape(core.shape)

    def pairs_index(self, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
        """``setting_index`` of each (core, memory) pair, as int64."""
        return np.array([self.setting_index(c, m) for c, m in pairs], dtype=np.int64)

    @property
    def auto_index(self) -> int:
        return self.setting_index(AUTO, AUTO)

    def restrict(self, settings: Sequence[tuple[int, int]],
                 rows_of: Mapping[tuple[int, int], tuple[int, int]] | None = None) -> Profile:
        """The same profile over a subset of settings (missing ones are an error); ``rows_of`` gives a setting the
        row of another (a request the card runs as that one)."""
        rows_of = rows_of or {}
        idx = [self.setting_index(*rows_of.get((c, m), (c, m))) for c, m in settings]
        labels = tuple((c, m) if (c, m) in rows_of else self.settings[i] for (c, m), i in zip(settings, idx))
        return Profile(self.keys, labels, self.time_s[:, idx], self.power_w[:, idx],
                       self.source[:, idx], self.gpu, self.trace, self.trace_sha,
                       None if self.eff_core_mhz is None else self.eff_core_mhz[:, idx])

    def for_trace(self, trace: Trace) -> Profile:
        """Rows reordered to the trace's kernels; a clear error naming the missing kernels, or the other trace the
        profile was made for, if any."""
        from kdvfs.identity import check_binding

        check_binding(f"profile ({self.gpu or 'unknown card'})", self.trace, self.trace_sha, trace,
                      f"build one for it with `kdvfs profile build --trace {trace.name} --gpu GPU -o P.csv` "
                      "or fit one from a sweep of it")
        if self.keys == trace.kernel_keys:
            return self
        pos = {k: i for i, k in enumerate(self.keys)}
        missing = [k for k in trace.kernel_keys if k not in pos]
        if missing:
            raise FormatError(
                f"profile ({self.trace or 'unnamed'}) misses {len(missing)} kernel(s) of trace {trace.name!r}: "
                f"{', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}; build it for this trace with "
                f"`kdvfs profile build --trace {trace.name} --gpu GPU -o P.csv`"
            )
        idx = [pos[k] for k in trace.kernel_keys]
        if idx == list(range(len(self.keys))):
            return self
        return Profile(trace.kernel_keys, self.settings, self.time_s[idx], self.power_w[idx], self.source[idx],
                       self.gpu, self.trace, self.trace_sha, None if self.eff_core_mhz is None else self.eff_core_mhz[idx])


def build_profile(trace: Trace, spec: GpuSpec, params: KernelParams, settings=None, source: str | None = None) -> Profile:
    """A profile from the model over ``settings`` (default: every supported setting of the card, auto included)."""
    settings = tuple(settings or spec.settings())
    c = np.array([s[0] for s in settings])
    m = np.array([s[1] for s in settings])
    ev = evaluate(spec, params, c, m)
    src = np.full(ev.time_s.shape, source or params.source, dtype=object)
    from kdvfs.identity import trace_sha

    return Profile(trace.kernel_keys, settings, ev.time_s, ev.power_w, src, spec.name, trace.name, trace_sha(trace),
                   ev.core_mhz)


def save_profile(profile: Profile, path: str | Path) -> Path:
    """Write the CSV (gzipped for ``.gz``), atomically."""
    path = Path(path)
    buf = io.StringIO()
    sha = f" trace_sha={profile.trace_sha}" if profile.trace_sha else ""
    # quoted: the header is split into words at spaces, and an anchor file's name may hold one
    card = "".join(f" card.{k}={quote(str(v), safe='+-.,:()_')}" for k, v in profile.card)
    buf.write(f"# {FORMAT} gpu={profile.gpu or '-'} trace={profile.trace or '-'}{sha}{card}\n")
    w = csv.writer(buf, lineterminator="\n")
    eff = profile.eff_core_mhz
    w.writerow(["kernel", "core_mhz", "mem_mhz", "time_s", "power_w", "energy_j", "source"]
               + (["eff_core_mhz"] if eff is not None else []))
    # one formatted line per (kernel, setting) without the csv writer's per-row call: a 3 000-kernel × 333-setting
    # profile is a million rows; keys that need CSV quoting go through the writer once each. Times and powers are
    # written exactly (shortest round-trip repr): kept to seven digits, a model profile read back planned another
    # schedule at 0 % slack than the same profile in memory (times that differ in the 9th digit became ties; the
    # Gemma step: −16.2 % against −6.8 %)
    clocks = [f"{fmt_clock(c)},{fmt_clock(m)}" for c, m in profile.settings]
    for k, key in enumerate(profile.keys):
        kb = io.StringIO()
        csv.writer(kb, lineterminator="").writerow([key])
        kq = kb.getvalue()
        t, p, src = profile.time_s[k].tolist(), profile.power_w[k].tolist(), profile.source[k].tolist()
        if eff is None:
            buf.write("".join([f"{kq},{cm},{tt!r},{pp!r},{tt * pp!r},{sr}\n"
                               for cm, tt, pp, sr in zip(clocks, t, p, src)]))
        else:
            buf.write("".join([f"{kq},{cm},{tt!r},{pp!r},{tt * pp!r},{sr},{ef:.1f}\n"
                               for cm, tt, pp, sr, ef in zip(clocks, t, p, src, eff[k].tolist())]))
    data = buf.getvalue().encode()
    if path.suffix == ".gz":
        data = gzip.compress(data, compresslevel=6, mtime=0)
    from kdvfs.fileio import write_atomic

    return write_atomic(path, data, "profile output")


def _read_text(path: str | Path, what: str) -> str:
    path = Path(path)
    if not path.exists():
        raise FormatError(f"{what} file {str(path)!r} does not exist; check the path")
    if not path.is_file():
        raise FormatError(f"{what} file {str(path)!r} is not a regular file (a directory?); give the path of the file")
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return raw.decode("utf-8")
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise FormatError(f"{what} file {str(path)!r} is not readable gzip ({e}); the file may be truncated") from None
    except UnicodeDecodeError as e:
        raise FormatError(f"{what} file {str(path)!r} is not UTF-8 text ({e}); is it the right file?") from None
    except OSError as e:
        raise FormatError(f"{what} file {str(path)!r} cannot be read ({e.strerror or e}); check the path and its "
                          "permissions") from None


def _split_meta(text: str, where: str = "the file") -> tuple[dict[str, str], int, int]:
    """The ``key=value`` words of leading ``#`` lines, where the CSV starts, and how many lines were skipped. A key
    given twice with two values is refused: the last one had won (``card.static_w=3.1 … card.static_w=50``: the
    limiter planned with 50 W, exit 0)."""
    meta: dict[str, str] = {}
    pos = skipped = 0
    while text.startswith("#", pos):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        for word in text[pos + 1:end].split():
            if "=" in word:
                k, v = word.split("=", 1)
                v = "" if v == "-" else v
                if meta.get(k, v) != v:
                    raise FormatError(f"{where}: the header line gives {k} twice ({k}={meta[k][:80]} and "
                                      f"{k}={v[:80]}); each key once — keep the right one, or rebuild the file")
                meta[k] = v
        pos = end + 1
        skipped += 1
    return meta, pos, skipped


def read_csv_rows(path: str | Path, what: str) -> tuple[list[dict[str, str]], dict[str, str]]:
    """Rows of a CSV (plain or gzipped) and the ``key=value`` words of a leading ``#`` comment.

    ``meta["_first_line"]`` is the file line number of the first data row (after any comment lines and the header),
    for messages. A row with fewer or more fields than the header is an error naming its line.
    """
    text = _read_text(path, what)
    meta, pos, skipped = _split_meta(text, f"{what} file {str(path)!r}")
    meta["_first_line"] = str(skipped + 2)
    try:
        rows = list(csv.DictReader(io.StringIO(text[pos:])))
    except csv.Error as e:
        raise FormatError(f"{what} file {str(path)!r} is not valid CSV ({e}); is it the right file?") from None
    if not rows:
        raise FormatError(f"{what} file {str(path)!r} has no data rows")
    for i, r in enumerate(rows, start=skipped + 2):
        if None in r or None in r.values():
            raise FormatError(f"{what} file {str(path)!r} line {i}: {len(r) - (None in r)} columns expected, the row has "
                              f"{'more' if None in r else 'fewer'}; fix or drop that line")
    return rows, meta


def load_profile(path: str | Path) -> Profile:
    """Read a profile CSV; every (kernel, setting) pair must appear exactly once.

    The rows go into flat arrays (a million rows for a 3 000-kernel trace over a full clock grid), a column at a time
    for plain files (``_parse_body_plain``) and through the csv reader otherwise (``_parse_body_rows``, which names the
    line of any bad row); clocks are parsed once per distinct text; the checks (positive finite values, no duplicate
    cell, no missing cell) run on the arrays afterwards."""
    text = _read_text(path, "profile")
    meta, pos, skipped = _split_meta(text, f"profile {str(path)!r}")
    reader = csv.reader(io.StringIO(text[pos:]))
    try:
        header = next(reader, None)
    except csv.Error as e:
        raise FormatError(f"profile file {str(path)!r} is not valid CSV ({e}); is it the right file?") from None
    need = {"kernel", "core_mhz", "mem_mhz", "time_s", "power_w"}
    if header is None:
        raise FormatError(f"profile file {str(path)!r} has no data rows")
    if not need <= set(header) and text[pos:].lstrip().startswith(("{", "[")):
        # a schedule or trace given as --profile read "needs columns …; it has {"
        import json

        try:
            fmt = json.loads(text).get("format")
        except (ValueError, AttributeError):
            fmt = None
        raise FormatError(f"profile {str(path)!r} is JSON" + (f" (a {fmt} document)" if fmt else "") + ", not a "
                          "profile CSV; give the profile (`kdvfs profile build -o P.csv`) there")
    if not need <= set(header):
        raise FormatError(f"profile {str(path)!r} needs columns {', '.join(sorted(need))}; it has {', '.join(header)}")
    ik, ic, im, it, ip = (header.index(c) for c in ("kernel", "core_mhz", "mem_mhz", "time_s", "power_w"))
    isrc = header.index("source") if "source" in header else None
    ie = header.index("eff_core_mhz") if "eff_core_mhz" in header else None
    width = len(header)
    first_line = skipped + 2
    cols = (ik, ic, im, it, ip, isrc, ie)
    body_at = text.find("\n", pos) + 1  # the header is one line: csv quoting that spans lines sends it to the reader
    fast = _parse_body_plain(text[body_at:], width, cols) if body_at > 0 else None
    parsed = fast if fast is not None else _parse_body_rows(reader, path, width, cols, first_line)
    keys, settings, ki, si_, tv, pv, names, src_idx, ev = parsed
    for nm, v in (("time_s", tv), ("power_w", pv)):
        bad = np.flatnonzero(~np.isfinite(v) | (v <= 0))
        if len(bad):
            raise FormatError(f"profile {str(path)!r} line {first_line + int(bad[0])}: {nm} is {format(float(v[bad[0]]), 'g')!r}; it "
                              "must be a positive number — fix the row or rebuild the profile")
    cell = ki.astype(np.int64) * max(len(settings), 1) + si_
    order = np.argsort(cell, kind="stable")
    dup = np.flatnonzero(cell[order][1:] == cell[order][:-1])
    if len(dup):
        a, b = sorted((int(order[dup[0]]), int(order[dup[0] + 1])))
        st = list(settings)[int(si_[b])]
        raise FormatError(
            f"profile {str(path)!r} line {first_line + b}: kernel {list(keys)[int(ki[b])]!r} at "
            f"{fmt_clock(st[0])}/{fmt_clock(st[1])} MHz already appeared on line {first_line + a}; each (kernel, setting) "
            "must appear once — drop one of them")
    T = np.full((len(keys), len(settings)), np.nan)
    P = np.full_like(T, np.nan)
    T[ki, si_] = tv
    P[ki, si_] = pv
    S = np.full(T.shape, "", dtype=object)
    S[ki, si_] = np.array(names, dtype=object)[src_idx]
    EF = np.full_like(T, np.nan)
    if ev is not None:
        EF[ki, si_] = ev
    if np.isnan(T).any():
        k, s = np.argwhere(np.isnan(T))[0]
        st = list(settings)[s]
        raise FormatError(
            f"profile {str(path)!r} has no row for kernel {list(keys)[k]!r} at {fmt_clock(st[0])}/{fmt_clock(st[1])} MHz; "
            "every kernel needs every setting — rebuild it with `kdvfs profile build` or `kdvfs profile fit`"
        )
    # the optional column counts only where every row has it (old profiles have none)
    return Profile(tuple(keys), tuple(settings), T, P, S, meta.get("gpu", ""), meta.get("trace", ""),
                   meta.get("trace_sha", ""), None if np.isnan(EF).any() else EF,
                   tuple((k[5:], unquote(v)) for k, v in meta.items() if k.startswith("card.")))


_Parsed = tuple  # (keys, settings, kernel index, setting index, time, power, source names, source index, eff or None)


def _parse_body_rows(reader, path, width: int, cols: tuple, first_line: int) -> _Parsed:
    """The profile's data rows through the csv reader, one row at a time (any CSV: quoted keys, CR line ends); the
    first bad row raises a ``FormatError`` naming its line."""
    ik, ic, im, it, ip, isrc, ie = cols
    keys: dict[str, int] = {}
    settings: dict[tuple[int, int], int] = {}
    clock: dict[tuple[str, str], int] = {}
    sources: dict[str, int] = {}
    kk, ss, src_i = array("l"), array("l"), array("l")
    tt, pp, ee = array("d"), array("d"), array("d")
    n = 0
    try:
        for i, r in enumerate(reader, start=first_line):
            if len(r) != width:
                raise FormatError(f"profile file {str(path)!r} line {i}: {width} columns expected, the row has "
                                  f"{'more' if len(r) > width else 'fewer'}; fix or drop that line")
            try:
                cs, ms = r[ic], r[im]
                si = clock.get((cs, ms))
                if si is None:
                    st = (parse_clock(cs, "core_mhz"), parse_clock(ms, "mem_mhz"))
                    si = clock[(cs, ms)] = settings.setdefault(st, len(settings))
                t, p = float(r[it]), float(r[ip])
                key = r[ik]
            except (FormatError, ValueError, TypeError, IndexError) as e:
                raise FormatError(f"profile {str(path)!r} line {i}: {e}") from None
            k = keys.get(key)
            if k is None:
                k = keys[key] = len(keys)
            if ie is not None:
                try:
                    ee.append(float(r[ie]) if r[ie] else math.nan)
                except ValueError:
                    raise FormatError(f"profile {str(path)!r} line {i}: eff_core_mhz {r[ie]!r} must be a number of "
                                      "MHz") from None
            src = (r[isrc] if isrc is not None else "") or "measured"
            j = sources.get(src)
            if j is None:
                j = sources[src] = len(sources)
            kk.append(k)
            ss.append(si)
            tt.append(t)
            pp.append(p)
            src_i.append(j)
            n += 1
    except csv.Error as e:
        raise FormatError(f"profile file {str(path)!r} is not valid CSV ({e}); is it the right file?") from None
    if not n:
        raise FormatError(f"profile file {str(path)!r} has no data rows")
    return (tuple(keys), tuple(settings), np.frombuffer(kk, dtype=kk.typecode), np.frombuffer(ss, dtype=ss.typecode),
            np.frombuffer(tt), np.frombuffer(pp), list(sources), np.frombuffer(src_i, dtype=src_i.typecode),
            np.frombuffer(ee) if ie is not None else None)


def _parse_body_plain(body: str, width: int, cols: tuple) -> _Parsed | None:
    """The data rows of a plain profile (no quotes, no CR, no NUL, every line ``width`` fields: what ``save_profile``
    writes) a column at a time: the text is split once and each column converted by one C-level ``map``, with no
    Python step and no container per row (~30 % less time than the row reader on the bundled 30 000-row profile).
    The result is exactly ``_parse_body_rows``'s: the same ``float``/``parse_clock`` conversions, indices in order of
    first appearance. ``None`` for anything else, or any value that does not convert: the row reader then parses it
    and names the line at fault."""
    if not body or '"' in body or "\r" in body or "\x00" in body:
        return None
    if body.endswith("\n"):
        body = body[:-1]
    lines = body.split("\n")
    n = len(lines)
    if list(map(str.count, lines, repeat(",", n))).count(width - 1) != n:
        return None  # a short, long or empty line: the row reader names it
    fields = ",".join(lines).split(",")
    del lines
    ik, ic, im, it, ip, isrc, ie = cols
    try:
        # a kernel's rows are usually together and every kernel's settings in one order (what ``save_profile``
        # writes): the key column is then runs of one length and the clock columns repeat with that period, and
        # their indices come from one run or period (checked, else counted row by row: the same result)
        keys, ki, run = _first_seen_runs(fields[ik::width])
        cores, cc = _first_seen_periodic(fields[ic::width], run)
        mems, mc = _first_seen_periodic(fields[im::width], run)
        core = [parse_clock(c, "core_mhz") for c in cores]
        mem = [parse_clock(m, "mem_mhz") for m in mems]
        tv = np.fromiter(map(float, fields[it::width]), dtype=float, count=n)
        pv = np.fromiter(map(float, fields[ip::width]), dtype=float, count=n)
        ev = None
        if ie is not None:
            ecol = fields[ie::width]
            ev = np.fromiter(map(_float_or_nan if "" in ecol else float, ecol), dtype=float, count=n)
    except (FormatError, ValueError, TypeError):
        return None
    # settings in order of first appearance of their (core, mem) text, keyed by the parsed clocks (as the row reader)
    uniq, first, inverse = np.unique(cc * len(mems) + mc, return_index=True, return_inverse=True)
    settings: dict[tuple[int, int], int] = {}
    of_code = np.empty(len(uniq), dtype=np.int64)
    for j in np.argsort(first, kind="stable").tolist():
        c, m = divmod(int(uniq[j]), len(mems))
        of_code[j] = settings.setdefault((core[c], mem[m]), len(settings))
    scol = fields[isrc::width] if isrc is not None else ["measured"] * n
    if "" in scol:
        scol = [s or "measured" for s in scol]
    sources, src = _first_seen(scol)
    return tuple(keys), tuple(settings), ki, of_code[inverse.ravel()], tv, pv, list(sources), src, ev


def _first_seen(col: list[str]) -> tuple[dict[str, int], np.ndarray]:
    """Each distinct value's position in order of first appearance, and every entry's."""
    if col and col[-1] == col[0] and col.count(col[0]) == len(col):  # one value throughout (a profile's source, often)
        return {col[0]: 0}, np.zeros(len(col), dtype=np.int64)
    index = {v: i for i, v in enumerate(dict.fromkeys(col))}
    return index, np.fromiter(map(index.__getitem__, col), dtype=np.int64, count=len(col))


def _first_seen_runs(col: list[str]) -> tuple[dict[str, int], np.ndarray, int]:
    """``_first_seen``, and the length of the column's runs where it is runs of one length (0 where it is not)."""
    n = len(col)
    run = next((i for i, v in enumerate(col) if v != col[0]), n) if n else 0
    if run and n % run == 0:
        heads = col[::run]
        if list(chain.from_iterable(repeat(h, run) for h in heads)) == col:
            index, codes = _first_seen(heads)
            return index, np.repeat(codes, run), run
    index, codes = _first_seen(col)
    return index, codes, 0


def _first_seen_periodic(col: list[str], period: int) -> tuple[dict[str, int], np.ndarray]:
    """``_first_seen`` of a column that may repeat with ``period`` (0: no period known)."""
    n = len(col)
    if 0 < period < n and n % period == 0 and col[period:] == col[:-period]:
        index, codes = _first_seen(col[:period])  # every value appears in the first period, in the same order
        return index, np.tile(codes, n // period)
    return _first_seen(col)


def _float_or_nan(x: str) -> float:
    return float(x) if x else math.nan


def clock_table(trace: Trace, profile: Profile) -> dict:
    """Each kernel's effective core clock at every setting of a profile (``eff_core_mhz``), with its work and how it
    was obtained: the ``--json`` view of ``kdvfs profile build``."""
    p = profile.for_trace(trace)
    labels = [f"{fmt_clock(c)}/{fmt_clock(m)}" for c, m in p.settings]
    rows = []
    for i, k in enumerate(trace.kernels):
        r: dict[str, object] = {"kernel": trace.kernel_keys[i], "name": k.name, "category": k.category, "flops": k.flops,
             "bytes": k.bytes, "dtype": k.dtype, "math": k.math, "work_source": k.work_source or
             ("given" if k.flops or k.bytes else "category")}
        if p.eff_core_mhz is not None:
            r["eff_core_mhz"] = dict(zip(labels, (round(float(x), 1) for x in p.eff_core_mhz[i])))
        rows.append(r)
    out: dict = {"settings": labels, "kernels": rows}
    if p.eff_core_mhz is not None and (AUTO, AUTO) in p._index:
        ia = p.auto_index
        top = max(c for c, _ in p.settings)
        out["throttled_at_auto"] = int(np.sum(p.eff_core_mhz[:, ia] < top - 0.5))
    return out
