"""The ``kdvfs`` command: ``main(argv) -> int``; each verb is a small function calling the library.

Exit status: 0 success, 2 bad input or a hardware refusal (one clear message, no traceback), 130 interrupted.
One module per group of verbs, each with a ``register(sub, j)``; ``common`` holds what they share.
``simulator`` and ``hw_backend`` are imported lazily, inside the verbs only.
"""

from __future__ import annotations

import argparse
import logging
import sys

from kdvfs.cli import catalog, hw, multi, optimize, sim, trace
from kdvfs.errors import KdvfsError

__all__ = ["main"]



def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kdvfs", description="Kernel-level DVFS for LLM training.")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = p.add_subparsers(dest="cmd", required=True)

    def j(sp):
        sp.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
        return sp

    for m in (trace, catalog, optimize, sim, hw, multi):
        m.register(sub, j)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        a = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    logging.basicConfig(level=logging.INFO if a.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(a.fn(a) or 0)
    except KdvfsError as e:
        print(f"kdvfs: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kdvfs: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

