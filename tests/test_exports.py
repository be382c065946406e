import importlib
import subprocess
import sys
import types

import pytest

PACKAGES = ["kdvfs", "kdvfs.optimize", "simulator", "hw_backend"]


def public_names(m: types.ModuleType) -> set[str]:
    """What a package offers: every name without a leading underscore that is not a submodule (httpx's
    tests/test_exported_members.py)."""
    return {n for n, v in vars(m).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}


def export_problems(m: types.ModuleType) -> list[str]:
    exported = list(getattr(m, "__all__", []))
    missing = [n for n in exported if not hasattr(m, n)]  # hasattr also loads a name exported lazily (PEP 562)
    out = []
    if exported != sorted(exported):
        out.append(f"{m.__name__}.__all__ is not sorted")
    out += [f"{m.__name__}.{n} is public but not in __all__" for n in sorted(public_names(m) - set(exported))]
    out += [f"{m.__name__}.{n} is in __all__ but missing" for n in sorted(missing)]
    return out


@pytest.mark.parametrize("mod", PACKAGES)
def test_all_lists_exactly_the_public_names(mod):
    assert export_problems(importlib.import_module(mod)) == []


def test_the_export_check_catches_a_missing_export():
    m = types.ModuleType("pkg")
    m.__all__ = ["b", "a"]
    m.a, m.c, m._private, m.sub = 1, 3, 4, types.ModuleType("pkg.sub")
    assert export_problems(m) == ["pkg.__all__ is not sorted", "pkg.c is public but not in __all__",
                                  "pkg.b is in __all__ but missing"]


def test_import_kdvfs_pulls_in_neither_torch_nor_pynvml():
    code = "import sys, kdvfs, kdvfs.cli, hw_backend; print('torch' in sys.modules, 'pynvml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_optimize_imports_no_scipy_optimize():
    """The default (fast) solver needs no scipy.optimize, whose import alone took half of ``kdvfs optimize``."""
    code = ("import sys, contextlib, io\nfrom kdvfs.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['optimize', '--trace', 'gpt3xl-llmc-rtx3080ti'])\nprint('scipy.optimize' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"]


def test_cli_start_up_imports_no_verb_library():
    """Registering the verbs imports no verb's library: a verb's heavy modules (the analysis, the simulator, the
    hardware backend, plotting) load when it runs, so every command starts fast."""
    code = ("import sys, kdvfs.cli\nprint(*[m in sys.modules for m in ('kdvfs.analyze', 'simulator', 'hw_backend', "
            "'matplotlib', 'scipy.optimize')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"] * 5


@pytest.mark.parametrize("given", [None, "3"])
def test_the_command_asks_numpy_for_one_blas_thread_unless_told(given):
    """``import kdvfs`` loads no numpy, so ``kdvfs.__main__`` can set ``OPENBLAS_NUM_THREADS`` before numpy starts
    (its thread pool cost most of a short command's wall time under load); a value in the environment is kept."""
    import os

    code = ("import os, sys, io, contextlib\nimport kdvfs.__main__ as m\nprint('numpy' in sys.modules)\n"
            "sys.argv = ['kdvfs', 'gpu', 'list']\nwith contextlib.redirect_stdout(io.StringIO()):\n    rc = m.run()\n"
            "print(rc, os.environ.get('OPENBLAS_NUM_THREADS'))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given:
        env["OPENBLAS_NUM_THREADS"] = given
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split() == ["False", "0", given or "1"]
