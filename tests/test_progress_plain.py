"""Long work off a terminal (tester8: ``whatif`` ran 81 s with nothing on stderr when it was a pipe): a progress line
on stderr at most every ``PROGRESS_EVERY_S`` seconds, with done/total and the time elapsed, never on stdout."""

import io
import json

from conftest import run_cli

import kdvfs.cli.common as common
from kdvfs.cli.common import PlainProgress, progress, stage_progress


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_line_at_most_every_period_with_done_total_and_elapsed():
    clock, buf = Clock(), io.StringIO()
    with PlainProgress("what-if", clock=clock, stream=buf) as p:
        task = p.add_task("what-if", total=40)
        for _ in range(40):  # one scenario every 0.9 s: 36 s in all
            clock.t += 0.9
            p.advance(task, 1)
    lines = buf.getvalue().splitlines()
    assert lines == ["what-if: 12/40 (30 %), 11 s elapsed", "what-if: 24/40 (60 %), 22 s elapsed",
                     "what-if: 36/40 (90 %), 32 s elapsed"]


def test_short_work_says_nothing():
    clock, buf = Clock(), io.StringIO()
    with PlainProgress("sweep", clock=clock, stream=buf) as p:
        task = p.add_task("sweep", total=None)
        for n in range(1, 9):
            clock.t += 1.0
            p.update(task, completed=n, total=8)
    assert buf.getvalue() == ""


def test_stages_report_a_fraction():
    clock, buf = Clock(), io.StringIO()
    p = PlainProgress("import", clock=clock, stream=buf)
    clock.t += 12
    p.stage("read", 0.25)
    clock.t += 1
    p.stage("read", 0.5)  # within the period: nothing
    assert buf.getvalue() == "import: read: 25 %, 12 s elapsed\n"


def test_off_a_terminal_the_verbs_get_plain_progress_and_stage_callbacks():
    from kdvfs.console import make_console

    assert isinstance(progress(None, 5, "x"), PlainProgress)  # pytest's stderr is not a terminal
    with stage_progress(make_console(io.StringIO()), "import") as prog:
        assert callable(prog)
    with stage_progress(None, "import") as prog:
        assert prog is None


def test_whatif_off_a_terminal_logs_progress_on_stderr_and_nothing_on_stdout(capsys, monkeypatch):
    args = ["whatif", "--switch-model", "h200", "--preset-latency-only", "--mechanism", "sync", "--policy", "auto",
            "--policy", "naive", "--executor", "serial", "--json"]
    code, quiet_out, quiet_err = run_cli(args, capsys)
    assert code == 0 and quiet_err == ""  # under the period: no line
    monkeypatch.setattr(common, "PROGRESS_EVERY_S", 0.0)
    code, out, err = run_cli(args, capsys)
    assert code == 0 and out == quiet_out and json.loads(out)
    lines = err.splitlines()
    assert lines and lines[-1].startswith("what-if: 2/2 (100 %), ") and lines[-1].endswith(" s elapsed")
