"""Scenario files: TOML, pure data, validated strictly so a typo fails loudly before anything starts.

A scenario names the backend, the stream, the traffic (producers), the Spark query and the checks. Options that
belong to a real connector (Spark's Kafka source options, Spark conf, confluent-kafka producer settings, topic
configs, the Event Hubs connector's `eventhubs.*` options) are passed through verbatim so production settings can
be pasted in; source option names are still checked against the connector's list (the backend's, found by
`backend.kind` in harness.backends), so `maxOffsetPerTrigger` is an error rather than a silent no-op.
"""
from __future__ import annotations

from harness.errors import InputError
from harness.secrets import is_secret_key, redacted_override

import re
import tomllib
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Callable, Literal, Union, get_args, get_origin

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator,
                      model_validator)

from harness import machine
from harness.backends import DEFAULT_KIND, SPECS, spec_union
from harness.backends.base import RECORDED
from harness.text.durations import spark_bytes, spark_trigger_ms
from harness.faults import options_union
from harness.text.nesting import dotted, too_deep
from harness.files.paths import SCENARIOS_DIR
from harness.text.suggest import did_you_mean, quote
from harness.settings import check_setting_names
from harness.sinks import DEFAULT_KIND as DEFAULT_SINK, KINDS as SINKS, refusal as sink_refusal, sink_part
from harness.spark.realtime import refusal as realtime_refusal
from harness.spark.runtimes import (LINES as PYSPARK_LINES, RUNTIMES, project_line, refusal as runtime_refusal,
                                    spark_refusal)
from harness.producers.rates import make_rate
from harness.producers.spec import KeysSpec, PayloadSpec, RateSpec, ReplayRate, error_message, field_path


class ConfigError(InputError):
    """Bad input: the message names the file, the field and what is allowed. The CLI exits 2."""


class Strict(BaseModel):
    # no inf or nan (TOML has both): a timeout of inf waits for ever, a nan compares false to every bound
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


Scalar = Union[str, int, float, bool]
# Tables whose keys are a connector's option names, dots and all: a dotted path ends in them.
FLAT_TABLES = {("spark", "source_options"), ("spark", "sink_options"), ("spark", "conf"), ("stream", "config"), ("producers", "client"),
               ("backend", "broker"), ("backend", "client")}
MAX_SWEEP_RUNS = 64
MAX_SEED = 2 ** 63 - 1  # numpy's SeedSequence (the producers' keys and payloads) takes integers >= 0; TOML's max
MIN_DRIVER_MEMORY = 512 << 20  # Spark refuses a heap under 450 MiB ("System memory ... must be at least")
MAX_HEADROOM = 0.9  # checks.min_headroom: a median batch must be able to use at least a tenth of its interval


def _stringify(options: dict[str, Scalar]) -> dict[str, str]:
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()}


class StreamSpec(Strict):
    name: str = Field("events", pattern=r"^[A-Za-z0-9._-]{1,200}$", description="the topic (Kafka) or event hub "
                                                                                "(Event Hubs) the run creates and "
                                                                                "reads")
    partitions: int = Field(8, ge=1, le=1024, description='its partition count')
    config: dict[str, Scalar] = Field(default_factory=dict, description="topic configs / hub settings")


class ProducersSpec(Strict):
    processes: int = Field(1, ge=1, le=64, description="producer processes (each a locust runner with `users` "
                                                       "senders); the rate is shared among them")
    locust_master: str | None = Field(None, pattern=r"^[A-Za-z0-9.*:\[\]-]*:\d{1,5}$", description=(
        "HOST:PORT the run's locust master binds: `processes` locust workers on other machines run the producers "
        "(producers/locustfile.py; README: Producers on several machines)"))
    users: int = Field(2, ge=1, le=1000, description="locust users (greenlets) per process")
    batch_size: int = Field(200, ge=1, le=100_000, description="events per locust task")
    batch_wait_ms: float = Field(50.0, ge=0, le=10_000, description=(
        "how long the first event due may wait for the rest of its batch before the batch is sent: fewer, larger "
        "sends cost the harness far less CPU (taken from the system under test on a shared machine); the wait is "
        "part of the measured latency, from each event's intended time; 0 sends as soon as anything is due"))
    duration_s: float = Field(60.0, gt=0, le=7 * 24 * 3600, description="seconds of measured traffic, after the "
                                                                        "warm-up (the query catching up with its own "
                                                                        "start)")
    rate: RateSpec = Field(description="the offered rate's shape: constant, steps, burst, ramp, sine, spike, replay, "
                                       "sum or sequence")
    keys: KeysSpec = Field(
        default_factory=lambda: {"kind": "uniform", "count": 1000}, description="how events are keyed: uniform, zipf,"
                                                                                " hot_partitions, sequential or none")
    payload: PayloadSpec = Field(default_factory=dict, description="each event's size, content and headers")
    client: dict[str, Scalar] = Field(default_factory=dict, description="producer client settings (confluent-kafka / "
                                                                        "the Event Hubs sender)")
    warmup_s: float = Field(0.0, ge=0, le=3600, description=(
        "traffic at the rate's starting value before the measured window (duration_s): its events are checked for "
        "loss and duplicates but kept out of latency and throughput; faults are timed from the measured window. "
        "With warmup_until = \"caught_up\" the least warm-up (it goes on until the query has caught up)"))
    warmup_until: Literal["caught_up", "fixed"] | None = Field(None, description=(
        "when the warm-up ends: \"caught_up\" once the query has caught up with its own start (after a batch with "
        "data, its lag back within the band sustained judges for two batch cadences, or no longer falling; "
        "harness.analysis.warmup), at most warmup_max_s; \"fixed\" after warmup_s. Default: caught_up when the query runs during the traffic "
        "with a processing-time or real-time trigger and keeping up is judged; fixed otherwise (a backlog scenario, "
        "availableNow/once, producers on other machines)"))
    warmup_max_s: float = Field(120.0, gt=0, le=3600, description=(
        "the longest a caught_up warm-up may last: a query that has not caught up with its start by then is "
        "measured anyway and fails `sustained` on it"))
    max_backlog_s: float = Field(10.0, gt=0, le=3600, description=(
        "events due longer ago than this are skipped (counted, judged); later ones are sent late, latency "
        "still measured from their intended time"))


