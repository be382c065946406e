"""``kdvfs VERB …`` registers only the module of VERB (``build_parser(verb)``): that verb's command lines parse, fail and
show help exactly as with the full parser."""

from __future__ import annotations

import argparse

import pytest

from kdvfs import cli
from kdvfs.cli import _MODULE_OF, _verb_of, build_parser


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (act,) = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return act.choices


FULL = _subparsers(build_parser())


def test_every_verb_has_its_module():
    """Each verb of the full parser is in the map, with the module that registers it (a verb added without an entry
    still works, by registering the modules in order, but pays for all of them)."""
    assert set(_MODULE_OF) == set(FULL)
    for verb, module in _MODULE_OF.items():
        p = cli._Parser(prog="kdvfs")
        sub = p.add_subparsers(dest="cmd", required=True)
        module.register(sub, lambda sp: sp)
        assert verb in sub.choices, (verb, module.__name__)


@pytest.mark.parametrize("verb", sorted(FULL))
def test_a_verbs_parser_is_the_full_ones(verb):
    lazy = build_parser(verb)
    subs = _subparsers(lazy)
    assert verb in subs and len(subs) < len(FULL)
    assert subs[verb].format_help() == FULL[verb].format_help()
    assert subs[verb].format_usage() == FULL[verb].format_usage()


def test_command_lines_parse_and_fail_alike(capsys):
    full = build_parser()
    for argv in (["optimize", "--trace", "x", "--slack", "2"], ["-v", "simulate", "--trace", "x", "--schedule", "s.json"],
                 ["trace", "show", "--list"], ["optimize", "--trace", "x", "--json"]):
        assert build_parser(_verb_of(argv)).parse_args(argv) == full.parse_args(argv)
    for argv in (["optimize", "--no-such-option"], ["optimize", "--slack"], ["simulate", "--path", "nowhere"],
                 ["analyze", "--trace", "x"], ["demo", "--no-such-option"]):
        errors = []
        for p in (build_parser(_verb_of(argv)), full):
            with pytest.raises(SystemExit):
                p.parse_args(argv)
            errors.append(capsys.readouterr().err)
        assert errors[0] == errors[1] and errors[0]


def test_the_full_usage_and_help_list_every_verb_in_order():
    """The usage line names the verbs from the map; in the full parser that is exactly what argparse would list."""
    full = build_parser()
    listed = full.format_usage().split("{", 1)[1].split("}", 1)[0].replace("\n", "").replace(" ", "")
    assert listed.split(",") == list(FULL) == list(_MODULE_OF)
    assert "{" + ",".join(FULL) + "}" in full.format_help().replace("\n", "").replace(" ", "")


def test_the_verb_of_a_command_line():
    assert _verb_of(["optimize", "--trace", "x"]) == "optimize"
    assert _verb_of(["-v", "--verbose", "demo"]) == "demo"
    for argv in ([], ["-h"], ["--version"], ["--verb", "optimize"], ["-v"]):
        assert _verb_of(argv) is None
    # an unknown verb, or none: the full parser (its message lists every verb)
    assert len(_subparsers(build_parser("no-such-verb"))) == len(FULL)
    assert len(_subparsers(build_parser(None))) == len(FULL)
