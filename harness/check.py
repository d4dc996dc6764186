"""The one result of a check, whoever makes it: the verdict's checkers (harness.checkers), a soak's live checks
(harness.soak.live), a capacity trial's criteria (harness.commands.capacity).

`ok` is True (pass), False (fail) or None (unknown: not judged, because the figure is missing, the check does not
apply at this moment, or what it needs could not be read). `value` and `limit` are the figure and its bound where
a check has them; `figures`, the other figures it was judged on.

A performance check whose run's machine was busy (other processes and steal over the scenario's bound,
harness.checkers.busy) and that would have failed or been unknown is set aside: `unjudged` says why, `ok` is None
and its status "unjudged"; one that passed stays passed. Correctness checks are never set aside.

The verdict (`verdict_of`): `fail` when a required check failed; else `unjudged` when one is unknown or unjudged
(what could not be judged is never a pass, nor a failure of the system under test); else `pass`. Each verdict has
its exit code (`exit_code`): 0, 1 and 3.

A check the scenario does not ask for (`required` False: a latency limit that is not set, `sustained` in a
scenario whose point is a backlog) is still listed, so every run shows the same checks, with status
"not required" and its figures; it never decides the verdict.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Literal

Status = Literal["pass", "fail", "unknown", "unjudged", "not required"]
Verdict = Literal["pass", "fail", "unjudged"]
# what `harness run` (and `harness check`, a repeat, a sweep, a soak, a capacity search) exits with, per verdict;
# 2 is bad input and 130 an interrupted run, decided before any verdict
EXIT_CODES: dict[str, int] = {"pass": 0, "fail": 1, "unjudged": 3}
UNDECIDED: tuple[Status, ...] = ("unknown", "unjudged")  # not judged: neither a pass nor a failure


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None
    detail: str
    value: float | None = None
    limit: float | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    required: bool = True
    unjudged: str | None = None  # why it was set aside unjudged (the machine was busy); ok is then None

    @property
    def status(self) -> Status:
        if not self.required:
            return "not required"
        if self.unjudged:
            return "unjudged"
        return "unknown" if self.ok is None else "pass" if self.ok else "fail"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "ok": self.ok, "detail": self.detail, "status": self.status}
        if self.unjudged:
            out["unjudged"] = self.unjudged
        if self.value is not None or self.limit is not None:
            out.update(value=self.value, limit=self.limit)
        return {**out, **self.figures}


def status_of(check: dict[str, Any]) -> Status:
    """A recorded check's status (result.json, live_checks.jsonl); records from before `status` was written say
    it by `ok` alone, and a live check by `judged`."""
    if check.get("status"):
        return check["status"]
    if check.get("judged") is False or check.get("ok") is None:
        return "unknown"
    return "pass" if check["ok"] else "fail"


def counts_against(check: dict[str, Any]) -> bool:
    """A recorded check that keeps its run from passing: failed, unknown or unjudged."""
    return status_of(check) in ("fail", *UNDECIDED)


def verdict_of(checks: Iterable[Check | dict[str, Any]]) -> Verdict:
    """Fail beats unjudged beats pass: `fail` when a required check failed, else `unjudged` when one is unknown or
    unjudged, else `pass` (checks as made, or as recorded in result.json)."""
    statuses = {c.status if isinstance(c, Check) else status_of(c) for c in checks}
    if "fail" in statuses:
        return "fail"
    return "unjudged" if statuses & set(UNDECIDED) else "pass"


def exit_code(verdict: str | None) -> int:
    """The process's exit code for a verdict (EXIT_CODES); anything else is 1."""
    return EXIT_CODES.get(str(verdict), 1)


# Checks a checker reports only when they fail (the run itself went wrong; a soak stopped before its end): a judged
# run without one passed it. What each means when it passed, for listings that show every check (junit.xml).
REPORTED_ONLY_WHEN_FAILED = {
    "completed": "the run completed: nothing went wrong in the harness or the query beyond what a fault declared",
    "ran_to_the_end": "the soak ran to the end of its traffic",
}
