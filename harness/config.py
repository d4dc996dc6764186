"""Scenario files: TOML, pure data, validated strictly so a typo fails loudly before anything starts.

A scenario names the backend, the stream, the traffic (producers), the Spark query and the checks. Options that
belong to a real connector (Spark's Kafka source options, Spark conf, confluent-kafka producer settings, topic
configs, the Event Hubs connector's `eventhubs.*` options) are passed through verbatim so production settings can
be pasted in; source option names are still checked against the connector's list (the backend's, found by
`backend.kind` in harness.backends), so `maxOffsetPerTrigger` is an error rather than a silent no-op.
"""
from __future__ import annotations

from harness.errors import InputError

import re
import tomllib
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.backends import DEFAULT_KIND, SPECS, spec_union
from harness.durations import spark_interval_ms
from harness.faults import options_union
from harness.paths import SCENARIOS_DIR
from producers.rates import make_rate
from producers.spec import KeysSpec, PayloadSpec, RateSpec, ReplayRate, error_message, field_path


class ConfigError(InputError):
    """Bad input: the message names the file, the field and what is allowed. The CLI exits 2."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


Scalar = Union[str, int, float, bool]
# Tables whose keys are a connector's option names, dots and all: a dotted path ends in them.
FLAT_TABLES = {("spark", "source_options"), ("spark", "conf"), ("stream", "config"), ("producers", "client"),
               ("backend", "broker"), ("backend", "client")}
MAX_SWEEP_RUNS = 64


def _stringify(options: dict[str, Scalar]) -> dict[str, str]:
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()}


class StreamSpec(Strict):
    name: str = Field("events", pattern=r"^[A-Za-z0-9._-]{1,200}$")
    partitions: int = Field(8, ge=1, le=1024)
    config: dict[str, Scalar] = Field(default_factory=dict, description="topic configs / hub settings")


class ProducersSpec(Strict):
    processes: int = Field(1, ge=1, le=64)
    locust_master: str | None = Field(None, pattern=r"^[A-Za-z0-9.*:\[\]-]*:\d{1,5}$", description=(
        "HOST:PORT the run's locust master binds: `processes` locust workers on other machines run the producers "
        "(producers/locustfile.py; README: Producers on several machines)"))
    users: int = Field(2, ge=1, le=1000, description="locust users (greenlets) per process")
    batch_size: int = Field(200, ge=1, le=100_000, description="events per locust task")
    duration_s: float = Field(60.0, gt=0, le=7 * 24 * 3600)
    rate: RateSpec
    keys: KeysSpec = Field(default_factory=lambda: {"kind": "uniform", "count": 1000})
    payload: PayloadSpec = Field(default_factory=dict)
    client: dict[str, Scalar] = Field(default_factory=dict, description="producer client settings (confluent-kafka / the Event Hubs sender)")
    warmup_s: float = Field(0.0, ge=0, le=3600, description=(
        "traffic at the rate's starting value before the measured window (duration_s): its events are checked for "
        "loss and duplicates but kept out of latency and throughput; faults are timed from the measured window"))
    max_backlog_s: float = Field(10.0, gt=0, le=3600, description=(
        "events due longer ago than this are skipped (counted, judged); later ones are sent late, latency "
        "still measured from their intended time"))


class TriggerSpec(Strict):
    kind: Literal["processingTime", "availableNow", "once"] = "processingTime"
    interval: str = Field("0 seconds", description="Spark's interval words: '1 second', '500 milliseconds', "
                                                   "'1 minute 30 seconds'")

    @field_validator("interval")
    @classmethod
    def _spark_interval(cls, value: str) -> str:
        """Checked now as Spark reads it (harness.durations), not when the query starts."""
        if spark_interval_ms(value) < 0:
            raise ValueError(f"{value!r} is negative")
        return value


LOCAL_MASTER = re.compile(r"^(local(\[(\d+|\*)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\])$")
# a user's cluster, deploy mode client (the driver stays in the harness's query process): standalone (with its
# standby masters), YARN (found through HADOOP_CONF_DIR / YARN_CONF_DIR), Kubernetes (the API server's URL)
CLUSTER_MASTER = re.compile(r"^(spark://[A-Za-z0-9.-]+:\d{1,5}(,[A-Za-z0-9.-]+:\d{1,5})*|yarn|k8s://https?://\S+)$")
MASTERS_ALLOWED = ("local[N] | local[N,F] | local-cluster[N,C,M] | spark://host:port[,host:port...] | yarn | "
                   "k8s://https://host:port")
DEFAULT_MASTER = "local[2]"


def is_cluster_master(master: str) -> bool:
    """A master URL whose executors live outside this machine's driver process tree (code must be shipped)."""
    return bool(CLUSTER_MASTER.match(master))


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
    sink: Literal["parquet"] = "parquet"
    output_mode: Literal["append"] = "append"
    trigger: TriggerSpec = Field(default_factory=TriggerSpec)
    source_options: dict[str, Scalar] = Field(default_factory=dict)
    conf: dict[str, Scalar] = Field(default_factory=dict, description="Spark conf, verbatim")
    driver_memory: str = Field("1g", pattern=r"^\d+[mg]$")
    start_timeout_s: float = Field(180.0, gt=0)
    drain_timeout_s: float = Field(180.0, gt=0)

    @field_validator("master")
    @classmethod
    def _master_url(cls, value: str) -> str:
        if not (LOCAL_MASTER.match(value) or CLUSTER_MASTER.match(value)):
            raise ValueError(f"not a master this harness can run on; allowed: {MASTERS_ALLOWED}")
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

    @property
    def standalone(self) -> bool:
        return self.cluster == "standalone"


