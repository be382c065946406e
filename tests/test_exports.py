import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize("mod", ["kdvfs", "kdvfs.optimize", "simulator", "hw_backend"])
def test_all_sorted_and_importable(mod):
    m = importlib.import_module(mod)
    assert list(m.__all__) == sorted(m.__all__)
    for name in m.__all__:
        assert hasattr(m, name), f"{mod}.{name} is exported but missing"


def test_import_kdvfs_pulls_in_neither_torch_nor_pynvml():
    code = "import sys, kdvfs, kdvfs.cli, hw_backend; print('torch' in sys.modules, 'pynvml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
