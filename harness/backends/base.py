"""The one interface every messaging system implements (Kafka; Event Hubs through the emulator or a namespace).

The runner only speaks this interface: start the service, make the stream (topic / hub), tell producers how to
connect, tell Spark which source to read (format, options, jars, data sources to register, how its rows become
the harness's event columns), and report the end of each partition so the query can drain. Fault injectors get at
the service through the concrete backend.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from harness.backends.capabilities import Capability
from harness.supervisor import Supervisor


class BackendError(RuntimeError):
    pass


@dataclass(frozen=True)
class SparkSource:
    """What the query process needs to read a stream: `spark.readStream.format(format).options(**options)`, with
    `jars` (artifact sets of harness.jvm) on the classpath, Python data sources (`module:Class`) registered first,
    and `normalise` (`module:function`) turning the source's rows into the event columns (harness.queries).
    `metrics_option`, when the source has one, names the option that tells it where to write its per-task records
    (the query process points it into the run directory)."""

    format: str
    options: dict[str, str]
    normalise: str
    jars: tuple[str, ...] = ()
    data_sources: tuple[str, ...] = ()
    metrics_option: str | None = None

    def as_job(self) -> dict:
        return {"format": self.format, "options": dict(self.options), "normalise": self.normalise,
                "data_sources": list(self.data_sources)}


# validation context: a scenario as a run recorded it (scenario.json's `resolved`, every field written out), validated
# again by harness.config.validate_resolved: a rule about which fields a *person* set does not apply to it
RECORDED = "recorded"


class BackendSpec(BaseModel):
    """A `[backend]` table. Subclasses add `kind: Literal[...]` and their own fields."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    # Read these from the table (`scenario.backend.sender`), not the class: a kind may choose them by its fields
    # (Event Hubs' `protocol` makes them properties); the class values are the kind's when it has one set only.
    sender: ClassVar[str]  # `module:Class` of the producer-side sender (producers/)
    placement: ClassVar[str]  # how keys map to partitions (harness.partitioning), for skewed key choice
    batch_cap_option: ClassVar[str]  # the source option capping rows per trigger
    batch_cap_exact: ClassVar[bool]  # the cap holds exactly (else Spark may round shares up per partition)
    spark_jars: ClassVar[tuple[str, ...]] = ()  # artifact sets (harness.jvm) the query's driver needs for its source
    # its Spark source is a PySpark data source of the project's (spark_source's `data_sources`), not a JVM one: a
    # streaming Python data source, which an older PySpark line may lack (harness.spark.runtimes)
    python_data_source: ClassVar[bool] = False
    # the producers' client library when its own cost per event sets a floor the footprint is read against (a
    # plain send loop of it, measured by a bench: `producer_floor_calibration`); None: the client's own threads
    # are measured apart (librdkafka's, harness.analysis.resources)
    producer_client_floor: ClassVar[str | None] = None

    def producer_floor_calibration(self) -> str | None:
        """The name of the calibration (harness.records.calibration) holding that floor for this table's producers."""
        return None

    def consumers_unrecorded(self) -> str | None:
        """Why the Kafka consumers Spark created cannot be counted when the run has no connection records (a
        service the harness cannot watch), or None when there is nothing to say."""
        return None

    def capabilities(self) -> frozenset[type[Capability]]:
        """What this table's backend offers faults beyond the interface (harness.backends.capabilities)."""
        return frozenset()

    def build(self, stream) -> "Backend":
        """The backend for this table; `stream` is the scenario's [stream] (name, partitions, config)."""
        raise NotImplementedError

    def setting_problems(self, scenario, spark_judged) -> list[str]:
        """Every refused setting of the tables this backend's clients take (source options, stream and broker
        configs, the producers' client), each naming its field, by harness.settings.check's rules;
        `spark_judged(field, table, check)` runs a check that needs Spark's own names (skipped without PySpark)."""
        return []

    def check_source_options(self, options: dict[str, Any]) -> None:
        """Raise ValueError naming the option when a Spark source option is not the connector's (values as the
        strings Spark gets)."""

    def check_stream_config(self, config: dict[str, Any]) -> None:
        """Raise ValueError naming the key when `[stream.config]` holds what this backend cannot apply."""

    def label(self) -> str:
        """How tables name this backend: its kind, and what sets it apart within the kind."""
        return self.kind  # type: ignore[attr-defined]

    def read_through(self, changes: dict[str, Any]) -> dict[str, Any]:
        """This table as data with `changes` (a changed query's [backend] keys: harness.faults.change) applied,
        for the query alone: the producers keep the scenario's table."""
        return {**self.model_dump(mode="python"), **changes}

    def starting_title(self) -> str:
        return f"starting {self.kind}"  # type: ignore[attr-defined]

    def prepare(self, ctx) -> None:
        """Before the backend starts (and before the faults' own `prepare`): what this table asks to have in place
        from the start (Kafka's `proxy`)."""


class Backend(ABC):
    kind: str  # "kafka" | "eventhubs": what result.json calls the backend
    sends_report_positions = True  # a send's ack names partition and offset (else: record_positions)
    # (fault label, the stream operations it performs): set by the runner before start; a backend that knows its
    # client's authorizations (Kafka's ACLs) refuses the run at create_stream when one is not granted
    required: list[tuple[str, dict[str, str]]] = []

    @abstractmethod
    def start(self, run_dir: Path, supervisor: Supervisor) -> None:
        """Bring the service up (or connect to it) and block until it answers."""

    @abstractmethod
    def stop(self) -> None:
        """Stop what start() started; idempotent."""

    @abstractmethod
    def create_stream(self, name: str, partitions: int, config: dict[str, str]) -> None:
        """Create the topic / hub the scenario writes to (fresh, with `partitions` partitions)."""

    @abstractmethod
    def producer_settings(self) -> dict[str, Any]:
        """JSON-able settings a producer process needs to connect (merged with the scenario's client settings)."""

    @abstractmethod
    def spark_source(self, stream: str, options: dict[str, str]) -> SparkSource:
        """How the query reads `stream`, the user's options passed through verbatim."""

    def spark_source_for(self, spec: Any, stream: str, options: dict[str, str]) -> SparkSource:
        """How a changed query (harness.faults.change) reads `stream` with `spec`, its scenario's [backend]: as this
        backend's own query does, unless the backend offers another way in (Event Hubs' protocols)."""
        return self.spark_source(stream, options)

    def offer_protocol(self, protocol: str) -> None:
        """Serve `protocol` too from the start, for a changed query that reads through it: a backend with one
        way in has nothing to add (the scenario model refuses a protocol it does not know)."""

    @abstractmethod
    def end_offsets(self, stream: str) -> dict[int, int]:
        """Per partition, the position just after the last event (what a drained query must have read)."""

    @abstractmethod
    def start_offsets(self, stream: str) -> dict[int, int]:
        """Per partition, the position of the first event still retained."""

    def record_positions(self, stream: str, out_dir: Path) -> int | None:
        """When sends report no position (Event Hubs): write where the service holds the harness's events
        (placements/*.csv, harness.reconcile) and return how many; None when the producers' acks say it already."""
        return None

    def close_clients(self) -> None:
        """Close the clients the harness itself holds (admin, watermarks); the service keeps running."""

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}