class ChecksSpec(Strict):
    max_lost: int = Field(0, ge=0, description="acked events allowed to be missing beyond expected loss")
    max_duplicates: int = Field(0, ge=0)
    require_order: bool = Field(True, description="per producer and partition, offsets follow send order")
    latency_p99_ms: float | None = Field(None, gt=0, description="fail when end-to-end p99 exceeds this")
    min_produce_ratio: float = Field(0.95, ge=0, le=1, description="achieved / target events at least this")
    max_pacer_skipped: int = Field(0, ge=0, description="scheduled events the pacer may skip (producer behind)")
    sustained_not_required: str | None = Field(None, min_length=1, max_length=500, description=(
        "why keeping up with the offered load is not this scenario's point (a backlog it builds on purpose): the "
        "`sustained` check is then listed as not required"))


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
    latency_p99_ms: float | None = Field(None, gt=0, description="live p99 limit per window (default: checks.latency_p99_ms)")
    fail_fast: bool = Field(False, description="stop the run at the first failed live check")
    resource_interval_s: float = Field(5.0, ge=0.5, le=600, description="resource samples this often")
    leak_after_s: float = Field(120.0, ge=0, description="RSS growth is judged on samples after this warm-up")
    leak_mb_per_h: float = Field(256.0, gt=0, description="RSS growth per hour beyond this is a leak")
    disk_budget_mb: float = Field(4096.0, gt=0, description="the run directory must stay within this")
    baseline_fail_on: str = Field("p99=+50%,process_rps=-20%", description=(
        "with --baseline: harness compare's thresholds the soak fails on"))
    random_faults: RandomFaults | None = None


class Scenario(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = ""
    seed: int = 1
    backend: spec_union() = Field(default_factory=SPECS[DEFAULT_KIND])  # type: ignore[valid-type]
    stream: StreamSpec = Field(default_factory=StreamSpec)
    producers: ProducersSpec
    spark: SparkSpec = Field(default_factory=SparkSpec)
    checks: ChecksSpec = Field(default_factory=ChecksSpec)
    faults: list[options_union()] = Field(default_factory=list, description="[[faults]]: harness.faults")  # type: ignore[valid-type]
    soak: SoakSpec | None = Field(None, description="[soak]: live checks, resources, disk budget (harness soak)")
    sweep: dict[str, list[Scalar]] = Field(default_factory=dict, description="[sweep]: dotted key -> values; "
                                           "`harness run` runs every combination (harness.commands.sweep)")
    sweep_repeat: int = Field(1, ge=1, le=MAX_SWEEP_RUNS, description=(
        "[sweep] repeat = N: each combination runs N times; harness compare takes the spread across them as the "
        "noise (harness.commands.repeat)"))

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
        if not isinstance(value, dict):
            return value
        flat: dict[str, Any] = {}

        def walk(node: dict, prefix: str) -> None:
            for key, item in node.items():
                if isinstance(item, dict):
                    walk(item, f"{prefix}{key}.")
                else:
                    flat[f"{prefix}{key}"] = item
        walk(value, "")
        return flat

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
        return _stringify(self.spark.conf)


# -- loading ---------------------------------------------------------------------------------------------------
def scenario_path(name_or_path: str) -> Path:
    """A name from scenarios/ or a path to a .toml file."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        if not p.is_file():
            raise ConfigError(f"{p}: no such scenario file")
        return p
    candidate = SCENARIOS_DIR / f"{name_or_path}.toml"
    if not candidate.is_file():
        known = ", ".join(sorted(x.stem for x in SCENARIOS_DIR.glob("*.toml")))
        raise ConfigError(f"no scenario named {name_or_path!r}; known: {known} (or give a path to a .toml file)")
    return candidate


def parse_override(text: str) -> tuple[list[str], Any]:
    """`producers.rate.eps=5000` -> (["producers","rate","eps"], 5000); values are TOML, else plain strings."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected dotted.key=value")
    key, raw = text.split("=", 1)
    parts = [p for p in key.strip().split(".")]
    if not all(parts):
        raise ConfigError(f"--set {text!r}: empty part in key {key!r}")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return parts, value


