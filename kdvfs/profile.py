"""Profiles: time, power and energy of every kernel of a trace at every clock setting of a GPU.

One CSV row per (kernel, core_mhz, mem_mhz); the driver's own choice is the literal ``auto``. The first line may be a
comment ``# kdvfs-profile/1 gpu=NAME trace=NAME`` naming the card and trace. Documented in ``docs/profile-format.md``.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kdvfs.errors import FormatError, UnsupportedClockError
from kdvfs.gpus import AUTO, GpuSpec
from kdvfs.model import KernelParams, evaluate
from kdvfs.trace import Trace

__all__ = ["Profile", "build_profile", "load_profile", "save_profile", "fmt_clock", "parse_clock", "SOURCES"]

FORMAT = "kdvfs-profile/1"
SOURCES = ("measured", "model", "fitted")


def fmt_clock(v: int) -> str:
    return "auto" if int(v) == AUTO else str(int(v))


def parse_clock(v: str | int, what: str = "clock") -> int:
    if isinstance(v, (int, np.integer)):
        return int(v)
    s = str(v).strip().lower()
    if s == "auto":
        return AUTO
    try:
        f = float(s)
    except ValueError:
        raise FormatError(f"{what} {v!r} is not a number of MHz or 'auto'") from None
    if not math.isfinite(f) or f <= 0 or f != int(f):
        raise FormatError(f"{what} {v!r} must be a positive whole number of MHz or 'auto'")
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
        eff_core_mhz: shape (kernels, settings): the core clock each kernel runs at there (after power-cap
            throttling; the driver's choice at ``auto``), when known (model-built profiles; optional column).
    """

    keys: tuple[str, ...]
    settings: tuple[tuple[int, int], ...]
    time_s: np.ndarray
    power_w: np.ndarray
    source: np.ndarray
    gpu: str = ""
    trace: str = ""
    eff_core_mhz: np.ndarray | None = None
    _index: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        shape = (len(self.keys), len(self.settings))
        for nm in ("time_s", "power_w", "source") + (("eff_core_mhz",) if self.eff_core_mhz is not None else ()):
            if getattr(self, nm).shape != shape:
                raise FormatError(f"profile: {nm} has shape {getattr(self, nm).shape}, expected {shape}")
        bad = ~np.isfinite(self.time_s) | (self.time_s <= 0) | ~np.isfinite(self.power_w) | (self.power_w <= 0)
        if bad.any():
            k, s = np.argwhere(bad)[0]
            raise FormatError(
                f"profile: kernel {self.keys[k]!r} at {fmt_clock(self.settings[s][0])}/{fmt_clock(self.settings[s][1])} MHz "
                f"has time {self.time_s[k, s]!r} s and power {self.power_w[k, s]!r} W; both must be positive numbers"
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

    @property
    def auto_index(self) -> int:
        return self.setting_index(AUTO, AUTO)

    def restrict(self, settings: Sequence[tuple[int, int]]) -> Profile:
        """The same profile over a subset of settings (missing ones are an error)."""
        idx = [self.setting_index(c, m) for c, m in settings]
        return Profile(self.keys, tuple(self.settings[i] for i in idx), self.time_s[:, idx], self.power_w[:, idx],
                       self.source[:, idx], self.gpu, self.trace,
                       None if self.eff_core_mhz is None else self.eff_core_mhz[:, idx])

    def for_trace(self, trace: Trace) -> Profile:
        """Rows reordered to the trace's kernels; a clear error naming the missing kernels if any."""
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
                       self.gpu, self.trace, None if self.eff_core_mhz is None else self.eff_core_mhz[idx])


def build_profile(trace: Trace, spec: GpuSpec, params: KernelParams, settings=None, source: str | None = None) -> Profile:
    """A profile from the model over ``settings`` (default: every supported setting of the card, auto included)."""
    settings = tuple(settings or spec.settings())
    c = np.array([s[0] for s in settings])
    m = np.array([s[1] for s in settings])
    ev = evaluate(spec, params, c, m)
    src = np.full(ev.time_s.shape, source or params.source, dtype=object)
    return Profile(trace.kernel_keys, settings, ev.time_s, ev.power_w, src, spec.name, trace.name, ev.core_mhz)


