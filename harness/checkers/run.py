"""The run itself: it completed (nothing went wrong in the harness or the query beyond what a fault declared)."""
from __future__ import annotations

from harness.check import Check
from harness.analysis.runview import RunView


def completed(run: RunView) -> list[Check]:
    if run.state.error and not run.faults.failed_as_expected:
        return [Check("completed", False, run.state.error)]
    return []
