"""The one result of a check, whoever makes it: the verdict's checkers (harness.checkers), a soak's live checks
(harness.soak.live), a capacity trial's criteria (harness.commands.capacity).

`ok` is True (pass), False (fail) or None (unknown: not judged, because the figure is missing, the check does not
apply at this moment, or what it needs could not be read). A verdict passes only when every check passed: an
unknown is never a pass. `value` and `limit` are the figure and its bound where a check has them; `figures`, the
other figures it was judged on.

A check the scenario does not ask for (`required` False: a latency limit that is not set, `sustained` in a
scenario whose point is a backlog) is still listed, so every run shows the same checks, with status
"not required" and its figures; it never decides the verdict.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "unknown", "not required"]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None
    detail: str
    value: float | None = None
    limit: float | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    required: bool = True

    @property
    def status(self) -> Status:
        if not self.required:
            return "not required"
        return "unknown" if self.ok is None else "pass" if self.ok else "fail"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "ok": self.ok, "detail": self.detail, "status": self.status}
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
    """A recorded check that keeps its run from passing: failed, or unknown."""
    return status_of(check) in ("fail", "unknown")


def verdict_of(checks: list[Check]) -> Literal["pass", "fail"]:
    return "pass" if all(c.ok is True for c in checks if c.required) else "fail"


# Checks a checker reports only when they fail (the run itself went wrong; a soak stopped before its end): a judged
# run without one passed it. What each means when it passed, for listings that show every check (junit.xml).
REPORTED_ONLY_WHEN_FAILED = {
    "completed": "the run completed: nothing went wrong in the harness or the query beyond what a fault declared",
    "ran_to_the_end": "the soak ran to the end of its traffic",
}
