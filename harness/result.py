"""result.json as one typed model: what every tool (report, console, comparisons, CI) reads from a run.

`schema_version` changes when a field changes meaning or goes away; adding a field does not bump it.
`verdict` is `fail` when a required check failed; `unjudged` when none failed but one could not be judged (a
check unknown, a performance check set aside because the machine was busy with other work: `machine`), or the run
as a whole could not be (a malformed sink row, a missing file, a run stopped from outside): `unjudged_reason` then
says which checks and why, and the figures that could be computed are kept; `pass` otherwise.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from harness.check import counts_against

SCHEMA_VERSION = 2


class CheckResult(BaseModel):
    """One check as harness.check.Check records it: `ok` None with status "unknown" is a check that could not be
    judged; with status "unjudged", a performance check set aside because the machine was busy (`unjudged` says
    so, `judged_as` what it measured: fail or unknown). Either keeps the run from passing and makes it `unjudged`
    unless another check failed. Status "not required": a check the scenario does not ask for (listed with its
    figures, never deciding the verdict). The other figures a check was judged on (harness.check.Check.figures)
    are kept as they are."""
    model_config = ConfigDict(extra="allow")

    name: str
    ok: bool | None
    detail: str
    # None: written before status was
    status: Literal["pass", "fail", "unknown", "unjudged", "not required"] | None = None
    value: float | None = None
    limit: float | None = None

    @property
    def counts_against(self) -> bool:
        """Failed, unknown or unjudged: keeps the run from passing."""
        return counts_against(self.model_dump())


class Counts(BaseModel):
    produced: int = 0
    acked: int = 0
    delivered_unique: int = 0
    duplicates: int = 0
    lost: int = 0
    expected_lost: int = 0
    unread: int = 0
    failed: int = 0
    failed_expected: int = 0
    delivered_unacked: int = 0
    misplaced: int = 0
    order_violations: int = 0
    sink_rows: int = 0
    pacer_skipped: int = 0
    unacked_at_exit: int = 0
    # of `duplicates`, those a fault declared (an at-least-once sink's re-run batches: harness.effects.DupRange);
    # absent (None) when no fault declared any, so runs without them read as they always did
    expected_duplicates: int | None = None

    @model_serializer(mode="wrap")
    def _declared_only(self, handler):
        out = handler(self)
        if out.get("expected_duplicates") is None:
            out.pop("expected_duplicates", None)
        return out


class Percentiles(BaseModel):
    p50: float = 0.0
    p90: float = 0.0
    p99: float = 0.0
    p999: float = 0.0
    max: float = 0.0


class Throughput(BaseModel):
    produce_eps: float = 0.0
    process_rps: float = 0.0
    target_eps: float = 0.0


class QueryInfo(BaseModel):
    name: str = "passthrough"
    oracle: str = "events"
    trigger: str = "processingTime"
    final_state: str | None = None
    exit_code: int | None = None
    error: str | None = None
    error_class: str | None = None
    kills: int = 0
    restarts: int = 0


class FaultRecord(BaseModel):
    kind: str
    fault: int
    n: int
    inject_started_at: float | None = None  # when inject began (its effects may start then)
    injected_at: float | None = None  # when inject returned
    healed_at: float | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
    effect: dict[str, Any] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)


class RunResult(BaseModel):
    model_config = ConfigDict(validate_assignment=True)  # the judge fills it in step by step

    schema_version: int = SCHEMA_VERSION
    scenario: str
    backend: str
    verdict: Literal["pass", "fail", "unjudged"]
    unjudged_reason: str | None = None
    checks: list[CheckResult] = Field(default_factory=list)
    counts: Counts = Field(default_factory=Counts)
    expected_lost_by_partition: dict[str, int] = Field(default_factory=dict)
    lost_by_partition: dict[str, int] = Field(default_factory=dict)
    throughput: Throughput = Field(default_factory=Throughput)
    latency_ms: Percentiles = Field(default_factory=Percentiles)  # the steady part's (`steady`): the headline
    latency_measured_ms: Percentiles = Field(default_factory=Percentiles)  # the whole measured window's
    publish_delay_ms: Percentiles = Field(default_factory=Percentiles)
    batches: int = 0
    batch_stats: dict[str, Any] = Field(default_factory=dict)
    lag_events: dict[str, Any] = Field(default_factory=dict)
    duration_s: float = 0.0
    traffic_s: float = 0.0
    producers: dict[str, Any] = Field(default_factory=dict)
    query: QueryInfo = Field(default_factory=QueryInfo)
    faults: list[FaultRecord] = Field(default_factory=list)
    oracle: dict[str, Any] | None = None
    source: dict[str, Any] = Field(default_factory=dict)  # the source's own task records (Event Hubs)
    placement: dict[str, Any] = Field(default_factory=dict)  # where Spark ran the scan tasks (its event log)
    consumers: dict[str, Any] = Field(default_factory=dict)  # Kafka consumers created per batch (the TCP proxy)
    resources: dict[str, Any] = Field(default_factory=dict)  # every process's RSS/CPU/fds/threads, disk, leaks
    # the harness's own CPU against the system under test's over the traffic (harness.analysis.resources.footprint)
    footprint: dict[str, Any] = Field(default_factory=dict)
    # what processes outside the run took of the machine's CPU over the traffic, steal apart, against the bound
    # (checks.max_busy_share): `busy` sets failing performance checks aside (harness.analysis.resources.machine)
    machine: dict[str, Any] = Field(default_factory=dict)
    latency_windows: list[dict[str, float]] = Field(default_factory=list)  # per tenth of the window: noise
    warmup: dict[str, Any] = Field(default_factory=dict)  # producers.warmup_s: its events' figures, kept apart
    steady: dict[str, Any] = Field(default_factory=dict)  # where the steady state begins (harness.analysis.steady)
    startup: dict[str, Any] = Field(default_factory=dict)  # time to the first data batch, the cold part's latency
    startup_steps: dict[str, Any] = Field(default_factory=dict)  # which start-up step took what (analysis.startup)
    sustain: dict[str, Any] = Field(default_factory=dict)  # lag trend, processed vs offered, batch p50 (sustained)
    recovery: list[dict[str, Any]] = Field(default_factory=list)  # per injected fault (harness.analysis.recovery)
    backend_info: dict[str, Any] = Field(default_factory=dict)
    end_offsets: dict[str, int] = Field(default_factory=dict)
    run_dir: str = ""
    versions: dict[str, str] = Field(default_factory=dict)
    # the checks the scenario's runs are judged by (harness.checkers.catalogue): junit.xml's cases, in every run
    expected_checks: list[str] = Field(default_factory=list)
    # what the run ran on, recorded at run time (harness.environment): harness commit, Java, Kafka, cores
    environment: dict[str, str] = Field(default_factory=dict)
    # what the judge could not read and left out: torn JSON lines, sink files the log lists but the run
    # directory lacks (harness.jsonl.unreadable, harness.sink.missing_files), each {file, count, detail, ...}
    unreadable: list[dict[str, Any]] = Field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
