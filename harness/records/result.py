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

    name: str = Field(description="the check's name (harness.checkers.catalogue), a JUnit test case's name")
    ok: bool | None = Field(description="passed (true), failed (false) or could not be judged (null)")
    detail: str = Field(description="what was measured against what, in words")
    status: Literal["pass", "fail", "unknown", "unjudged", "not required"] | None = Field(
        None, description="pass, fail, unknown (could not be judged), unjudged (a performance check set aside: the "
                          "machine was busy), not required (listed with its figures, deciding nothing); null in "
                          "results written before status was")
    value: float | None = Field(None, description="the figure judged, when there is one number")
    limit: float | None = Field(None, description="the threshold it was judged against")

    @property
    def counts_against(self) -> bool:
        """Failed, unknown or unjudged: keeps the run from passing."""
        return counts_against(self.model_dump())


class Counts(BaseModel):
    """Every produced event accounted for (harness.reconcile)."""
    produced: int = Field(0, description='events the producers were asked to send (their sequence numbers)')
    acked: int = Field(0, description='events the broker acknowledged')
    delivered_unique: int = Field(0, description='acked events found in the sink at least once')
    duplicates: int = Field(0, description='extra copies of events in the sink')
    lost: int = Field(0, description='acked events missing from the sink that no fault declared')
    expected_lost: int = Field(0, description='acked events missing that a fault declared lost (deleted, aged out)')
    unread: int = Field(0, description='acked events the query had not reached when the run ended (a drain cut short)')
    failed: int = Field(0, description='events whose send failed (a delivery error)')
    failed_expected: int = Field(0, description="of `failed`, those a fault declared (a topic deleted under the "
                                                "producers)")
    delivered_unacked: int = Field(0, description="sink rows of events that were never acked (a send reported failed "
                                                  "that landed)")
    misplaced: int = Field(0, description='events found in another partition or offset than their ack said')
    order_violations: int = Field(0, description="events read out of their partition's order")
    sink_rows: int = Field(0, description='rows the sink holds')
    pacer_skipped: int = Field(0, description="sends the producers' pacer skipped to hold the rate (each one judged)")
    unacked_at_exit: int = Field(0, description='sends still without an ack or error when the producers exited')
    expected_duplicates: int | None = Field(
        None, description="of `duplicates`, those a fault declared (an at-least-once sink's re-run batches: "
                          "harness.effects.DupRange); absent when no fault declared any")

    @model_serializer(mode="wrap")
    def _declared_only(self, handler):
        out = handler(self)
        if out.get("expected_duplicates") is None:
            out.pop("expected_duplicates", None)
        return out


class Percentiles(BaseModel):
    """Percentiles of a distribution in milliseconds (0 when there was nothing to measure)."""
    p50: float = Field(0.0, description="the median, milliseconds")
    p90: float = Field(0.0, description="the 90th percentile, milliseconds")
    p99: float = Field(0.0, description="the 99th percentile, milliseconds")
    p999: float = Field(0.0, description="the 99.9th percentile, milliseconds")
    max: float = Field(0.0, description="the maximum, milliseconds")


class Throughput(BaseModel):
    """How fast events went in and through."""
    produce_eps: float = Field(0.0, description="events sent per second over the measured window")
    process_rps: float = Field(0.0, description="Spark's processing rate while busy: rows per second of batch time")
    target_eps: float = Field(0.0, description="the scenario's offered rate, events per second")


class QueryInfo(BaseModel):
    """The query under test and how it ended."""
    name: str = Field("passthrough", description="the query: a built-in name or package.module:function")
    oracle: str = Field("events", description="what judged its output: events, window_counts, sessions or a "
                                              "function of the user's")
    trigger: str = Field("processingTime", description="the trigger's kind")
    final_state: str | None = Field(None, description="how the query ended: drained, failed, stopped, ...")
    exit_code: int | None = Field(None, description="the query process's exit code")
    error: str | None = Field(None, description="the query's error message when it failed")
    error_class: str | None = Field(None, description="Spark's error class of that failure")
    kills: int = Field(0, description="times a fault killed the query's driver")
    restarts: int = Field(0, description="times the harness started it again from its checkpoint")


class FaultRecord(BaseModel):
    """One injection of a fault (faults.jsonl has every step)."""
    kind: str = Field(description="the fault's kind (harness.faults)")
    fault: int = Field(description="its index in the scenario's [[faults]]")
    n: int = Field(description="which injection of that fault (a repeating fault injects several times)")
    inject_started_at: float | None = Field(None, description="when inject began, Unix seconds (its effects may "
                                                              "start then)")
    injected_at: float | None = Field(None, description="when inject returned, Unix seconds")
    healed_at: float | None = Field(None, description="when it was healed, Unix seconds")
    detail: dict[str, Any] = Field(default_factory=dict, description="what was done, read from the system then")
    effect: dict[str, Any] = Field(default_factory=dict, description="its declared effect: loss, duplicates, "
                                                                     "failure, query down")
    errors: list[str] = Field(default_factory=list, description="what went wrong injecting or healing it")


