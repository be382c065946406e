"""What a new user and a hostile tester found in session 12, each fixed and kept fixed; first session 11's six
leftovers (whatif and frontier with an anchored profile, ``-o`` over a file of another kind, an interrupted whatif,
``Kernel.concurrency`` dropped by readers, unmatched Chrome "B" events). The commands and numbers are in
``validation/user-findings12/README.md``.

A refused command gives one line (``kdvfs: error: ...``) and exit 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import one_error_line, run_cli

ROOT = Path(__file__).resolve().parents[1]
ANCHOR_A1 = ROOT / "validation" / "h200" / "lease_anchor" / "leaseA" / "anchorA1.json.gz"
TRACE = "gpt3xl-torch-h200-bf16"  # bundled H200 step


@pytest.fixture(scope="module")
def anchored(tmp_path_factory):
    """(a profile built with --anchors, the same profile with its header's card words dropped)."""
    from kdvfs.cli import main

    d = tmp_path_factory.mktemp("anchored")
    p = d / "p.csv"
    assert main(["profile", "build", "--trace", TRACE, "--gpu", "h200", "--anchors", str(ANCHOR_A1), "-o", str(p)]) == 0
    lines = p.read_text().splitlines(keepends=True)
    bare = d / "bare.csv"
    bare.write_text(" ".join(w for w in lines[0].split() if not w.startswith("card.")) + "\n" + "".join(lines[1:]))
    return p, bare


# ------------------------------------------------ leftover 1: whatif with an anchored profile uses the profile's card
def test_whatif_with_an_anchored_profile_prices_the_profiles_card(anchored, capsys):
    """whatif's workers built the card by name: with a profile built with --anchors the limiter's idle card, the gaps
    and the switch stalls were the bundled card's (a caution said so). They now adapt the card to the header, as
    compare does: the rows are compare's rows for the same switch model, and differ from the bare profile's."""
    p, bare = anchored
    for limiter, naive in (("auto", "limiter-aware naive"), ("off", "kernel naive")):
        rows = {}
        for prof in (p, bare):
            code, out, err = run_cli(["whatif", "--trace", TRACE, "--profile", str(prof), "--latency", "6e-3",
                                      "--mechanism", "sync", "--policy", "auto", "--policy", "naive", "--executor",
                                      "serial", "--limiter", limiter, "--json"], capsys)
            assert code == 0, err
            assert ("Card: the profile was built" in err) == (prof == p), err
            assert "Caution" not in err
            rows[prof] = {r["policy"]: r for r in json.loads(out)}
        assert rows[p]["naive"]["energy_change_pct"] != rows[bare]["naive"]["energy_change_pct"]
        code, out, err = run_cli(["compare", "--trace", TRACE, "--profile", str(p), "--switch-latency", "6e-3",
                                  "--mechanism", "sync", "--limiter", limiter, "--json"], capsys)
        assert code == 0, err
        cmp = {r["policy"]: r for r in json.loads(out)["rows"]}
        for pol, cpol in (("auto", "auto"), ("naive", naive)):
            for k in ("energy_change_pct", "time_change_pct"):
                assert rows[p][pol][k] == pytest.approx(cmp[cpol][k], abs=1e-9), (limiter, pol, k)


# -------------------------------------------------------------- leftover 2: frontier reads the profile's card header
def test_frontier_checks_and_names_the_profiles_card(anchored, tmp_path, capsys):
    """frontier took a profile's `card.` header without a look: a damaged card word was used silently where every
    other verb refuses it, and the card it was built for went unnamed. (The frontier itself is priced on the profile's
    kernel times and energies with free switching, so its numbers do not move.)"""
    import re

    p, bare = anchored
    docs = []
    for prof in (p, bare):
        code, out, err = run_cli(["frontier", "--trace", TRACE, "--profile", str(prof), "--slack-max", "2", "--json"],
                                 capsys)
        assert code == 0, err
        assert ("Card: the profile was built (`profile build --anchors`) for the card of anchorA1.json.gz"
                in " ".join(err.split())) == (prof == p), err
        docs.append(json.loads(out))
    assert docs[0] == docs[1]
    lines = p.read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.csv"
    bad.write_text(re.sub(r"card\.static_w=\S+", "card.static_w=abc", lines[0]) + "".join(lines[1:]))
    code, out, err = run_cli(["frontier", "--trace", TRACE, "--profile", str(bad), "--slack-max", "2"], capsys)
    one_error_line(code, out, err, "static_w", "is not a number")
