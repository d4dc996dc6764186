"""The one result of a check, whoever makes it: the verdict's checkers (harness.checkers), a soak's live checks
(harness.soak.live), a capacity trial's criteria (harness.commands.capacity).

`ok` is True (pass), False (fail) or None (unknown: not judged, because the figure is missing, the check does not
apply at this moment, or what it needs could not be read). A verdict passes only when every check passed: an
unknown is never a pass. `value` and `limit` are the figure and its bound where a check has them; `figures`, the
other figures it was judged on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "unknown"]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None
    detail: str
    value: float | None = None
    limit: float | None = None
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> Status:
        return "unknown" if self.ok is None else "pass" if self.ok else "fail"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "ok": self.ok, "detail": self.detail, "status": self.status}
        if self.value is not None or self.limit is not None:
            out.update(value=self.value, limit=self.limit)
        return {**out, **self.figures}


def status_of(check: dict[str, Any]) -> Status:
    """A recorded check's status (result.json, live_checks.jsonl); records from before `status` was written say
    it by `ok` alone, and a live check by `judged`."""
    if "status" in check:
        return check["status"]
    if check.get("judged") is False or check.get("ok") is None:
        return "unknown"
    return "pass" if check["ok"] else "fail"


def verdict_of(checks: list[Check]) -> Literal["pass", "fail"]:
    return "pass" if all(c.ok is True for c in checks) else "fail"
