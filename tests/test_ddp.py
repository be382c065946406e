"""``hw_backend.ddp``: the DDP session of ``scripts/h200x2_ddp.py`` as package code. Running it needs torch and
several ranks (``torchrun --standalone --nproc_per_node 2 -m scripts.h200x2_ddp --out DIR --dry-run`` runs it on the
CPU); here: it imports without them, and the script's options are exactly its configuration."""

import ast
import dataclasses
import subprocess
import sys

from conftest import ROOT

from hw_backend.ddp import DdpConfig


def test_the_script_options_are_the_config_fields():
    tree = ast.parse((ROOT / "scripts" / "h200x2_ddp.py").read_text())
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "attr", "") == "add_argument"]
    dests = [next((k.value.value for k in c.keywords if k.arg == "dest"), c.args[0].value.lstrip("-").replace("-", "_"))
             for c in calls]
    assert dests == [f.name for f in dataclasses.fields(DdpConfig)]
    # the fields that carry a unit say it; the command line keeps its option names (--window, --warmup, seconds)
    assert {"window_s", "warmup_s", "extra_window_s", "bucket_mb"} <= set(dests)
    assert DdpConfig("x").window_s == 10.0 and DdpConfig("x").bucket_mb == 25.0


def test_importing_it_loads_neither_torch_nor_pynvml():
    code = "import sys, hw_backend.ddp; print('torch' in sys.modules, 'pynvml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