def save_profile(profile: Profile, path: str | Path) -> Path:
    """Write the CSV (gzipped for ``.gz``), atomically."""
    path = Path(path)
    buf = io.StringIO()
    buf.write(f"# {FORMAT} gpu={profile.gpu or '-'} trace={profile.trace or '-'}\n")
    w = csv.writer(buf, lineterminator="\n")
    eff = profile.eff_core_mhz
    w.writerow(["kernel", "core_mhz", "mem_mhz", "time_s", "power_w", "energy_j", "source"]
               + (["eff_core_mhz"] if eff is not None else []))
    for k, key in enumerate(profile.keys):
        for s, (c, m) in enumerate(profile.settings):
            t, p = profile.time_s[k, s], profile.power_w[k, s]
            w.writerow([key, fmt_clock(c), fmt_clock(m), f"{t:.6e}", f"{p:.4f}", f"{t * p:.6e}", profile.source[k, s]]
                       + ([f"{eff[k, s]:.1f}"] if eff is not None else []))
    data = buf.getvalue().encode()
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(path)
    return path


def read_csv_rows(path: str | Path, what: str) -> tuple[list[dict[str, str]], dict[str, str]]:
    """Rows of a CSV (plain or gzipped) and the ``key=value`` words of a leading ``#`` comment."""
    path = Path(path)
    if not path.exists():
        raise FormatError(f"{what} file {str(path)!r} does not exist; check the path")
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as e:
        raise FormatError(f"{what} file {str(path)!r} cannot be read ({e}); the file may be truncated") from None
    meta: dict[str, str] = {}
    lines = text.splitlines()
    while lines and lines[0].startswith("#"):
        for word in lines.pop(0)[1:].split():
            if "=" in word:
                k, v = word.split("=", 1)
                meta[k] = "" if v == "-" else v
    rows = list(csv.DictReader(lines))
    if not rows:
        raise FormatError(f"{what} file {str(path)!r} has no data rows")
    return rows, meta


def load_profile(path: str | Path) -> Profile:
    """Read a profile CSV; every (kernel, setting) pair must appear once."""
    rows, meta = read_csv_rows(path, "profile")
    need = {"kernel", "core_mhz", "mem_mhz", "time_s", "power_w"}
    if not need <= set(rows[0]):
        raise FormatError(f"profile {str(path)!r} needs columns {', '.join(sorted(need))}; it has {', '.join(rows[0])}")
    keys: dict[str, int] = {}
    settings: dict[tuple[int, int], int] = {}
    recs = []
    for i, r in enumerate(rows, start=2):
        try:
            st = (parse_clock(r["core_mhz"], "core_mhz"), parse_clock(r["mem_mhz"], "mem_mhz"))
            t, p = float(r["time_s"]), float(r["power_w"])
        except (FormatError, ValueError, TypeError) as e:
            raise FormatError(f"profile {str(path)!r} line {i}: {e}") from None
        keys.setdefault(r["kernel"], len(keys))
        settings.setdefault(st, len(settings))
        e = r.get("eff_core_mhz")
        try:
            ef = float(e) if e not in (None, "") else np.nan
        except ValueError:
            raise FormatError(f"profile {str(path)!r} line {i}: eff_core_mhz {e!r} must be a number of MHz") from None
        recs.append((keys[r["kernel"]], settings[st], t, p, r.get("source") or "measured", ef))
    T = np.full((len(keys), len(settings)), np.nan)
    P = np.full_like(T, np.nan)
    S = np.full(T.shape, "", dtype=object)
    E = np.full_like(T, np.nan)
    for k, s, t, p, src, ef in recs:
        T[k, s], P[k, s], S[k, s], E[k, s] = t, p, src, ef
    if np.isnan(T).any():
        k, s = np.argwhere(np.isnan(T))[0]
        st = list(settings)[s]
        raise FormatError(
            f"profile {str(path)!r} has no row for kernel {list(keys)[k]!r} at {fmt_clock(st[0])}/{fmt_clock(st[1])} MHz; "
            "every kernel needs every setting — rebuild it with `kdvfs profile build` or `kdvfs profile fit`"
        )
    # the optional column counts only where every row has it (old profiles have none)
    eff = E if not np.isnan(E).any() else None
    return Profile(tuple(keys), tuple(settings), T, P, S, meta.get("gpu", ""), meta.get("trace", ""), eff)


def clock_table(trace: Trace, profile: Profile) -> dict:
    """Each kernel's effective core clock at every setting of a profile (``eff_core_mhz``), with its work and how it
    was obtained: the ``--json`` view of ``kdvfs profile build``."""
    p = profile.for_trace(trace)
    labels = [f"{fmt_clock(c)}/{fmt_clock(m)}" for c, m in p.settings]
    rows = []
    for i, k in enumerate(trace.kernels):
        r = {"kernel": trace.kernel_keys[i], "name": k.name, "category": k.category, "flops": k.flops,
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
