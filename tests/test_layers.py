"""The packages' import rules (DESIGN.md, "Packages"), read from the source itself.

``kdvfs`` is the domain: it imports ``simulator`` and ``hw_backend`` only from the command line (``kdvfs/cli/``), and
there only inside a verb's body, so that ``import kdvfs`` and a verb that needs neither never load them.
"""

import ast

from conftest import ROOT

OUTER = ("simulator", "hw_backend")

# kdvfs modules outside kdvfs/cli/ that still import an outer package inside a function, and why. Each entry is a
# debt, not a rule: delete it when the module no longer needs it (the test then keeps it out).
KNOWN = {
    # the H200 fit's one seam (session 10): the characterisation zoo's definitions (roles, graphs, work:
    # hw_backend.zoo), its file reader (hw_backend.characterize) and the block's stage repeats (hw_backend.workloads),
    # handed on as plain data; kdvfs.calibrate_h200, h200_rows and h200_fit import none of hw_backend. What is left
    # of the debt: the library reaches this seam by default, where a verb could hand the zoo in
    "kdvfs/zoo_source.py": {"hw_backend"},
}


def _imports(tree: ast.AST):
    """(top-level package, line, at module level) of every import in ``tree``."""
    def walk(node, nested):
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for a in child.names:
                    yield a.name.split(".")[0], child.lineno, not nested
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                yield child.module.split(".")[0], child.lineno, not nested
            yield from walk(child, inner)

    yield from walk(tree, False)


def _kdvfs_modules():
    for p in sorted((ROOT / "kdvfs").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        yield rel, list(_imports(ast.parse(p.read_text(), rel)))


def test_no_kdvfs_module_imports_simulator_or_hw_backend_at_module_level():
    bad = [f"{rel}:{line} imports {pkg}" for rel, imps in _kdvfs_modules() for pkg, line, top in imps
           if pkg in OUTER and top]
    assert not bad, "import them inside the verb that needs them (kdvfs/cli/), never at module level: " + str(bad)


def test_outside_the_command_line_kdvfs_never_imports_simulator_or_hw_backend():
    bad, used = [], set()
    for rel, imps in _kdvfs_modules():
        if rel.startswith("kdvfs/cli/"):
            continue
        for pkg, line, _ in imps:
            if pkg in OUTER:
                if pkg in KNOWN.get(rel, set()):
                    used.add(rel)
                else:
                    bad.append(f"{rel}:{line} imports {pkg}")
    assert not bad, ("the domain must not reach up into the simulator or the hardware backend; move the code that "
                     "needs them there, or hand what it needs in from the verb: " + str(bad))
    assert used == set(KNOWN), f"KNOWN lists modules that no longer import an outer package: {set(KNOWN) - used}"


def test_the_walk_sees_nested_and_module_level_imports():
    src = ("import hw_backend.fake\nif True:\n    from simulator import simulate\n"
           "def f():\n    from hw_backend import sweep\n    class C:\n        import simulator\n")
    got = sorted(_imports(ast.parse(src)))
    assert got == [("hw_backend", 1, True), ("hw_backend", 5, False), ("simulator", 3, True), ("simulator", 7, False)]


def test_record_lives_beside_the_workloads():
    """``kdvfs record`` runs ``hw_backend.record``, imported inside the verb."""
    assert not (ROOT / "kdvfs" / "record.py").exists()
    tree = ast.parse((ROOT / "kdvfs" / "cli" / "trace.py").read_text())
    lazy = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "cmd_record"
            for i in ast.walk(n) if isinstance(i, ast.ImportFrom) and i.module == "hw_backend.record"]
    assert lazy


# ------------------------------------------------------------------------------- no library logic in the command line
CLI = ROOT / "kdvfs" / "cli"
POLICY_WORDS = {"auto", "pass", "ideal", "naive", "switch-aware"}
# names whose iteration is a comparison's or the demo's job (the evaluator, the policy module, simulator.demo)
POLICY_NAMES = {"Policy", "POLICIES", "COMPARE_ROWS", "LIMITED_POLICIES", "GENERATIONS", "demo_grid"}
LIBRARY_CALLS = {"evaluate_policy", "policy_schedule", "limited_rows", "run_scenario", "run_scenarios"}


def _loops(tree: ast.AST):
    """(line, iterable) of every ``for`` loop and comprehension in ``tree``."""
    for n in ast.walk(tree):
        if isinstance(n, (ast.For, ast.AsyncFor)):
            yield n.lineno, n.iter
        elif isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            for g in n.generators:
                yield n.lineno, g.iter


def _policy_loop(it: ast.AST) -> bool:
    names = {n.id for n in ast.walk(it) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(it) if isinstance(n, ast.Attribute)}
    words = {n.value for n in ast.walk(it) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    # two policy names or more: one alone is a word like any other (`for k in ("auto", "schedule")` prints rows)
    return bool(names & POLICY_NAMES) or len(words & POLICY_WORDS) >= 2


def test_the_command_line_loops_over_no_policies_or_generations():
    """A loop over policies, generations or the demo's scenarios is a comparison's job: it belongs to the evaluator
    (``simulator.evaluate``), the policy module or ``simulator.demo``, and the verb calls it."""
    bad = []
    for p in sorted(CLI.glob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        tree = ast.parse(p.read_text(), rel)
        bad += [f"{rel}:{line} loops over policies" for line, it in _loops(tree) if _policy_loop(it)]
        bad += [f"{rel}:{n.lineno} calls {n.func.id if isinstance(n.func, ast.Name) else n.func.attr}"
                for n in ast.walk(tree) if isinstance(n, ast.Call)
                and (n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", "")) in LIBRARY_CALLS]
        bad += [f"{rel}:{n.lineno} defines {n.name}" for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in {"compare_rows", "run_demo"}]
    assert not bad, "move it to the library and call it from the verb: " + str(bad)


def test_the_check_sees_a_policy_loop():
    src = ("def f(pb):\n    for label, policy in COMPARE_ROWS:\n        pass\n"
           "    return [g for g in ('auto', 'naive')]\n")
    assert [line for line, it in _loops(ast.parse(src)) if _policy_loop(it)] == [2, 4]
    for ok in ("for r in rows:\n    pass\n", "x = [res[k] for k in ('auto', 'schedule')]\n"):
        assert not [line for line, it in _loops(ast.parse(ok)) if _policy_loop(it)]


def _lazy_imports(path, verb: str) -> set[tuple[str, str]]:
    tree = ast.parse(path.read_text())
    return {(i.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == verb
            for i in ast.walk(n) if isinstance(i, ast.ImportFrom) and i.module for a in i.names}


def test_compare_demo_and_analyze_call_the_library():
    """``kdvfs compare``, ``demo`` and ``analyze`` call their jobs in the simulator (imported inside the verb)."""
    from simulator.analyze_limiter import LimiterJudge, limiter_check_rows  # noqa: F401
    from simulator.demo import run_demo  # noqa: F401
    from simulator.evaluate import compare_rows  # noqa: F401
    from simulator.limited_whatif import limited_compare_rows  # noqa: F401

    assert {("simulator.evaluate", "compare_rows"), ("simulator.limited_whatif", "limited_compare_rows")} <= \
        _lazy_imports(CLI / "optimize.py", "cmd_compare")
    assert ("simulator.demo", "run_demo") in _lazy_imports(CLI / "sim.py", "cmd_demo")
    assert {("simulator.analyze_limiter", "LimiterJudge"), ("simulator.analyze_limiter", "limiter_check_rows")} <= \
        _lazy_imports(CLI / "analyze.py", "cmd_analyze")
