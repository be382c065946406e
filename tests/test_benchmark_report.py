"""The README's speed table and docs/benchmarks.md are the benchmark JSON's, regenerated (issue 15, item 7)."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _report():
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks" / "report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_speed_table_and_benchmarks_page_come_from_the_json():
    rep = _report()
    doc = json.loads((ROOT / "validation" / "benchmarks" / "benchmarks.json").read_text())
    readme = (ROOT / "README.md").read_text()
    start = readme.index("<!-- speed table: python benchmarks/report.py --readme validation/benchmarks/benchmarks.json -->\n")
    end = readme.index("<!-- end of speed table -->")
    assert readme[readme.index("\n", start) + 1:end] == rep.speed_table(doc)
    assert (ROOT / "docs" / "benchmarks.md").read_text() == rep.report(doc)


def test_speed_table_rows():
    rep = _report()
    doc = json.loads((ROOT / "validation" / "benchmarks" / "benchmarks.json").read_text())
    table = rep.speed_table(doc)
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and not ln.startswith("| benchmark")]
    names = [r.split(" | ")[0][2:] for r in rows]
    assert names == ["fast_solver", "switch_aware", "switch_aware_dp_one_plan", "switch_aware_8x", "whatif_1000",
                     "simulate", "optimize_cli_wall (wall)", "memory_934k (wall)"]
    for r in rows:  # each row states whether its target was met, from the run
        assert r.endswith((" yes |", " **no** |")) or " partly (" in r
