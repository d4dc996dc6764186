"""The source's per-trigger cap (maxOffsetsPerTrigger, maxEventsPerTrigger) bounds every batch (Trigger.Once
ignores it). Spark's Kafka source splits the cap over the partitions by backlog and rounds a share below one
record up to one, so a batch may read up to (partitions read - 1) more; the Event Hubs source's split is exact."""
from __future__ import annotations

from harness.analysis.changes import CAPS
from harness.analysis.progress import epoch_s, kafka_cap_slack
from harness.check import Check
from harness.analysis.runview import RunView


def batch_cap_checks(scenario, progress: list[dict], changes: list[dict] | None = None) -> list[Check]:
    """Every batch against the cap in force when it ran: the scenario's, then each change's that set it
    (harness.faults.change: a batch of phase B is held to phase B's cap)."""
    name = scenario.backend.batch_cap_option
    cap = next((v for k, v in scenario.spark.source_options.items() if k.lower() == name.lower()), None)
    caps = [(0.0, cap)] + [(c["at"], _cap_set(c)) for c in changes or [] if _cap_set(c, "unchanged") != "unchanged"]
    if all(c is None for _, c in caps) or scenario.spark.trigger.kind == "once":
        return []
    data = [p for p in progress if p.get("numInputRows", 0) > 0]
    switched = min((c["at"] for c in changes or [] if "protocol" in c["changed"]), default=float("inf"))
    exact = scenario.backend.batch_cap_exact  # Kafka's source rounds shares up (also after a switch to it)
    slack = lambda p: 0 if exact and _at(p) < switched else kafka_cap_slack(p)  # noqa: E731

    def cap_of(p) -> int | None:
        value = [c for since, c in caps if since <= _at(p)][-1]
        return None if value is None else int(value)

    over = [p.get("batchId") for p in data if cap_of(p) is not None and p["numInputRows"] > cap_of(p) + slack(p)]
    largest = max((p["numInputRows"] for p in data), default=0)
    stated = " then ".join("none" if c is None else str(int(c)) for _, c in caps)
    return [Check("batch_cap", not over, f"{len(data)} batches read rows, largest {largest} rows ({name} {stated})"
                  + (f"; batches over the cap: {over[:20]}" if over else ""))]


def _at(progress: dict) -> float:
    return epoch_s(progress["timestamp"]) if "timestamp" in progress else 0.0


def _cap_set(change: dict, unchanged: str | None = None):
    """The per-trigger cap a change (harness.faults.change) set, under either source's name (a switch of source
    names it anew; None: no cap any more); `unchanged` when it changed none."""
    options = change["changed"].get("source_options") or {}
    found = {k: v for k, v in options.items() if k.lower() in CAPS}
    if not found:
        return unchanged if "protocol" not in change["changed"] else None
    return next((v for v in found.values() if v is not None), None)


def batch_cap(run: RunView) -> list[Check]:
    return batch_cap_checks(run.scenario, run.progress, run.changes)
