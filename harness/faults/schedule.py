"""A scenario's fault schedule as concrete steps: when each injection happens and when it is healed.

Pure and seeded (the scenario's seed and the fault's position), so a failing run replays the same schedule.
Times are seconds after the start of traffic; a step with no heal time is healed before the drain.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from harness.faults.base import FaultOptions


@dataclass(frozen=True)
class Step:
    fault_index: int  # position in the scenario's [[faults]] list
    n: int  # injection number of that fault, from 0
    inject_s: float
    heal_s: float | None


def plan(faults: list[FaultOptions], seed: int, horizon_s: float) -> list[Step]:
    """Every injection in time order. Repeating faults (every_s) stop at until_s, count, or the horizon (the
    end of traffic), whichever comes first; a single injection may lie past the horizon on purpose (a fault
    while the query catches up after traffic)."""
    steps = []
    for i, f in enumerate(faults):
        rng = random.Random(seed * 1_000_003 + i)
        if f.every_s is None:
            times = [f.first_s]
        else:
            limit = min(x for x in (f.until_s, horizon_s) if x is not None)
            times, t = [], f.first_s
            while t <= limit and (f.count is None or len(times) < f.count):
                times.append(t)
                t += f.every_s
        for n, base in enumerate(times):
            at = base + (rng.uniform(0.0, f.jitter_s) if f.jitter_s else 0.0)
            heal = None if f.heal_after_s is None else at + f.heal_after_s
            steps.append(Step(i, n, round(at, 6), None if heal is None else round(heal, 6)))
    return sorted(steps, key=lambda s: (s.inject_s, s.fault_index, s.n))


def scenario_plan(scenario: Any) -> list[Step]:
    """The steps a run of `scenario` (a harness.config.Scenario, read by attribute: this module sits below it) takes,
    as the runner's nemesis plans them: its [[faults]] and seed, with the measured window (producers.duration_s)
    as the horizon. The scenario's loader refuses a schedule whose declared injections do not fit it, and the
    judge holds the recorded injections against it (harness.checkers.faults)."""
    return plan(list(scenario.faults), scenario.seed, scenario.producers.duration_s)


def last_action_s(steps: list[Step]) -> float:
    return max([s.inject_s for s in steps] + [s.heal_s for s in steps if s.heal_s is not None], default=0.0)