class TriggerSpec(Strict):
    kind: Literal["processingTime", "availableNow", "once", "realTime"] = Field("processingTime", description=(
        "realTime: Spark's real-time mode (4.1+), its interval the batch duration, i.e. how often progress is "
        "checkpointed, at least 5 seconds (harness.spark.realtime says what it requires)"))
    interval: str = Field("0 seconds", description="Spark's interval words: '1 second', '500 milliseconds', "
                                                   "'1 minute 30 seconds'")

    @field_validator("interval")
    @classmethod
    def _spark_interval(cls, value: str) -> str:
        """Checked now exactly as Spark's Trigger.ProcessingTime reads it (harness.text.durations), not 37 s into the
        run as "Spark query did not start"."""
        spark_trigger_ms(value)
        return value

    @model_validator(mode="after")
    def _interval_needs_processing_time(self):
        """availableNow and once have no interval: one given would be silently ignored. realTime needs one (PySpark
        has no default for it); its minimum is checked with the Spark conf that sets it (harness.spark.realtime)."""
        if self.kind == "realTime":
            if spark_trigger_ms(self.interval) == 0:
                raise ValueError("kind = \"realTime\" needs an interval, the batch duration (how often progress is "
                                 "checkpointed; records flow through within it), at least 5 seconds: e.g. "
                                 "interval = \"5 seconds\"")
            return self
        if self.kind != "processingTime" and spark_trigger_ms(self.interval) != 0:
            raise ValueError(f"interval = {quote(self.interval)} with kind = {self.kind!r}: {self.kind} runs "
                             "until the data at start is read and takes no interval; leave interval out, or use "
                             "kind = \"processingTime\"")
        return self

    @property
    def paced(self) -> bool:
        """A processingTime trigger with a non-zero interval: batches start on its clock, and what a batch leaves
        of the interval is the query's headroom (the `headroom` check, harness.checkers.sustained). A 0 s trigger
        runs batches back to back; the other kinds have no processing-time interval."""
        return self.kind == "processingTime" and spark_trigger_ms(self.interval) > 0


LOCAL_MASTER = re.compile(r"^(local(\[([1-9]\d*|\*)(,[1-9]\d*)?\])?|local-cluster\[[1-9]\d*,[1-9]\d*,(\d+)\])$")
MIN_EXECUTOR_MEMORY_MB = 450  # Spark refuses an executor below 1.5 x its 300 MB reserve (UnifiedMemoryManager)
# a user's cluster, deploy mode client (the driver stays in the harness's query process): standalone (with its
# standby masters), YARN (found through HADOOP_CONF_DIR / YARN_CONF_DIR), Kubernetes (the API server's URL)
CLUSTER_MASTER = re.compile(r"^(spark://[A-Za-z0-9.-]+:\d{1,5}(,[A-Za-z0-9.-]+:\d{1,5})*|yarn|k8s://https?://\S+)$")
MASTERS_ALLOWED = ("local[N] | local[N,F] | local-cluster[N,C,M] | spark://host:port[,host:port...] | yarn | "
                   "k8s://https://host:port")
DEFAULT_MASTER = "local[2]"


def is_cluster_master(master: str) -> bool:
    """A master URL whose executors live outside this machine's driver process tree (code must be shipped)."""
    return bool(CLUSTER_MASTER.match(master))


ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
STATE_STORE_CONFS = ("spark.sql.streaming.stateStore.providerClass",
                     "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled")


