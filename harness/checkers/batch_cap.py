"""The source's per-trigger cap (maxOffsetsPerTrigger, maxEventsPerTrigger) bounds every batch (Trigger.Once
ignores it). Spark's Kafka source splits the cap over the partitions by backlog and rounds a share below one
record up to one, so a batch may read up to (partitions read - 1) more; the Event Hubs source's split is exact."""
from __future__ import annotations

from harness.analysis.progress import partitions_read
from harness.check import Check
from harness.analysis.runview import RunView


def batch_cap_checks(scenario, progress: list[dict]) -> list[Check]:
    name = scenario.backend.batch_cap_option
    cap = next((v for k, v in scenario.spark.source_options.items() if k.lower() == name.lower()), None)
    if cap is None or scenario.spark.trigger.kind == "once":
        return []
    cap = int(cap)
    data = [p for p in progress if p.get("numInputRows", 0) > 0]
    slack = (lambda p: 0) if scenario.backend.batch_cap_exact else (lambda p: max(partitions_read(p), 1) - 1)
    over = [p.get("batchId") for p in data if p["numInputRows"] > cap + slack(p)]
    largest = max((p["numInputRows"] for p in data), default=0)
    return [Check("batch_cap", not over, f"{len(data)} batches read rows, largest {largest} rows ({name} {cap})"
                  + (f"; batches over the cap: {over[:20]}" if over else ""))]


def batch_cap(run: RunView) -> list[Check]:
    return batch_cap_checks(run.scenario, run.progress)
