"""``kdvfs analyze`` under the card's windowed power limiter: the check its boundary schedules must pass, and the
rows that show them against auto under the limiter.

``kdvfs.analyze`` plans each kernel throttled on its own and cannot import the simulator; under the limiter auto runs
faster, so a plan can exceed its slack there (``kdvfs simulate`` uses the limiter by default). The command line hands
``LimiterJudge.within`` to ``analyze`` as its ``accept`` and adds ``limiter_check_rows`` to the document.
"""

from __future__ import annotations

import dataclasses

from kdvfs.gpus import GpuSpec, SwitchModel
from kdvfs.limiter import LimiterModel, limiter_for, limiter_params
from kdvfs.model import default_params
from kdvfs.optimize import allocate_schedule
from kdvfs.optimize.problem import Problem
from kdvfs.profile import Profile, build_profile
from kdvfs.schedule import Schedule
from kdvfs.switching import SwitchCosts
from kdvfs.trace import Trace
from simulator.api import SimResult, simulate
from simulator.engine import SimConfig

__all__ = ["LimiterJudge", "limiter_check_rows"]

_BOUNDARY = "schedule-boundary-"
_SLACK = "schedule-boundary-slack"  # analyze's boundary schedules are named schedule-boundary-slack<pct>.json


def _slack_pct(name: str) -> float:
    return float(name.removeprefix(_SLACK).removesuffix(".json"))


class LimiterJudge:
    """The card's fitted windowed power limiter, to simulate a schedule under, with auto under it as the reference.
    ``within`` is analyze's ``accept``: a boundary schedule over its slack is planned again.

    Attributes:
        t, spec, lim, mechanism: the trace, the card, its limiter model and the switching mechanism.
        prof: the profile analyze plans on (``prof`` given, else built from the card's kernel model as analyze does).
        params: the kernel parameters the limiter runs on.
        paid: the simulation config with the switches paid (mean latencies).
        auto: auto under the limiter, switching free.
    """

    def __init__(self, t: Trace, spec: GpuSpec, prof: Profile | None, mechanism: str, sw: SwitchModel,
                 lim: LimiterModel) -> None:
        self.t, self.spec, self.lim, self.mechanism = t, spec, lim, mechanism
        # the profile analyze plans on: the one given, else built as analyze builds it
        self.prof = prof if prof is not None else build_profile(t, spec, default_params(t, spec))
        self.params = limiter_params(t, spec, lim)
        self.paid = SimConfig(mechanism=mechanism, switch=dataclasses.replace(sw, spread=0.0),
                              costs=SwitchCosts(idle_power_w=spec.idle_power_w))
        free = SimConfig(mechanism="sync", switch=SwitchModel(0.0, 0.0), costs=SwitchCosts(0.0, 0.0, spec.idle_power_w))
        self.auto = simulate(t, self.prof, allocate_schedule(Problem(t, self.prof), "static", auto=True), spec, free,
                             path="fast", limiter=lim, params=self.params)

    @classmethod
    def for_card(cls, t: Trace, spec: GpuSpec, prof: Profile | None, mechanism: str,
                 sw: SwitchModel) -> LimiterJudge | None:
        """The judge for ``spec``'s fitted limiter; None when the card has none."""
        lim = limiter_for(spec)
        return None if lim is None else cls(t, spec, prof, mechanism, sw, lim)

    def run(self, schedule: Schedule) -> SimResult:
        """``schedule`` simulated under the limiter with its switches paid."""
        return simulate(self.t, self.prof, schedule, self.spec, self.paid, path="fast", limiter=self.lim,
                        params=self.params)

    def within(self, schedule: Schedule, slack_pct: float) -> bool:
        """Whether ``schedule`` keeps ``slack_pct`` against auto under the limiter."""
        return 100 * (self.run(schedule).time_s / self.auto.time_s - 1) <= slack_pct + 1e-9


def limiter_check_rows(judge: LimiterJudge | None, schedules: dict[str, Schedule],
                       analysis_rows: list[dict]) -> list[dict]:
    """The boundary schedules simulated under the card's fitted power limiter against auto under it, where the card
    has one (the H200); empty otherwise. A row whose slack analyze planned at less (``planned_slack_pct`` in
    ``analysis_rows``) says so too."""
    names = sorted((n for n in schedules if n.startswith(_BOUNDARY)), key=_slack_pct)
    if judge is None or not names:
        return []
    rows = []
    for n in names:
        r = judge.run(schedules[n])
        rows.append({"schedule": n, "slack_pct": _slack_pct(n),
                     "mechanism": judge.mechanism, "time_change_pct": 100 * (r.time_s / judge.auto.time_s - 1),
                     "energy_change_pct": 100 * (r.energy_j / judge.auto.energy_j - 1), "switches": r.switches,
                     # its own reference, not analyze's table's auto (each kernel throttled alone): say which
                     "auto_time_s": judge.auto.time_s, "auto_energy_j": judge.auto.energy_j})
    planned = {r["slack_pct"]: r["planned_slack_pct"] for r in analysis_rows if "planned_slack_pct" in r}
    for row in rows:
        if row["slack_pct"] in planned:
            row["planned_slack_pct"] = planned[row["slack_pct"]]
    return rows
