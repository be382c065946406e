"""Package code returns data and logs; command lines live in ``kdvfs/cli/`` (the verbs) and ``scripts/`` (thin calls):
no package module outside the CLI parses arguments, has a ``__main__`` block or prints (session 8 moved the H200
analyses and the V/f check into the packages with their argparse entry points; they are thin scripts now)."""

import ast

from conftest import ROOT

PACKAGES = ("kdvfs", "simulator", "hw_backend")
CLI = ("kdvfs/cli/", "kdvfs/__main__.py")  # the command line itself


def _package_modules():
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if not rel.startswith(CLI):
                yield rel, ast.parse(p.read_text(), rel)


def _entry_points(tree: ast.Module) -> list[str]:
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import) and any(a.name == "argparse" for a in n.names):
            found.append(f"line {n.lineno}: import argparse")
        elif isinstance(n, ast.ImportFrom) and n.module == "argparse":
            found.append(f"line {n.lineno}: from argparse import")
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print":
            found.append(f"line {n.lineno}: print(...)")
        elif (isinstance(n, ast.If) and isinstance(n.test, ast.Compare) and isinstance(n.test.left, ast.Name)
              and n.test.left.id == "__name__"):
            found.append(f"line {n.lineno}: if __name__ == ...")
    return found


def test_package_modules_have_no_argparse_print_or_main():
    bad = {rel: f for rel, tree in _package_modules() if (f := _entry_points(tree))}
    assert not bad, bad


def test_the_check_sees_an_entry_point():
    src = "import argparse\n\ndef main():\n    print('x')\n\nif __name__ == '__main__':\n    main()\n"
    assert len(_entry_points(ast.parse(src))) == 3


def test_the_moved_analyses_are_thin_scripts_over_package_functions():
    for script, call in (("h200_small_kernels", "diagnosis"), ("h200_structure_variants", "structure_variants"),
                         ("vf_shape_check", "vf_shape_check")):
        src = (ROOT / "scripts" / f"{script}.py").read_text()
        assert call in src and len(src.splitlines()) < 40, script


def test_vf_shape_check_returns_the_stored_document(monkeypatch):
    """``kdvfs.vfshape.vf_shape_check`` on the kept fits of the README's command gives session 8's ``vf_shape.json``
    (the script writes this document): the data part and every kept fit's part (not the bundled calibration's,
    which a later refit may change)."""
    import json

    from kdvfs.vfshape import vf_shape_check

    monkeypatch.chdir(ROOT)
    fits = ["validation/rtx3080ti-calibration/structure/fits/band_memtraffic_passcap_soft-l1.calibration.json",
            *sorted(p.relative_to(ROOT).as_posix()
                    for p in (ROOT / "validation/rtx3080ti-calibration/session8/fits").glob("*.calibration.json"))]
    stored = json.loads((ROOT / "validation/rtx3080ti-calibration/session8/vf_shape.json").read_text())
    doc = vf_shape_check(fits)
    assert doc["data"] == stored["data"] and list(doc["fits"]) == fits
    assert all(doc["fits"][f] == stored["fits"][f] for f in fits)