def _apply(data: dict, parts: list[str], value: Any, text: str) -> None:
    """Set a dotted key; inside an option table the rest of the key is one option name
    (`spark.conf.spark.sql.shuffle.partitions=8`, `spark.source_options.eventhubs.prefetchCount=10`)."""
    node = data
    for i, part in enumerate(parts[:-1]):
        nxt = node.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"--set {text!r}: {part!r} is not a table")
        node = nxt
        if tuple(parts[:i + 1]) in FLAT_TABLES:
            node[".".join(parts[i + 1:])] = value
            return
    node[parts[-1]] = value


def load_scenario(name_or_path: str, overrides: list[str] | None = None) -> tuple[Scenario, Path, dict]:
    """Returns the validated scenario, its file, and the raw (override-applied) data for the run record."""
    path = scenario_path(name_or_path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    for text in overrides or []:
        parts, value = parse_override(text)
        _apply(data, parts, value, text)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_errors(path, exc)) from None
    _check_query(scenario, path)
    _resolve_replay_paths(scenario.producers.rate, path.parent)
    try:
        make_rate(scenario.producers.rate)  # a replay CSV is read and checked now, not in a producer process
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: producers.rate: {exc}") from None
    return scenario, path, data


def _check_query(scenario: Scenario, path: Path) -> None:
    """The named query must exist (a user's module is looked up next to the scenario file first) and accept
    its query_params (harness.queries: the contract)."""
    from harness.queries import QueryError, importable, resolve

    if ":" in scenario.spark.query:
        importable(path.parent)
    try:
        query = resolve(scenario.spark.query)
    except QueryError as exc:
        raise ConfigError(f"{path}: spark.query: {exc}") from None
    problem = query.check_params(scenario.spark.query_params)
    if problem:
        raise ConfigError(f"{path}: spark.query_params: {problem}")
    for i, fault in enumerate(scenario.faults):
        if getattr(fault, "after_sink_write", False) and query.foreach_batch is None:
            raise ConfigError(f"{path}: faults.{i}.after_sink_write: true needs a query that owns its sink "
                              f"(foreach_batch, harness.queries); {scenario.spark.query} writes to the harness's "
                              "file sink, which has no write of its own to kill after")


def _resolve_replay_paths(spec: BaseModel, base: Path) -> None:
    """Replay CSV paths are relative to the scenario file; producers get them absolute."""
    if isinstance(spec, ReplayRate) and not spec.csv.is_absolute():
        spec.csv = (base / spec.csv).resolve()
    for name in type(spec).model_fields:
        value = getattr(spec, name)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, BaseModel):
                _resolve_replay_paths(item, base)


def format_errors(path: Path | str, exc: ValidationError, model: type[BaseModel] = Scenario) -> str:
    """The traffic specs' rendering (producers.spec), plus what a scenario file's author needs: the keys allowed
    where an unknown one was found, and the offending value."""
    lines = []
    for err in exc.errors(include_url=False):
        if err["type"] == "extra_forbidden":
            allowed = _allowed_fields(model, list(err["loc"][:-1]))
            msg = "unknown key" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
        else:
            msg = error_message(err)
            if "input" in err and not isinstance(err["input"], dict):
                msg += f" (got {err['input']!r})"
        where = field_path(err["loc"]) if err["loc"] else ""  # a whole-scenario check names its fields itself
        lines.append(f"{path}: {where + ': ' if where else ''}{msg}")
    return "\n".join(lines)


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
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_errors(where, exc)) from None
