"""Executors: run pure tasks locally (process pool), serially, or on Ray — with identical, ordered results.

``make_executor("local")`` (default), ``"serial"``, ``"ray"`` (a local Ray) or ``"ray://HOST:PORT"`` (a cluster).
Each task is a pure function of its arguments, so the results are the same wherever they run.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kdvfs.errors import InputError

__all__ = ["Executor", "make_executor"]


class Executor:
    """Maps a function over argument tuples, yielding results in order."""

    name = "serial"

    def map(self, fn: Callable[..., Any], items: Iterable[tuple]) -> Iterator[Any]:
        for it in items:
            yield fn(*it)

    def map_unordered(self, fn: Callable[..., Any], items: Iterable[tuple]) -> Iterator[tuple[int, Any]]:
        """(index of the item, its result) as each task finishes: a caller that keeps results as they come loses none
        that finished when it is interrupted (``map`` holds back every result behind a slow first task)."""
        yield from enumerate(self.map(fn, items))

    def close(self, abort: bool = False) -> None:
        """Release the workers; ``abort`` (after an interruption): end running tasks instead of waiting for them."""


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or max(1, min(os.cpu_count() or 1, 8))
        self.pool = cf.ProcessPoolExecutor(self.workers) if self.workers > 1 else None

    def map(self, fn, items):
        items = list(items)
        if self.pool is None or len(items) < 2:
            yield from (fn(*it) for it in items)
            return
        futs = [self.pool.submit(fn, *it) for it in items]
        for f in futs:
            yield f.result()

    def map_unordered(self, fn, items):
        items = list(items)
        if self.pool is None or len(items) < 2:
            yield from enumerate(fn(*it) for it in items)
            return
        futs = {self.pool.submit(fn, *it): i for i, it in enumerate(items)}
        for f in cf.as_completed(futs):
            yield futs[f], f.result()

    def close(self, abort: bool = False) -> None:
        if self.pool is None:
            return
        if abort:  # the pool's own worker processes, by id: a shutdown would wait for every task already sent
            for proc in list(getattr(self.pool, "_processes", {}).values()):
                proc.terminate()
        self.pool.shutdown(wait=not abort, cancel_futures=True)


class RayExecutor(Executor):
    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise InputError("--executor ray needs the ray extra: pip install 'kdvfs[ray]'") from None
        self.ray = ray
        if not ray.is_initialized():
            kw: dict[str, Any] = {"ignore_reinit_error": True, "include_dashboard": False, "log_to_driver": False}
            if address:
                kw["address"] = address
            else:
                kw["num_cpus"] = os.cpu_count() or 1
            try:
                ray.init(**kw)
            except Exception as e:  # noqa: BLE001 — Ray raises many types; report one clear message
                raise InputError(f"cannot start or reach Ray at {address or 'a local instance'}: {e}") from None
        self.owned = not address

    def map(self, fn, items):
        remote = self.ray.remote(fn)
        refs = [remote.remote(*it) for it in items]
        for r in refs:
            yield self.ray.get(r)

    def map_unordered(self, fn, items):
        remote = self.ray.remote(fn)
        refs = [remote.remote(*it) for it in items]
        index = {r: i for i, r in enumerate(refs)}
        pending = list(refs)
        while pending:
            ready, pending = self.ray.wait(pending, num_returns=1)
            for r in ready:
                yield index[r], self.ray.get(r)

    def close(self, abort: bool = False) -> None:
        if self.owned:
            self.ray.shutdown()


def make_executor(spec: str = "local") -> Executor:
    if spec == "local":
        return LocalExecutor()
    if spec == "serial":
        return Executor()
    if spec == "ray":
        return RayExecutor(None)
    if spec.startswith("ray://"):
        return RayExecutor(spec)
    if spec.startswith("ray:") and len(spec) > 4:
        # a cluster started with `ray start --head` (ray:auto on one of its nodes, or ray:HOST:PORT of its GCS);
        # unlike ray://, it needs no Ray Client server
        return RayExecutor(spec[4:])
    raise InputError(f"executor {spec!r} is not local, serial, ray, ray:auto, ray:HOST:PORT or ray://HOST:PORT")