class RunResult(BaseModel):
    model_config = ConfigDict(validate_assignment=True)  # the judge fills it in step by step

    schema_version: int = Field(SCHEMA_VERSION, description="changes when a field changes meaning or goes away (adding "
                                                            "one does not)")
    scenario: str = Field(description="the scenario's name")
    backend: str = Field(description='kafka or eventhubs')
    verdict: Literal["pass", "fail", "unjudged"] = Field(description="pass; fail when a required check failed; unjudged"
                                                                     " when none failed but one could not be judged")
    unjudged_reason: str | None = Field(None, description='why the run is unjudged: which checks and why')
    checks: list[CheckResult] = Field(default_factory=list, description='every check of the run, required or not')
    counts: Counts = Field(default_factory=Counts, description='every produced event accounted for')
    expected_lost_by_partition: dict[str, int] = Field(default_factory=dict, description='expected loss per partition')
    lost_by_partition: dict[str, int] = Field(default_factory=dict, description='unexpected loss per partition')
    throughput: Throughput = Field(default_factory=Throughput, description='events in and rows through')
    latency_ms: Percentiles = Field(default_factory=Percentiles, description="end-to-end latency of the steady part of "
                                                                             "the measured window (`steady`): the "
                                                                             "headline")
    latency_measured_ms: Percentiles = Field(
        default_factory=Percentiles, description="end-to-end latency over the whole measured window")
    publish_delay_ms: Percentiles = Field(
        default_factory=Percentiles, description="produce call minus intended send time")
    batches: int = Field(0, description='micro-batches the query ran')
    batch_stats: dict[str, Any] = Field(default_factory=dict, description="per-phase durationMs percentiles, rows per "
                                                                          "batch, batches the per-trigger cap cut")
    lag_events: dict[str, Any] = Field(default_factory=dict, description='consumer lag over the run: max, mean, final')
    duration_s: float = Field(0.0, description="the run's wall time, seconds")
    traffic_s: float = Field(0.0, description="the traffic's wall time, seconds (warm-up included)")
    producers: dict[str, Any] = Field(default_factory=dict, description="per-partition events and bytes, skew, rate "
                                                                        "accuracy, delivery latency, errors by class")
    query: QueryInfo = Field(default_factory=QueryInfo, description='the query and how it ended')
    faults: list[FaultRecord] = Field(default_factory=list, description='every fault injection')
    changes: list[dict[str, Any]] = Field(default_factory=list, description=(
        "every change rolled out on the checkpoint (harness.faults.change): restarted or refused, the Spark "
        "before and after, each changed setting requested against the one in force and where that was read"))
    outages: list[dict[str, Any]] = Field(default_factory=list, description=(
        "every outage (harness.faults.outage): the backlog the restarted query came back to, its first batch "
        "(rows, time, the Spark processes' peak RSS), the failures after the restart and whether the restart "
        "policy gave up (a crash-loop), the drain's time and rate, the records that aged out unread"))
    oracle: dict[str, Any] | None = Field(None, description="the query's oracle's own figures (null: the harness's "
                                                            "per-event rules judged)")
    source: dict[str, Any] = Field(default_factory=dict,
                                   description="the source's own task records summed (Event Hubs)")
    placement: dict[str, Any] = Field(default_factory=dict, description="where Spark ran the scan tasks, from its event"
                                                                        " log")
    consumers: dict[str, Any] = Field(default_factory=dict, description="Kafka consumers created per batch, from the "
                                                                        "TCP proxy's records")
    resources: dict[str, Any] = Field(default_factory=dict, description="every process's RSS, CPU, fds and threads, "
                                                                        "disk, leaks")
    footprint: dict[str, Any] = Field(default_factory=dict, description="the harness's own CPU against the system under"
                                                                        " test's over the traffic")
    machine: dict[str, Any] = Field(default_factory=dict, description="what processes outside the run took of the "
                                                                      "machine's CPU over the traffic, steal apart")
    latency_windows: list[dict[str, float]] = Field(
        default_factory=list, description="latency percentiles per tenth of the measured window (compare's noise)")
    warmup: dict[str, Any] = Field(default_factory=dict, description="the warm-up: how long, why it ended, its events' "
                                                                     "figures kept apart")
    steady: dict[str, Any] = Field(default_factory=dict, description="where the steady state begins in the measured "
                                                                     "window")
    startup: dict[str, Any] = Field(default_factory=dict, description="time to the first data batch and the cold part's"
                                                                      " latency")
    startup_steps: dict[str, Any] = Field(default_factory=dict, description='which start-up step took what')
    sustain: dict[str, Any] = Field(default_factory=dict, description="keeping up: lag trend and its band, processed "
                                                                      "against offered, batch p50 against the trigger")
    recovery: list[dict[str, Any]] = Field(default_factory=list, description="per injected fault: time to recover, "
                                                                             "backlog peak, first data batch after")
    backend_info: dict[str, Any] = Field(default_factory=dict, description="the backend as it ran: kind, mode, "
                                                                           "bootstrap or namespace, protocol")
    end_offsets: dict[str, int] = Field(default_factory=dict, description="each partition's end offset when the traffic"
                                                                          " ended")
    run_dir: str = Field("", description='where the run directory was when it was judged')
    versions: dict[str, str] = Field(default_factory=dict, description='component versions the judge saw')
    expected_checks: list[str] = Field(default_factory=list, description="the checks the scenario's runs are judged by:"
                                                                         " junit.xml's cases, in every run")
    environment: dict[str, str] = Field(default_factory=dict, description="what the run ran on, recorded at run time: "
                                                                          "harness commit, Java, Kafka, cores")
    unreadable: list[dict[str, Any]] = Field(default_factory=list, description="what the judge could not read and left "
                                                                               "out: torn JSON lines, missing sink "
                                                                               "files")

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
