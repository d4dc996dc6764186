"""What a fault declares it makes expected, as plain data: the contract between the faults that declare it and
the checkers that judge against it (harness.reconcile, harness.verdict), recorded in faults.jsonl.

Exact loss ranges, the input ranges whose events may be written twice (an at-least-once sink's re-run batches),
the Spark error class the query must fail with, whether the query is down for a while, whether producer sends may
fail, a recreated stream's new generation, the source counters the fault must show. Nothing here acts on a run:
it sits below both the faults and the judge (harness.spark.reruns reads the duplicate ranges from a checkpoint).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

FAULT_PRODUCER_BASE = 10_000  # producer index of events a fault writes itself (acks-fault-<k>.arrows): never a process's


@dataclass
class LossRange:
    """Acked events at [start, end) of `partition` may be gone. `acked_before_ms` limits it to one generation
    of the partition (a deleted and recreated topic reuses offsets); `exact` says the range was read from the
    broker (records really removed) rather than bounded from the query's position."""

    partition: int
    start: int
    end: int
    acked_before_ms: float | None = None
    exact: bool = True


@dataclass
class DupRange:
    """Events read from [start, end) of input `partition` may appear twice in the sink: a batch that read them
    was written and then re-run (an at-least-once sink: Kafka's). Input positions, as the sink rows carry them."""

    partition: int
    start: int
    end: int


@dataclass
class LogExpectation:
    """What Spark must have logged about a fault, counted by the measuring step (harness.analysis.spark_log) and
    judged by `spark_logged`: `what` is one of SPARK_LOG_EVENTS, `executor` the Spark executor id it is about (None:
    any), and its count must lie in [minimum, maximum] (maximum None: no upper bound). A fault that pauses an
    executor past spark.network.timeout declares its removal; one shorter than that declares none."""

    what: str
    executor: str | None = None
    minimum: int = 0
    maximum: int | None = None


# what the measuring step counts, and where Spark says it
SPARK_LOG_EVENTS = {
    "heartbeat_timeout": "the driver's log: HeartbeatReceiver removing an executor with no recent heartbeats",
    "executor_lost": "the driver's log: TaskSchedulerImpl's \"Lost executor <id> on <host>: <reason>\"",
    "tasks_lost": "the event log: tasks that ended with ExecutorLostFailure on the executor",
    "tasks_rerun": "the event log: of those, tasks a later attempt of which succeeded on another executor",
}


# what a second driver started on a running query's checkpoint came to (harness.faults.second_driver), as measured
CONCURRENT_OUTCOMES = {
    "second_refused": "the second driver failed before committing a batch, with Spark's concurrent-update error",
    "second_failed": "the second driver committed batches, then failed with Spark's concurrent-update error",
    "first_failed": "the running query failed with Spark's concurrent-update error; the second ran on",
    "both_ran": "both drivers ran batches on the checkpoint and neither failed",
    "other": "anything else (a driver failed with another error, or the second never started its query)",
}


@dataclass
class Effect:
    loss: list[LossRange] = field(default_factory=list)
    duplicates: list[DupRange] = field(default_factory=list)  # input ranges whose events may be written twice
    failure: str | None = None  # Spark error class the query must fail with, e.g. KAFKA_DATA_LOSS
    query_down: bool = False  # the query process is expected to be down (and restarted) for a while
    send_failures: bool = False  # producer sends may fail while the fault is active
    new_generation_ms: float | None = None  # the stream was recreated then: its offsets restart at 0
    expect_source: dict[str, int] = field(default_factory=dict)  # source task counters that must reach these
    gap_visible: bool = False  # the source can see the whole removed range (it still exists around it)
    expect_log: list[LogExpectation] = field(default_factory=list)  # what Spark must have logged (spark_logged)
    query_paused: bool = False  # the driver or an executor frozen, not killed: the same driver must carry on
    concurrent: str | None = None  # a second driver on the checkpoint: the outcome declared (CONCURRENT_OUTCOMES)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not out["duplicates"]:  # only faults that declare some say so (recorded runs read as they were)
            del out["duplicates"]
        for key in ("expect_log", "query_paused", "concurrent"):  # likewise: only the faults that declare them
            if not out[key]:
                del out[key]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Effect":
        return cls(loss=[LossRange(**r) for r in data.get("loss", [])],
                   duplicates=[DupRange(**r) for r in data.get("duplicates", [])], failure=data.get("failure"),
                   query_down=bool(data.get("query_down")), send_failures=bool(data.get("send_failures")),
                   new_generation_ms=data.get("new_generation_ms"), expect_source=dict(data.get("expect_source") or {}),
                   gap_visible=bool(data.get("gap_visible")),
                   expect_log=[LogExpectation(**r) for r in data.get("expect_log", [])],
                   query_paused=bool(data.get("query_paused")), concurrent=data.get("concurrent"))

