"""Whether a verdict holds: the runs of each mode of `harness bench verdicts` against each other, and the goal.

Each run's class (harness.bench.verdict_row: pass, fail, unjudged (busy), unjudged, no result) is mapped to the
class it agrees as:
- in a busy mode, `unjudged (busy)` agrees as `pass`: the judge declining to judge a query on a machine that
  other work kept busy is the honest answer, not a verdict that flipped; a FAIL there is one;
- in the quiet and cold modes every class is itself: an `unjudged (busy)` there means the machine was not quiet
  (another job ran), and the run proves nothing about the verdict.
A mode agrees when all its runs agree as one class and that class is pass or fail: runs that were not judged, or
left no result, agree on nothing.

The goal, which the exit code reports (0 met, 1 not):
- `--expect pass`: every mode agrees as pass (quiet and cold: every run PASS; busy: PASS or unjudged (busy),
  never FAIL);
- `--expect fail`: every mode agrees as fail, and every run failed a keeping-up check (KEEPING_UP: `sustained`
  with status fail): an overloaded query must fail because it did not keep up, not for something else;
- no `--expect`: every mode agrees, and all modes as the same class: the verdict does not depend on the machine.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

from harness.bench.verdict_row import CLASSES, FAIL, PASS, UNJUDGED_BUSY

# the checks that say whether the query kept up with the offered load (its lag, its processed rate); `headroom`,
# the batch time against the trigger, is room to spare, not keeping up (harness.checkers.sustained)
KEEPING_UP = ("sustained",)
EXPECTED = (PASS, FAIL)


@dataclass(frozen=True)
class Mode:
    """How a run is run: on the quiet machine, with `busy_cores` cores busy, or cold (no class archives)."""
    kind: Literal["quiet", "busy", "cold"]
    busy_cores: int = 0

    @property
    def label(self) -> str:
        return f"busy {self.busy_cores}" if self.kind == "busy" else self.kind


def agrees_as(mode: Mode, run_class: str) -> str:
    return PASS if mode.kind == "busy" and run_class == UNJUDGED_BUSY else run_class


def count_line(label: str, classes: list[str]) -> str:
    """`quiet: 5/5 pass` when every run has one class, else each class's count, pass and fail always named:
    `busy 1: 4 pass, 1 unjudged (busy), 0 fail`."""
    n, counts = len(classes), Counter(classes)
    if not classes:
        return f"{label}: no run"
    if len(counts) == 1:
        return f"{label}: {n}/{n} {classes[0]}"
    return f"{label}: " + ", ".join(f"{counts[c]} {c}" for c in CLASSES if counts[c] or c in (PASS, FAIL))


def mode_agreement(mode: Mode, rows: list[dict]) -> dict:
    """One mode's runs: its line, its counts, and the class they agree as (None when they do not)."""
    classes = [r["class"] for r in rows if r["mode"] == mode.label]
    as_ = {agrees_as(mode, c) for c in classes}
    agreed = next(iter(as_)) if len(as_) == 1 and as_ <= {PASS, FAIL} else None
    return {"mode": mode.label, "kind": mode.kind, "runs": len(classes), "counts": dict(Counter(classes)), "agreed": agreed,
            "line": count_line(mode.label, classes)}


def _failed_keeping_up(row: dict) -> bool:
    return any(d["name"] in KEEPING_UP and d["status"] == FAIL for d in row["deciding"])


def goal(agreements: list[dict], rows: list[dict], expect: str | None) -> dict:
    """{"met": bool, "expect": ..., "why": words}: the goal above, from the modes' agreements and the rows."""
    def out(met: bool, why: str) -> dict:
        return {"met": met, "expect": expect, "why": why}

    apart = [a for a in agreements if a["agreed"] is None]
    if apart:
        return out(False, "; ".join(f"{a['line']}: the runs do not agree" for a in apart))
    agreed = {a["agreed"] for a in agreements}
    if expect is None:
        if len(agreed) > 1:
            return out(False, "the modes disagree: " + ", ".join(f"{a['mode']} {a['agreed']}" for a in agreements))
        return out(True, f"every mode agrees as {agreed.pop()}")
    wrong = [a for a in agreements if a["agreed"] != expect]
    if wrong:
        return out(False, "; ".join(f"{a['mode']} agrees as {a['agreed']}, expected {expect}" for a in wrong))
    if expect == FAIL:
        other = [r["run"] for r in rows if not _failed_keeping_up(r)]
        if other:
            return out(False, f"{', '.join(other)} failed, but not a keeping-up check ({', '.join(KEEPING_UP)})")
        return out(True, f"every run failed on keeping up ({', '.join(KEEPING_UP)}), in every mode")
    busy = [a["mode"] for a in agreements if a["kind"] == "busy"]
    return out(True, "every mode agrees as pass" + (f" ({', '.join(busy)}: pass or {UNJUDGED_BUSY})" if busy else ""))
