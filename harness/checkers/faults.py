"""The faults' own checks: every injection applied and healed, and the failure a fault declared happened (a
scenario that expects a failure passes only when that failure happens)."""
from __future__ import annotations

import re

from harness.check import Check
from harness.checkers.view import RunView


def faults_applied(run: RunView) -> list[Check]:
    records, errors = run.faults.records, run.state.fault_errors
    if not records and not errors:
        return []
    problems = [f"{f['kind']} #{f['n']}: {e}" for f in records for e in f["errors"]] + list(errors)
    unhealed = [f"{f['kind']} #{f['n']}" for f in records if f["injected_at"] and not f["healed_at"]]
    return [Check("faults_applied", not problems and not unhealed,
                  f"{len(records)} injections, all applied and healed" if not problems and not unhealed else
                  "; ".join(problems + [f"{u} never healed" for u in unhealed]))]


def expected_failure(run: RunView) -> list[Check]:
    expected = run.faults.expected_failures
    if not expected:
        return []
    state, error = run.query.get("state"), run.query.get("error")
    ok = state == "failed" and any(cls in (error or "") for cls in expected)
    got = f"failed with {error_class(error) or (error or '')[:300]!r}" if state == "failed" else \
        f"did not fail (final state {state!r})"
    return [Check("expected_failure", ok, f"expected the query to fail with {' or '.join(expected)}; it {got}")]


def error_class(error: str | None) -> str | None:
    """Spark's error class as it prints it: '[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] Some data ...'."""
    if not error:
        return None
    m = re.search(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\]", error)
    return m.group(1) if m else None
