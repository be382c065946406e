"""Commands that ran the project's measurements and calibrations, kept so that each result can be produced again.

Run them from the checkout's root as modules (``python -m scripts.NAME …``: the checkout is then importable with no
path edits). Their logic lives in the packages; a script parses its arguments, makes one call and writes or prints the
result: the device sessions (``hw_backend.observe``, ``hw_backend.hf_step``, ``hw_backend.ddp``), the H200 analyses
(``simulator.h200_analyses``, ``simulator.h200_small_kernels``, ``simulator.h200_variants``), the V/f shape check
(``kdvfs.vfshape``), the calibration diagnosis and pass-context check (``kdvfs.diagnosis``; the diagnosis
is also ``kdvfs profile diagnose``), the cross-validation study (``kdvfs.synthetic.crossval_study``), the
sparse-vs-exhaustive study (``hw_backend.sparse_study``) and the bundled H200 profiles
(``kdvfs.calibrate_h200.build_h200_profiles``). Summaries computed from their output are ``kdvfs summarize``.

Kept as they ran, each the provenance of committed files, with logic of their own:

- ``scaling_mechanisms`` (``validation/scaling/mechanisms.json``): switches the model's assumptions off by replacing
  ``kdvfs.scaling``'s functions for the length of a run; as package code it would put ablation switches into the
  shipped model for one experiment.
- ``crossval_synthetic`` (``validation/synthetic/``: the sweeps and their cross-validation) and ``hf_runtime_inputs``
  (``validation/h200/runtime/``: the runtime validation's trace and schedules): a handful of library calls that wrote
  the inputs of later checks; run again, they rewrite those inputs with the model of the day.
- ``repack_ray_wheel``: a packaging tool for the lent machines (no kdvfs logic).
- ``h200x2_session5.sh``: the shell driver of the session-5 device run, as it ran.
"""


def write_report(argv, name: str, default_out: str, document, lines) -> int:
    """The thin entry of a stored-files analysis: ``-o`` (default ``default_out``), ``document(root, command)`` written
    there as JSON, ``lines(doc)`` printed. ``name`` is the module (``python -m scripts.NAME``)."""
    import argparse
    import json
    from pathlib import Path

    ap = argparse.ArgumentParser(prog=f"python -m scripts.{name}")
    ap.add_argument("-o", "--output", default=default_out)
    a = ap.parse_args(argv)
    doc = document(Path(__file__).resolve().parents[1], f"python -m scripts.{name}" + (f" -o {a.output}" if argv else ""))
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(lines(doc)))
    return 0


def emit_json(doc, out: str | None) -> int:
    """Write ``doc`` as indented JSON to ``out`` (its folder made), or print it where ``out`` is not given."""
    import json
    from pathlib import Path

    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text)
    else:
        print(text, end="")
    return 0
