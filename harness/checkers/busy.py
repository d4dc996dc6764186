"""A busy machine: performance checks set aside, unjudged, rather than failed.

Why: the run shares its machine. When processes outside it (another job, a build, a second run) or the hypervisor
(steal) took more than `checks.max_busy_share` of the machine's CPU over the measured window (result.json
`machine`, harness.analysis.resources.machine), a query that fell behind, a latency over its limit or a pacer that
fell behind measured its neighbours, not itself: failing the run would blame the system under test for them. So a
performance check (harness.checkers.catalogue.PERFORMANCE_CHECKS) that would fail, or could not be judged, is set
aside: status `unjudged`, its detail saying "unjudged: the machine was busy" with the figures, then what it
measured. One that passed stays passed (the query kept up even so). A `sustained` that failed stays failed when
even all the CPU the others took would not have let the query process the offered rate (its processed rate scaled
by the system under test's CPU plus theirs over its own: throughput in proportion to CPU, an optimistic bound):
a query held to 3,000 events/s by its own maxOffsetsPerTrigger fails against 6,000 offered however busy the
machine was. Correctness checks (loss, duplicates,
offsets, order, unacked deliveries, state, the oracle, expected failures, faults applied) are judged as always: a
lost event is lost however busy the machine was.

One pass over the checkers' checks, after they ran (harness.verdict): no checker knows about the machine. A
machine figure that is unknown (no /proc/stat counters in the samples) sets nothing aside.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

from harness.check import Check, status_of
from harness.checkers.catalogue import PERFORMANCE_CHECKS


def busy_cause(machine: dict[str, Any] | None) -> str | None:
    """'the machine was busy (...)' with its figures when the machine figure says it was; None when it was not
    or it is unknown."""
    m = machine or {}
    if m.get("busy") is not True:
        return None
    return (f"the machine was busy (other processes {m['other_cores']:,.2f} cores and steal: "
            f"{m['busy_share']:.1%} of its {m['cores']} cores over {m['window_s']:,.0f} s of traffic, over the "
            f"{m['max_busy_share']:.0%} bound, checks.max_busy_share)")


def set_aside_when_busy(checks: Iterable[Check], machine: dict[str, Any] | None) -> list[Check]:
    """`checks` with every required performance check that failed or was unknown set aside as unjudged when the
    machine was busy (busy_cause); the others as they are."""
    cause = busy_cause(machine)
    out = list(checks)
    if cause is None:
        return out
    return [_set_aside(c, cause) if c.name in PERFORMANCE_CHECKS and c.status in ("fail", "unknown")
            and not _fails_even_so(c, machine) else _said_even_so(c, machine) for c in out]


def best_processed_eps(check: Check, machine: dict[str, Any] | None) -> tuple[float, float] | None:
    """A failed `sustained` check's processed rate had the system under test been given all the CPU that other
    processes and steal took meanwhile, scaled as if throughput grew in proportion to CPU (an optimistic bound: a
    query gains no more than that from cores it waited for), with the rate it needed; None when the figures
    are not there."""
    m = machine or {}
    sut, others = m.get("sut_cpu_s"), (m.get("other_cpu_s") or 0.0) + (m.get("steal_cpu_s") or 0.0)
    rate = next((c for c in check.figures.get("criteria") or [] if c.get("name") == "processed_rate"), None)
    if check.name != "sustained" or not sut or not rate or rate.get("value") is None or rate.get("limit") is None:
        return None
    return rate["value"] * (sut + others) / sut, rate["limit"]


def _fails_even_so(check: Check, machine: dict[str, Any] | None) -> bool:
    """A query that would not have kept up even with all the CPU its neighbours took fails as measured: its
    failure is its own (a rate limit it is set to, work it cannot do), not the machine's."""
    best = best_processed_eps(check, machine) if check.status == "fail" else None
    return best is not None and best[0] < best[1]


def _said_even_so(check: Check, machine: dict[str, Any] | None) -> Check:
    """A failed `sustained` kept as failed on a busy machine says why the machine is not to blame."""
    if busy_cause(machine) is None or not _fails_even_so(check, machine):
        return check
    best, need = best_processed_eps(check, machine)  # type: ignore[misc]
    return replace(check, detail=f"{check.detail}; the machine was busy, but even with all the CPU other processes "
                                 f"took it would have processed at most {best:,.0f} events/s (need {need:,.0f}): "
                                 f"the failure is the query's", figures={**check.figures, "best_processed_eps": best})


def _set_aside(check: Check, cause: str) -> Check:
    measured = "as measured it fails" if check.status == "fail" else "and it could not be judged"
    return replace(check, ok=None, unjudged=cause, detail=f"unjudged: {cause}; {measured}: {check.detail}",
                   figures={**check.figures, "judged_as": check.status})


def unjudged_reason(checks: Iterable[dict[str, Any]]) -> str | None:
    """Why a run whose checks decided nothing either way is unjudged: the checks set aside, by cause, and those
    that could not be judged, each with its detail (result.json `unjudged_reason`); None when there are none."""
    set_aside: dict[str, list[str]] = {}
    unknown = []
    for c in checks:
        if status_of(c) == "unjudged":
            set_aside.setdefault(str(c.get("unjudged") or "set aside"), []).append(c["name"])
        elif status_of(c) == "unknown":
            unknown.append(f"{c['name']} ({c['detail']})")
    parts = [f"{cause}: {', '.join(names)} unjudged" for cause, names in set_aside.items()]
    if unknown:
        parts.append("could not be judged: " + "; ".join(unknown))
    return "; ".join(parts) or None