class SparkSpec(Strict):
    master: str = Field(DEFAULT_MASTER, description=MASTERS_ALLOWED)
    cluster: Literal["none", "standalone"] = Field("none", description=(
        "standalone: the run starts its own Spark master and workers on 127.0.0.1 (harness.spark.cluster) and "
        "connects the query to them; leave master out"))
    workers: int = Field(2, ge=1, le=8, description="with cluster = \"standalone\": workers started")
    worker_cores: int = Field(1, ge=1, le=64, description="with cluster = \"standalone\": cores each worker offers")
    worker_memory_mb: int = Field(1024, ge=512, le=65536, description=(
        "with cluster = \"standalone\": memory each worker offers (its executor's heap, spark.executor.memory)"))
    query: str = Field("passthrough", pattern=r"^([A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][\w.]*:[A-Za-z_]\w*)$",
                       description="passthrough | windowed_count | dedup | module:function (harness.queries)")
    query_params: dict[str, Scalar] = Field(default_factory=dict, description="handed to the query function")
    sink: Literal[SINKS] = Field(DEFAULT_SINK, description="; ".join(  # type: ignore[valid-type]
        f"{kind}: {sink_part(kind).summary}" for kind in SINKS))
    output_mode: Literal["append", "update"] = Field("append", description=(
        "update: with the Kafka sink or a query's own foreachBatch sink, for a query that aggregates"))
    sink_options: dict[str, Scalar] = Field(default_factory=dict, description=(
        "with sink = \"kafka\": Spark Kafka sink options, verbatim: kafka.<producer setting>, "
        "asyncProgressTrackingEnabled, asyncProgressTrackingCheckpointIntervalMs"))
    sink_partitions: int | None = Field(None, ge=1, le=10_000, description=(
        "with sink = \"kafka\": the output topic's partitions (default: stream.partitions)"))
    trigger: TriggerSpec = Field(default_factory=TriggerSpec, description="the query's trigger: processingTime with "
                                                                          "an interval, availableNow, or realTime")
    source_options: dict[str, Scalar] = Field(default_factory=dict, description="the source's options, as the "
                                                                                "connector names them (Spark's Kafka "
                                                                                "source, the Event Hubs source)")
    conf: dict[str, Scalar] = Field(default_factory=dict, description="Spark conf, verbatim")
    conf_allow: list[str] = Field(default_factory=list, description=(
        "keys of your own that spark.conf may carry though Spark has no such setting (harness.settings checks the "
        "rest): a spark.* key Spark does not know, or one without the spark. prefix that your code reads; "
        "\"spark.myapp.flag\", or a prefix ending in * (\"myteam.*\")"))
    state_store: Literal["hdfs", "rocksdb"] = Field("hdfs", description=(
        "the state store provider of a stateful query: hdfs (Spark's default, in the JVM heap) or rocksdb "
        "(RocksDBStateStoreProvider; the sessions query always runs on rocksdb)"))
    changelog_checkpointing: bool = Field(False, description=(
        "with state_store = \"rocksdb\": each batch checkpoints the changes (changelog files) and snapshots "
        "only now and then (spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled)"))
    checkpoint_store: Literal["local", "s3"] = Field("local", description=(
        "where the checkpoint (and the file sink) is written: local (the run directory) or s3 (an S3 server, moto, "
        "behind the harness's TCP proxy, through Hadoop's S3A connector: harness.objstore; a checkpoint_storage "
        "fault then acts on it); with s3 the run copies both into the run directory at its end"))
    driver_memory: str = Field("1g", description=(
        "the query driver's heap (-Xmx): an integer with k, m, g or t, at least 512m, at most this machine's memory"))
    start_timeout_s: float = Field(180.0, gt=0, le=3600, description="seconds the query may take to start before the "
                                                                     "run gives up")
    drain_timeout_s: float = Field(180.0, gt=0, le=24 * 3600, description="seconds after the traffic the query may "
                                                                          "take to read everything (the drain)")
    pyspark: Literal[PYSPARK_LINES] | None = Field(None, description=(  # type: ignore[valid-type]
        "the PySpark line the query process runs, " + " or ".join(
            f"\"{r.line}\" (pyspark {r.pyspark})" for r in RUNTIMES.values())
        + ", in a virtualenv of its own made once in the cache (harness.spark.runtimes); unset, or the project's "
          "own line (\"4.3\"): the project's"))

    @field_validator("pyspark", mode="before")
    @classmethod
    def _pyspark_line(cls, value: Any) -> Any:
        """A line as TOML or `--set spark.pyspark=3.5` gives it unquoted (a float) is the same line; one not offered
        is named with the lines that are."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(float(value))
        if value is not None and value == project_line():  # the project's own (a change back to it)
            return None
        if value is not None and value not in PYSPARK_LINES:
            raise ValueError("not a PySpark line the harness runs the query on; allowed: "
                             f"{', '.join(repr(v) for v in PYSPARK_LINES)} (a string), or {project_line()!r} or "
                             "leave it out for the project's own")
        return value

    @field_validator("driver_memory")
    @classmethod
    def _driver_memory(cls, value: str) -> str:
        """Spark hands it to the driver JVM as -Xmx, which takes k, m, g or t (not Spark's 'gb' forms)."""
        if not re.fullmatch(r"[0-9]+[kKmMgGtT]", str(value).strip()):
            raise ValueError(f"{quote(value)} is not a heap size; give an integer with k, m, g or t, e.g. '1g', "
                             "'1536m'")
        if spark_bytes(value) < MIN_DRIVER_MEMORY:
            raise ValueError(f"{quote(value)} is below 512m: Spark needs at least 450 MiB of driver heap")
        return value  # at most this machine's memory: checked when a run is to start here (fits_this_machine)

    @field_validator("master")
    @classmethod
    def _master_url(cls, value: str) -> str:
        local = LOCAL_MASTER.match(value)
        if not (local or CLUSTER_MASTER.match(value)):
            raise ValueError(f"not a master this harness can run on; allowed: {MASTERS_ALLOWED}, N and C from 1")
        if local and local.group(5) is not None and int(local.group(5)) < MIN_EXECUTOR_MEMORY_MB:
            raise ValueError(f"local-cluster's M is each executor's memory in MB: at least "
                             f"{MIN_EXECUTOR_MEMORY_MB} (Spark refuses less), e.g. local-cluster[2,1,1024]")
        return value

    @model_validator(mode="after")
    def _cluster(self):
        # (compared with the defaults, not "was it given": a resolved scenario.json, run again, gives them all)
        worker_keys = [k for k in ("workers", "worker_cores", "worker_memory_mb")
                       if getattr(self, k) != type(self).model_fields[k].default]
        if self.cluster == "standalone":
            if self.master != DEFAULT_MASTER:
                raise ValueError(f"master = {self.master!r} with cluster = \"standalone\": the run starts its "
                                 "own master and connects the query to it; leave master out")
        elif worker_keys:
            raise ValueError(f"{worker_keys[0]} is for the run's own cluster: set cluster = \"standalone\" "
                             f"(or leave {worker_keys[0]} out)")
        return self

    @model_validator(mode="after")
    def _state_store(self):
        if self.changelog_checkpointing and self.state_store != "rocksdb":
            raise ValueError("changelog_checkpointing = true needs state_store = \"rocksdb\" (Spark's changelog "
                             "checkpointing is RocksDB's)")
        clash = sorted(k for k in STATE_STORE_CONFS if k in self.conf and (self.state_store != "hdfs"
                                                                            or self.changelog_checkpointing))
        if clash:
            raise ValueError(f"{clash[0]} under [spark.conf] and state_store/changelog_checkpointing both set it: "
                             "give one")
        return self

    def state_store_conf(self) -> dict[str, str]:
        """The Spark confs state_store and changelog_checkpointing stand for (none for the defaults)."""
        conf = {}
        if self.state_store == "rocksdb":
            conf[STATE_STORE_CONFS[0]] = ROCKSDB_PROVIDER
        if self.changelog_checkpointing:
            conf[STATE_STORE_CONFS[1]] = "true"
        return conf

    @model_validator(mode="after")
    def _checkpoint_store(self):
        """The store's connector is built for the project's Spark (Hadoop 3.5.0) and reached on loopback, by a
        driver whose executors run beside it."""
        if self.checkpoint_store == "s3":
            if self.pyspark is not None:
                raise ValueError(f"checkpoint_store = \"s3\" runs on the project's PySpark (its S3A connector is "
                                 f"Hadoop 3.5.0's): leave pyspark out (it is {self.pyspark!r})")
            if self.cluster != "none" or not self.master.startswith("local["):
                raise ValueError("checkpoint_store = \"s3\" needs a local[N] master (the store listens on "
                                 f"127.0.0.1); got master = {self.master!r}, cluster = {self.cluster!r}")
        return self

    @model_validator(mode="after")
    def _pyspark_runs_it(self):
        """An older PySpark line runs the query in local mode and without what came after it (real-time mode):
        refused now, naming the field, not at the query's start (harness.spark.runtimes)."""
        problem = spark_refusal(self)
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _real_time_updates(self):
        """Real-time mode runs update mode only (Spark refuses the others): there, the default is update. Given
        explicitly, append is kept and refused with its reason (harness.spark.realtime)."""
        if self.trigger.kind == "realTime" and "output_mode" not in self.model_fields_set:
            self.output_mode = "update"
        return self

    @property
    def standalone(self) -> bool:
        return self.cluster == "standalone"



class ChecksSpec(Strict):
    max_lost: int = Field(0, ge=0, description="acked events allowed to be missing beyond expected loss")
    max_duplicates: int = Field(0, ge=0, description='duplicated events allowed beyond what a fault declares')
    require_order: bool = Field(True, description="per producer and partition, offsets follow send order")
    latency_p99_ms: float | None = Field(None, gt=0, description="fail when end-to-end p99 exceeds this")
    min_produce_ratio: float = Field(0.95, ge=0, le=1, description="achieved / target events at least this")
    max_pacer_skipped: int = Field(0, ge=0, description="scheduled events the pacer may skip (producer behind)")
    max_busy_share: float = Field(0.10, ge=0, le=1, description=(
        "the machine was busy when processes outside the run and steal took more than this share of its CPU "
        "(cores x the measured window): a performance check that would fail, or be unknown, is then unjudged, "
        "never failed (harness.checkers.busy); 1 never sets one aside"))
    sustained_not_required: str | None = Field(None, min_length=1, max_length=500, description=(
        "why keeping up with the offered load is not this scenario's point (a backlog it builds on purpose): the "
        "`sustained` check is then listed as not required"))
    min_headroom: float | None = Field(None, description=(
        "require the `headroom` check: the fraction of the processingTime trigger interval the median batch must "
        "leave idle (1 - batch p50 / interval), from 0 (batch p50 within the trigger) to 0.9; unset, the check is "
        "listed as not required"))
    max_checkpoint_ms: float | None = Field(None, gt=0, le=600_000, description=(
        "require the `checkpoint_cost` check: the batch time the checkpoint costs (Spark's durationMs walCommit, "
        "the offset log write, plus commitOffsets, the commit log write) at the median of the measured batches "
        "outside any checkpoint_storage fault at most this many ms; unset, listed as not required"))
    narrow_margin: str | None = Field(None, min_length=1, max_length=500, description=(
        "why this scenario runs closer than 10% to a threshold that decides it (harness.bench.margins): "
        "`harness bench verdicts --all` shows it instead of flagging the scenario; judging is unchanged"))

    @field_validator("min_headroom")
    @classmethod
    def _headroom_fraction(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 <= value <= MAX_HEADROOM:
            raise ValueError(f"the fraction of the trigger interval the median batch must leave idle, from 0 (batch "
                             f"p50 within the trigger) to {MAX_HEADROOM:g}, e.g. 0.2")
        return value


class RandomFaults(Strict):
    """[soak.random_faults]: the scenario's [[faults]] become a catalog. Injection times are drawn with gaps
    uniform in `every_s`, and each injection picks one catalog entry (by `weights`), all from the scenario's seed,
    so the same seed gives the same night. The drawn plan replaces [[faults]] in the run's resolved scenario
    (scenario.json), which is what `harness soak --replay RUN_DIR` runs again."""

    every_s: tuple[float, float] = Field((60.0, 180.0), description="[min, max] seconds between injections")
    start_s: float = Field(30.0, ge=0, description="no injection before this (seconds after traffic starts)")
    quiet_end_s: float = Field(60.0, ge=0, description="no injection in the last this many seconds of traffic")
    weights: list[float] | None = Field(None, description="one per [[faults]] entry; default: equal")

    @model_validator(mode="after")
    def _sane(self):
        lo, hi = self.every_s
        if not 0 < lo <= hi:
            raise ValueError(f"every_s must be [min, max] with 0 < min <= max, got {list(self.every_s)}")
        if self.weights is not None and (not self.weights or any(w < 0 for w in self.weights)
                                         or not any(self.weights)):
            raise ValueError("weights must be non-negative, one per [[faults]] entry, not all zero")
        return self


class SoakSpec(Strict):
    """[soak]: checks evaluated while the run goes (harness.soak.live), resources and leaks, the disk budget."""

    check_every_s: float = Field(30.0, ge=1, le=3600, description="live checks evaluated this often")
    settle_s: float = Field(120.0, gt=0, le=3600, description=(
        "an acked event not delivered this long after its ack is overdue: live no_loss fails on it"))
    stall_s: float = Field(180.0, gt=0, le=7200, description="no batch progress this long: live query_alive fails")
    window_s: float = Field(60.0, gt=0, le=3600, description="live latency and throughput look at this window")
    recovery_s: float = Field(30.0, ge=0, le=3600, description=(
        "live latency and throughput are not judged on a window overlapping a fault or this long after its heal"))
    min_throughput_ratio: float = Field(0.8, ge=0, le=10, description=(
        "events delivered / events acked in a window without faults must be at least this"))
    latency_p99_ms: float | None = Field(None, gt=0, description="live p99 limit per window (default: "
                                                                 "checks.latency_p99_ms)")
    fail_fast: bool = Field(False, description="stop the run at the first failed live check")
    resource_interval_s: float = Field(5.0, ge=0.5, le=600, description="resource samples this often")
    leak_after_s: float = Field(120.0, ge=0, description="RSS growth is judged on samples after this warm-up")
    leak_mb_per_h: float = Field(256.0, gt=0, description="RSS growth per hour beyond this is a leak")
    disk_budget_mb: float = Field(4096.0, gt=0, description="the run directory must stay within this")
    baseline_fail_on: str = Field("p99=+50%,process_rps=-20%", description=(
        "with --baseline: harness compare's thresholds the soak fails on"))
    random_faults: RandomFaults | None = Field(None, description="faults drawn at random from the [[faults]] entries "
                                                                 "with the seed, instead of their own times")


# faults that never read the checkpoint: they run beside a checkpoint on the object store (spark.checkpoint_store)
CHECKPOINT_BLIND_FAULTS = frozenset({"checkpoint_storage", "network", "broker", "resend", "throttle"})


class Scenario(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="the scenario's name (letters, digits, '_' and "
                                                                    "'-'): the run directory's suffix")
    description: str = Field("", description='what the scenario exercises and what a pass means, in words')
    seed: int = Field(1, ge=0, le=MAX_SEED, description="traffic, key choice and the fault plan; 0 or more")
    backend: spec_union() = Field(  # type: ignore[valid-type]
        default_factory=SPECS[DEFAULT_KIND], description="[backend]: Kafka or Event Hubs, and how it runs")
    stream: StreamSpec = Field(default_factory=StreamSpec, description='[stream]: the topic or hub')
    producers: ProducersSpec = Field(description='[producers]: the traffic')
    spark: SparkSpec = Field(default_factory=SparkSpec, description='[spark]: the query under test and its settings')
    checks: ChecksSpec = Field(default_factory=ChecksSpec, description='[checks]: the limits the run is judged by')
    faults: list[options_union()] = Field(default_factory=list, description="[[faults]]: harness.faults")  # type: ignore[valid-type]
    soak: SoakSpec | None = Field(None, description="[soak]: live checks, resources, disk budget (harness soak)")
    sweep: dict[str, list[Union[Scalar, dict[str, Scalar]]]] = Field(default_factory=dict, description=(
        "[sweep]: dotted key -> values (scalars, or inline tables that set a table's keys together); `harness run` "
        "runs every combination (harness.commands.sweep)"))
    _unchecked: str | None = PrivateAttr(None)  # what validation could not check here (harness.settings.check)
    sweep_repeat: int = Field(1, ge=1, le=MAX_SWEEP_RUNS, description=(
        "[sweep] repeat = N: each combination runs N times; harness compare takes the spread across them as the "
        "noise (harness.commands.repeat)"))

    @model_validator(mode="before")
    @classmethod
    def _flat_option_tables(cls, data: Any) -> Any:
        """An option name written without quotes (`spark.sql.shuffle.partitions = 8` under [spark.conf]) is a
        nested table to TOML; in an option table it can only mean the dotted name, so it is read as one."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for table, name in FLAT_TABLES:
            section = data.get(table)
            options = section.get(name) if isinstance(section, dict) else None
            if not isinstance(options, dict) or not any(isinstance(v, dict) for v in options.values()):
                continue
            data[table] = {**section, name: dotted(options)}
        return data

    @model_validator(mode="before")
    @classmethod
    def _sweep_repeat(cls, data: Any) -> Any:
        """`[sweep] repeat = N` is not a swept key: it says how often each combination runs."""
        if isinstance(data, dict) and isinstance(data.get("sweep"), dict) and "repeat" in data["sweep"]:
            sweep = dict(data["sweep"])
            repeat = sweep.pop("repeat")
            if isinstance(repeat, bool) or not isinstance(repeat, int):
                raise ValueError(f"sweep.repeat = {str(repeat)[:80]!r}: how many times each combination runs, an "
                                 f"integer from 1 to {MAX_SWEEP_RUNS}")
            data = {**data, "sweep": sweep, "sweep_repeat": repeat}
        return data

    @field_validator("sweep", mode="before")
    @classmethod
    def _flat_sweep(cls, value: Any) -> Any:
        """`[sweep]` keys as dotted paths, however TOML nested them (`spark.source_options.x = [...]` is a
        nested table); applied like `--set`, so option names keep their dots."""
        return dotted(value) if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _sweep_values(self):
        combinations = 1
        for key, values in self.sweep.items():
            if not values:
                raise ValueError(f"sweep.{key}: an empty list; give the values to run, e.g. [1000, 5000]")
            if len(set(map(repr, values))) != len(values):
                raise ValueError(f"sweep.{key}: a value is listed twice")
            combinations *= len(values)
        if combinations * self.sweep_repeat > MAX_SWEEP_RUNS:
            times = f" x {self.sweep_repeat} repeats" if self.sweep_repeat > 1 else ""
            raise ValueError(f"sweep: {combinations} combinations{times}; at most {MAX_SWEEP_RUNS} runs in one sweep")
        return self

    @model_validator(mode="after")
    def _headroom_needs_an_interval(self):
        """Headroom is what a batch leaves of a processing-time interval: without one it would never be judged."""
        trigger = self.spark.trigger
        if self.checks.min_headroom is not None and not trigger.paced:
            raise ValueError(f"checks.min_headroom = {self.checks.min_headroom:g} needs a processingTime trigger with "
                             f"an interval (spark.trigger is kind = {trigger.kind!r}, interval = "
                             f"{quote(trigger.interval)}): it is the fraction of that interval the median batch "
                             f"leaves idle; give spark.trigger = {{ kind = \"processingTime\", interval = \"1 second\" "
                             f"}} (or another interval), or leave min_headroom out")
        return self

    @model_validator(mode="after")
    def _pyspark_reads_and_runs_it(self):
        """The backend's Spark source and the query on spark.pyspark's line (its master and trigger are SparkSpec's
        own check): a Python data source or a transformWithStateInPandas query an older PySpark lacks is refused
        here, naming the field (harness.spark.runtimes)."""
        problem = runtime_refusal(self)
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _random_faults_catalog(self):
        random_faults = self.soak.random_faults if self.soak else None
        if random_faults is None:
            return self
        if not self.faults:
            raise ValueError("soak.random_faults draws from the [[faults]] entries: give at least one")
        if random_faults.weights is not None and len(random_faults.weights) != len(self.faults):
            raise ValueError(f"soak.random_faults.weights: {len(random_faults.weights)} weights for "
                             f"{len(self.faults)} [[faults]] entries; give one per entry")
        return self

    @model_validator(mode="after")
    def _backend_options(self):
        """Source options and stream config are the backend's to judge (each connector has its own names)."""
        try:
            self.backend.check_source_options(self.source_options())
        except ValueError as exc:
            raise ValueError(f"spark.source_options: {exc}") from None
        try:
            self.backend.check_stream_config(self.stream.config)
        except ValueError as exc:
            raise ValueError(f"stream.config: {exc}") from None
        return self

    @model_validator(mode="after")
    def _setting_names(self, info: ValidationInfo):
        """Settings handed verbatim to Spark, Kafka and librdkafka are judged by them (harness.settings): a
        misspelt key is refused with the nearest names, not ignored by the software and PASSed. A run's recorded
        scenario was judged when it started: re-judging a copied run directory needs no JVM (`validate_resolved`)."""
        if not (info.context or {}).get(RECORDED):
            self._unchecked = check_setting_names(self)
        return self

    @property
    def unchecked(self) -> str | None:
        """What validation could not check on this machine and why (Spark's names without PySpark), or None."""
        return self._unchecked

    @model_validator(mode="after")
    def _faults_within_the_run(self):
        """A fault acts while the run lasts: during the traffic (faults are timed from the end of the warm-up)
        or while the query drains after it (spark.drain_timeout_s). One timed later would hold the run open
        until its time came, with nothing left to judge."""
        if not self.faults or (self.soak and self.soak.random_faults):  # the catalog's times are drawn anew
            return self
        from harness.faults.schedule import plan

        traffic, drain = self.producers.duration_s, self.spark.drain_timeout_s
        limit = traffic + drain
        for step in plan(list(self.faults), self.seed, traffic):
            last = max(step.inject_s, step.heal_s or 0.0)
            if last > limit:
                f = self.faults[step.fault_index]
                when = (f"window = [{f.window[0]:g}, {f.window[1]:g}]" if f.window else
                        f"at_s = {f.at_s:g}" + (f", duration_s = {f.duration_s:g}" if f.duration_s else "")
                        + (f", jitter_s = {f.jitter_s:g}" if f.jitter_s else ""))
                raise ValueError(f"faults.{step.fault_index} ({f.kind}): {when} acts at {last:g} s, after the "
                                 f"run: the traffic lasts {traffic:g} s (producers.duration_s, timed from the end "
                                 f"of the warm-up) and the query drains for at most {drain:g} s after it "
                                 f"(spark.drain_timeout_s); time it at most {limit:g} s")
        return self

    @model_validator(mode="after")
    def _faults_all_planned(self):
        """Every injection a fault declares fits the traffic. A repeating fault (every_s) injects only up to
        until_s and the traffic's end (harness.faults.schedule.plan): timed past them it would quietly plan fewer
        injections than its `count`, or none, and a run without its crash would pass. Refused here, with the times
        it asked for and what to change."""
        if not self.faults or (self.soak and self.soak.random_faults):  # the catalog's times are drawn anew
            return self
        from harness.faults.schedule import scenario_plan

        steps = scenario_plan(self)
        for i, fault in enumerate(self.faults):
            fitted = [step.inject_s for step in steps if step.fault_index == i]
            if len(fitted) < (fault.count or 1):
                raise ValueError(_unplanned(i, fault, fitted, self.producers.duration_s))
        return self

    @model_validator(mode="after")
    def _faults_beside_a_remote_checkpoint(self):
        """With the checkpoint on the object store, the run reads it only at its end (harness.objstore copies the
        bucket then): a fault that reads the offset or commit log while the run goes (a batch in flight, what Spark
        had planned, the state to tamper with) would read nothing and declare a wrong effect. Refused, by name."""
        if self.spark.checkpoint_store == "local":
            return self
        for i, fault in enumerate(self.faults):
            if fault.kind not in CHECKPOINT_BLIND_FAULTS:
                raise ValueError(f"faults.{i}: {fault.kind} reads the checkpoint while the run goes, and with "
                                 f"spark.checkpoint_store = {self.spark.checkpoint_store!r} it is only read at the "
                                 f"end; allowed beside it: {', '.join(sorted(CHECKPOINT_BLIND_FAULTS))}")
        return self

    @model_validator(mode="after")
    def _faults_fit(self):
        from harness.faults import fault_for

        for i, options in enumerate(self.faults):
            problem = fault_for(options).refusal(self)
            if problem:
                raise ValueError(f"faults.{i} ({options.kind}): {problem}")
        return self

    def source_option(self, name: str, default: str) -> str:
        """A source option's value as a string, its name matched case-insensitively as Spark does."""
        for key, value in self.source_options().items():
            if key.lower() == name.lower():
                return value
        return default

    @property
    def fail_on_data_loss(self) -> bool:
        """Spark's default is true."""
        return self.source_option("failOnDataLoss", "true").lower() == "true"

    def source_options(self) -> dict[str, str]:
        return _stringify(self.spark.source_options)

    def spark_conf(self) -> dict[str, str]:
        return {**self.spark.state_store_conf(), **_stringify(self.spark.conf)}

    def warmup_blocker(self) -> str | None:
        """Why this scenario's warm-up cannot end when the query has caught up (None: it can): the query must run
        while the traffic flows, on a trigger with a cadence, the warm-up's rate must send something, and the
        producers must be this machine's (the runner tells them when the measured window starts by a file beside
        job.json). By default a scenario whose keeping up is not judged (its backlog is the point) has a fixed
        warm-up; it may still ask for caught_up."""
        if self.spark.trigger.kind not in ("processingTime", "realTime"):
            return f"the {self.spark.trigger.kind} trigger reads after the traffic: there is nothing to catch up with"
        if self.producers.locust_master:
            return "the producers run on other machines (producers.locust_master), which take a fixed schedule"
        if make_rate(self.producers.rate).rate(0.0) <= 0:
            return "the rate starts at 0 events/s, the warm-up's rate: there is no traffic to catch up with"
        return None

    @property
    def adaptive_warmup(self) -> bool:
        """Whether the warm-up lasts until the query has caught up with its start (producers.warmup_until)."""
        until = self.producers.warmup_until
        if until is None:  # a backlog scenario's faults come at their times whatever the query's state
            return not self.checks.sustained_not_required and self.warmup_blocker() is None
        return until == "caught_up"

    @model_validator(mode="after")
    def _warmup_can_catch_up(self):
        problem = self.producers.warmup_until == "caught_up" and self.warmup_blocker()
        if problem:
            raise ValueError(f"producers.warmup_until = \"caught_up\" cannot be met: {problem}; use \"fixed\" "
                             f"(the warm-up then lasts producers.warmup_s)")
        return self


def _unplanned(index: int, fault: Any, fitted: list[float], traffic_s: float) -> str:
    """Why faults.<index>, a repeating fault, plans only `fitted` (its injection times) of what it declares: the
    times it asks for, what stops it (until_s or the traffic's end), and the changes that would fit them all."""
    first, every, count = fault.first_s, fault.every_s, fault.count
    start = f"window = [{fault.window[0]:g}, {fault.window[1]:g}]" if fault.window else f"at_s = {first:g}"
    schedule = ", ".join([start, f"every_s = {every:g}"] + ([f"count = {count}"] if count else [])
                         + ([f"until_s = {fault.until_s:g}"] if fault.until_s is not None else []))
    asked = [first + n * every for n in range(count or 1)]
    by_until = fault.until_s is not None and fault.until_s < traffic_s
    limit = fault.until_s if by_until else traffic_s
    got = (f"only {len(fitted)} of the {count} fit{'s' if len(fitted) == 1 else ''} (at {_seconds(fitted)})"
           if fitted else "none of them fits")
    fixes = []
    if (start_by := limit - (len(asked) - 1) * every) >= 0:
        fixes.append(f"{'the window starting' if fault.window else 'at_s'} at most {start_by:g}")
    if count and count > 1 and limit > first:
        fixes.append(f"every_s at most {int((limit - first) / (count - 1) * 1000) / 1000:g}")
    if fitted:
        fixes.append(f"count = {len(fitted)}")
    fixes.append(f"{'until_s' if by_until else 'producers.duration_s'} at least {asked[-1]:g}")
    return (f"faults.{index} ({fault.kind}): {schedule} asks for injections at "
            f"{_seconds(asked) if count else f'{first:g} s and every {every:g} s after'}; {got} before "
            f"{f'until_s = {limit:g}' if by_until else f'the end of the traffic at {limit:g} s'}, after which a "
            f"repeating fault injects no more. The traffic lasts {traffic_s:g} s (producers.duration_s); fault times "
            "count from the start of that measured window, after any warm-up. Give "
            + (", ".join(fixes[:-1]) + " or " + fixes[-1] if len(fixes) > 1 else fixes[0]))


def _seconds(times: list[float]) -> str:
    """'5, 15 and 25 s'; a long list as its first three and its last."""
    shown = [f"{t:g}" for t in times]
    if len(shown) > 4:
        shown = shown[:3] + ["...", shown[-1]]
    return (", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0]) + " s"


# -- loading ---------------------------------------------------------------------------------------------------
def scenario_path(name_or_path: str, directory: Path = SCENARIOS_DIR, what: str = "scenario") -> Path:
    """A name from `directory` (scenarios/; a rehearsal's: scenarios/rehearsals/) or a path to a .toml file."""
    p = Path(name_or_path)
    try:
        if p.suffix == ".toml" or p.exists():
            if not p.is_file():
                raise ConfigError(f"{p}: no such {what} file")
            return p
    except OSError as exc:  # a directory on the way that may not be entered
        raise ConfigError(f"{p}: cannot be read ({exc.strerror or exc})") from None
    candidate = directory / f"{name_or_path}.toml"
    if not candidate.is_file():
        names = sorted(x.stem for x in directory.glob("*.toml"))
        raise ConfigError(f"no {what} named {quote(name_or_path)}{did_you_mean(name_or_path, names)} known: "
                          f"{', '.join(names)} (or give a path to a .toml file)")
    return candidate


def parse_override(text: str) -> tuple[list[str], Any]:
    """`producers.rate.eps=5000` -> (["producers","rate","eps"], 5000). The key is read as TOML reads a dotted key,
    so a quoted segment keeps its dots (`spark.conf."spark.sql.shuffle.partitions"=8` -> ["spark", "conf",
    "spark.sql.shuffle.partitions"]), bare and quoted segments mix, single quotes are literal; the value is TOML,
    else a plain string (`spark.master=local[1]`)."""
    if "=" not in text:
        raise ConfigError(f"--set {quote(text)}: expected dotted.key=value")
    problem = None
    for at in (i for i, c in enumerate(text) if c == "="):  # the key ends at the first `=` outside its quotes
        try:
            parts = toml_key_path(text[:at])
        except ValueError as exc:
            problem = problem or f"the key {quote(text[:at])} is not a dotted key as TOML reads it ({exc})"
            continue
        deep = too_deep(text[at + 1:])
        if deep:  # before the parser, which would recurse once per level and crash
            raise ConfigError(f"--set {'.'.join(parts)}=...: the value is {deep}")
        return parts, _override_value(text[at + 1:])
    raise ConfigError(f"--set {quote(text)}: {problem}; bare segments are letters, digits, _ and -, any other "
                      "segment is quoted whole, e.g. spark.conf.\"spark.sql.shuffle.partitions\"=8")


def _override_value(raw: str) -> Any:
    try:
        parsed = tomllib.loads(f"v = {raw}")
    except tomllib.TOMLDecodeError:
        return raw
    return parsed["v"] if len(parsed) == 1 else raw  # `1\nx = 2` is one string, not a value and a key


def toml_key_path(key: str) -> list[str]:
    """The path of a TOML dotted key, as TOML itself reads it (`a."b.c".'d'` -> ["a", "b.c", "d"]); ValueError
    with TOML's reason when `key` is not one."""
    try:
        node: Any = tomllib.loads(f"{key} = 0")
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(str(exc)) from None
    path = []
    while isinstance(node, dict) and len(node) == 1:
        (part, node), = node.items()
        path.append(part)
    if not path or isinstance(node, bool) or node != 0:
        raise ValueError("not a single key")
    return path


def _apply(data: dict, parts: list[str], value: Any, text: str) -> None:
    """Set a dotted key; inside an option table the rest of the key is one option name
    (`spark.conf.spark.sql.shuffle.partitions=8`, or TOML's quoted `spark.conf."spark.sql.shuffle.partitions"=8`;
    `spark.source_options.eventhubs.prefetchCount=10`); a number
    picks an entry of a list of tables (`faults.0.at_s=20`: the first [[faults]])."""
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[:i]) or "the scenario"
        if isinstance(node, list):
            if not part.isdigit():
                raise ConfigError(f"--set {quote(text)}: {where} is a list ([[{where}]] entries); give an entry's "
                                  f"index from 0 to {len(node) - 1}, e.g. {where}.0.{'.'.join(parts[i + 1:]) or 'x'}"
                                  if node else f"--set {quote(text)}: {where} is an empty list")
            index = int(part)
            if index >= len(node):
                raise ConfigError(f"--set {quote(text)}: {where} has {len(node)} entr{'y' if len(node) == 1 else 'ies'}"
                                  f" ([[{where}]] in the file); index {index} is out of range"
                                  + (f" (0 to {len(node) - 1})" if node else ""))
            if last:
                node[index] = value
                return
            node = node[index]
            continue
        if not isinstance(node, dict):
            raise ConfigError(f"--set {quote(text)}: {where} is {quote(node, 60)}, not a table")
        if last:
            node[part] = value
            return
        if part not in node and parts[i + 1].isdigit():
            raise ConfigError(f"--set {quote(text)}: the scenario has no {'.'.join(parts[:i + 1])} entries "
                              f"([[{'.'.join(parts[:i + 1])}]]); --set changes an entry the file has, it adds none")
        nxt = node.setdefault(part, {})
        if tuple(parts[:i + 1]) in FLAT_TABLES and isinstance(nxt, dict):
            nxt[".".join(parts[i + 1:])] = value
            return
        if not isinstance(nxt, (dict, list)):
            raise ConfigError(f"--set {quote(text)}: {'.'.join(parts[:i + 1])} is {quote(nxt, 60)}, not a table")
        node = nxt


def load_scenario(name_or_path: str, overrides: list[str] | None = None,
                  amend: Callable[[dict], None] | None = None) -> tuple[Scenario, Path, dict]:
    """Returns the validated scenario, its file, and the raw (override-applied) data for the run record.
    `amend` changes the data after the overrides and before validation (a rehearsal adds its change to the
    base scenario's faults: harness.commands.rehearse)."""
    path = scenario_path(name_or_path)
    data = read_toml(path)
    applied = []
    for text in overrides or []:
        parts, value = parse_override(text)
        _apply(data, parts, value, text)
        applied.append((parts, text))
    if amend is not None:
        amend(data)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_errors(path, exc, overrides=applied)) from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a scenario") from None
    for field, problem in fits_this_machine(scenario):
        source = _set_by(tuple(field.split(".")), applied)
        raise ConfigError(f"{f'--set {quote(source)} (on {path})' if source else path}: {field}: {problem}")
    _check_query(scenario, path)
    _resolve_replay_paths(scenario.producers.rate, path.parent)
    try:
        make_rate(scenario.producers.rate)  # a replay CSV is read and checked now, not in a producer process
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: producers.rate: {exc}") from None
    return scenario, path, data


def fits_this_machine(scenario: Scenario) -> list[tuple[str, str]]:
    """(field, why) for each heap a run here would start that is larger than this machine's memory. Not part of
    the model: a run directory judged again on a smaller machine (harness check) must still validate."""
    total, problems = machine.memory_bytes(), []
    where = f"more than this machine's memory ({machine.describe(total)})"
    if spark_bytes(scenario.spark.driver_memory) > total:
        problems.append(("spark.driver_memory", f"{quote(scenario.spark.driver_memory)} is {where}"))
    spark = scenario.spark
    if spark.standalone and (spark.workers * spark.worker_memory_mb) << 20 > total:
        problems.append(("spark.worker_memory_mb", f"workers x worker_memory_mb = {spark.workers} x "
                         f"{spark.worker_memory_mb} MiB is {where}; the run's workers run here"))
    backend = scenario.backend
    nodes, heap = getattr(backend, "nodes", None), getattr(backend, "heap_mb", None)
    if getattr(backend, "mode", None) == "embedded" and nodes and heap and (nodes * heap) << 20 > total:
        problems.append(("backend.heap_mb", f"nodes x heap_mb = {nodes} x {heap} MiB is {where}; the embedded "
                         "brokers run here"))
    return problems


def read_toml(path: Path) -> dict:
    """The file's TOML, every way it can fail being bad input named with the file: unreadable, a directory, not
    UTF-8, not TOML, or nested so deep the parser runs out of stack."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: not UTF-8 text (byte {raw[exc.start]:#04x} at line {line}); TOML files are "
                          "UTF-8: save it as UTF-8") from None
    deep = too_deep(text)
    if deep:
        raise ConfigError(f"{path}: {deep}; a scenario is a few levels deep")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply (arrays or tables inside each other beyond what a TOML "
                          "parser follows); a scenario is a few levels deep") from None


def _check_query(scenario: Scenario, path: Path) -> None:
    """The named query must exist (a user's module is looked up next to the scenario file first, then in the
    directories above it: harness.queries.query_home) and accept its query_params (harness.queries: the
    contract)."""
    from harness.queries import QueryError, importable, query_home, resolve

    if ":" in scenario.spark.query:
        importable(query_home(scenario.spark.query, path.parent))
    else:
        from harness.queries import BUILT_IN

        if scenario.spark.query not in BUILT_IN:
            raise ConfigError(f"{path}: spark.query: unknown query {quote(scenario.spark.query)}"
                              f"{did_you_mean(scenario.spark.query, BUILT_IN)} allowed: {', '.join(BUILT_IN)} or "
                              "'package.module:function'")
    try:
        query = resolve(scenario.spark.query)
    except QueryError as exc:
        raise ConfigError(f"{path}: spark.query: {exc}") from None
    problem = query.check_params(scenario.spark.query_params)
    if problem:
        raise ConfigError(f"{path}: spark.query_params: {problem}")
    problem = realtime_refusal(scenario, query) or sink_refusal(scenario, query)  # real-time's reasons first
    if problem:
        raise ConfigError(f"{path}: {problem}")
    sink = sink_part(scenario.spark.sink)
    for i, fault in enumerate(scenario.faults):
        phase, own = getattr(fault, "phase", None), query.foreach_batch is not None
        if phase == "after_sink_write" and not (own or sink.kill_after_write or sink.logs_batches):
            raise ConfigError(f"{path}: faults.{i}.phase: \"after_sink_write\" needs a query that owns its sink "
                              f"(foreach_batch, harness.queries) or a sink that shows its writes; "
                              f"{scenario.spark.query} writes to {sink.title}, which has no write to kill after")
        if phase == "after_offsets" and not (own or sink.logs_batches or sink.kill_after_write):
            raise ConfigError(f"{path}: faults.{i}.phase: \"after_offsets\" is observed on a sink's log of the "
                              "batches it wrote (spark.sink = \"parquet\": _spark_metadata), its output downstream "
                              f"(\"kafka\") or held before a foreachBatch writer; {sink.title} has none, so the "
                              "kill could not be judged before the write. Allowed there: mid_batch")
    from harness.faults import fault_for

    for i, fault in enumerate(scenario.faults):  # a change's phase B is a query of its own (harness.faults.change)
        after = fault_for(fault).successor(scenario)
        if after is None:
            continue
        try:
            _check_query(after, path)
        except ConfigError as exc:
            raise ConfigError(f"{path}: faults.{i}.spark ({fault.kind}, phase B): "
                              f"{str(exc).removeprefix(f'{path}: ')}") from None


def _resolve_replay_paths(spec: BaseModel, base: Path) -> None:
    """Replay CSV paths are relative to the scenario file; producers get them absolute."""
    if isinstance(spec, ReplayRate) and not spec.csv.is_absolute():
        spec.csv = (base / spec.csv).resolve()
    for name in type(spec).model_fields:
        value = getattr(spec, name)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, BaseModel):
                _resolve_replay_paths(item, base)


def format_errors(path: Path | str, exc: ValidationError, model: type[BaseModel] = Scenario,
                  overrides: list[tuple[list[str], str]] | None = None) -> str:
    """The traffic specs' rendering (producers.spec), plus what a scenario file's author needs: the keys allowed
    where an unknown one was found (the nearest first), the offending value (cut short), and, when the field was
    set on the command line, the `--set` that set it rather than the file."""
    lines = []
    for err in exc.errors(include_url=False):
        if err["type"] == "extra_forbidden":
            allowed = _allowed_fields(model, list(err["loc"][:-1]))
            msg = ("unknown key" + (did_you_mean(str(err["loc"][-1]), allowed) or (";" if allowed else ""))
                   + (f" allowed: {', '.join(allowed)}" if allowed else ""))
        elif err["type"] == "union_tag_invalid":  # a fault kind (or another kind-chosen table) not known
            tag, expected = str(err["ctx"].get("tag")), str(err["ctx"].get("expected_tags", ""))
            allowed = [t.strip().strip("'") for t in expected.split(",") if t.strip()]
            msg = f"unknown kind {quote(tag)}{did_you_mean(tag, allowed)} allowed: {', '.join(allowed)}"
        else:
            msg = error_message(err)
            given = err.get("input")
            if err["type"] == "backend_kind" and isinstance(given, dict) and isinstance(given.get("kind"), str):
                msg += did_you_mean(given["kind"], SPECS)
            if "input" in err and not isinstance(err["input"], dict):
                secret = is_secret_key(".".join(map(str, err["loc"])))  # harness.secrets: never echoed
                msg += " (the value is a secret: not shown)" if secret else f" (got {quote(err['input'])})"
        where = field_path(err["loc"]) if err["loc"] else ""  # a whole-scenario check names its fields itself
        named = tuple(err["loc"]) or tuple(msg.split(":")[0].split(" ")[0].split("."))  # "faults.0 (kind): ..."
        source = _set_by(named, overrides or [])
        origin = f"--set {quote(redacted_override(source))} (on {path})" if source else str(path)
        lines.append(f"{origin}: {where + ': ' if where else ''}{msg}")
    return "\n".join(lines)


def _set_by(loc: tuple, overrides: list[tuple[list[str], str]]) -> str | None:
    """The `--set` text whose dotted key is the error's field, lies inside it or holds it; None for the file's.
    Compared dot by dot: an option name is one segment of a quoted `--set` key (`spark.conf."spark.x.y"`) and
    dotted in the error (`spark.conf.spark.x.y: unknown ...`)."""
    fields = [f for p in loc if not str(p).startswith("function-") for f in str(p).split(".")]
    for key, text in reversed(overrides):  # the last --set of a key is the one that stands
        parts = [p for part in key for p in part.split(".")]
        i = j = 0
        while i < len(parts) and j < len(fields):
            if parts[i] == fields[j]:
                i, j = i + 1, j + 1
            elif i and j + 1 < len(fields) and fields[j + 1] == parts[i]:
                j += 1  # a union's tag in the error's location (faults.0.driver_kill.at_s)
            else:
                break
        if i and (i == len(parts) or j == len(fields)):
            return text
    return None


def _allowed_fields(model: type[BaseModel], loc: list[Any]) -> list[str]:
    """Field names of the (sub)model at `loc`, for 'unknown key' messages; [] when it cannot be told."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) and get_origin(_unwrap(current)) is list:  # an entry of a list of tables
            current = _unwrap(get_args(_unwrap(current))[0])
            continue
        if isinstance(current, type) and issubclass(current, BaseModel) and part in current.model_fields:
            current = _unwrap(current.model_fields[part].annotation)
        else:
            current = _union_member(current, part)  # a discriminated-union tag such as 'zipf'
            if current is None:
                return []
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(tp: Any) -> Any:
    """Strip Annotated[...] and Optional[...] down to the model or union inside."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
            continue
        if get_origin(tp) in (Union, UnionType):
            members = [a for a in get_args(tp) if a is not type(None)]
            if len(members) == 1:
                tp = members[0]
                continue
        return tp


def _union_member(tp: Any, tag: Any) -> Any:
    """The member of a `kind`-discriminated union whose Literal kind is `tag`."""
    for member in get_args(_unwrap(tp)):
        member = _unwrap(member)
        if isinstance(member, type) and issubclass(member, BaseModel) and "kind" in member.model_fields:
            if tag in get_args(member.model_fields["kind"].annotation):
                return member
    return None


def validate_resolved(data: dict, where: str) -> Scenario:
    """A scenario as a run recorded it resolved (scenario.json's `resolved`), validated again: ConfigError naming
    `where` and the field when it no longer is one."""
    try:
        return Scenario.model_validate(data, context={RECORDED: True})  # its setting names were checked at its start
    except ValidationError as exc:
        raise ConfigError(format_errors(where, exc)) from None
