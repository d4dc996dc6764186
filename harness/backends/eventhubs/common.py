"""What both Event Hubs backends share: partition positions read through the SDK, the producers' settings and
the Spark source (the project's PySpark data source, harness.backends.eventhubs.spark_source; or, with
`protocol = "kafka"`, librdkafka producers and Spark's own Kafka source at the namespace's Kafka endpoint,
harness.backends.eventhubs.kafka_endpoint).

Positions are sequence numbers (what the source checkpoints): a partition's end is its last enqueued sequence
number + 1, its start the first one still retained.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from harness.files import atomic
from harness.backends.base import Backend, BackendError, SparkSource
from harness.backends.eventhubs.kafka_endpoint import KafkaEndpoint, kafka_producer_settings, kafka_source_options
from harness.jvm.artifacts import SPARK_KAFKA
from harness.records.placements import PLACEMENT_COLUMNS


def with_entity(connection_string: str, hub: str) -> str:
    """The namespace's connection string naming `hub` (EntityPath), as the connector expects it."""
    parts = [p for p in connection_string.strip().strip(";").split(";") if p and not p.startswith("EntityPath=")]
    return ";".join(parts + [f"EntityPath={hub}"])


def starting_positions(hub: str, seq_numbers: dict[int, int]) -> str:
    """`eventhubs.startingPositions` in the connector's JSON shape: from these sequence numbers on, inclusive."""
    return json.dumps({json.dumps({"ehName": hub, "partitionId": p}, separators=(",", ":")):
                       {"offset": None, "seqNo": seq, "enqueuedTime": None, "isInclusive": True}
                       for p, seq in sorted(seq_numbers.items())})


class EventHubsBackendBase(Backend):
    kind = "eventhubs"
    sends_report_positions = False
    send_mode = "partition_key"
    # the harness's own reads (placements before a fault cuts): a consumer group of their own, since the query's
    # exclusive (epoch) receivers keep every other reader of theirs out, as the service does
    observer_group = "$Default"

    protocol = "amqp"  # "kafka": producers and the query go through the Kafka endpoint (use_protocol)

    def __init__(self) -> None:
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._created_at: dict[str, dict[int, int]] = {}  # stream -> end positions when the run began

    def connection_string(self) -> str:  # the namespace's, without EntityPath
        raise NotImplementedError

    def use_protocol(self, protocol: str) -> None:
        """`kafka`: the producers are librdkafka's, whose acks name partition and offset (= sequence number), so
        no read-back of placements is needed; the query reads with Spark's Kafka source. Positions (end and start
        offsets, what faults and the drain use) stay the SDK's sequence numbers either way: the same numbers."""
        self.protocol = protocol
        self.sends_report_positions = protocol == "kafka"

    def kafka_endpoint(self) -> KafkaEndpoint:
        """Where this namespace's Kafka endpoint listens (once started)."""
        raise BackendError("this Event Hubs backend has no Kafka endpoint")

    # -- positions ---------------------------------------------------------------------------------------------
    def _consumer(self, hub: str):
        from azure.eventhub import EventHubConsumerClient

        with self._lock:
            client = self._clients.get(hub)
            if client is None:
                client = self._clients[hub] = EventHubConsumerClient.from_connection_string(
                    self.connection_string(), consumer_group="$Default", eventhub_name=hub, retry_total=3)
            return client

    def partition_properties(self, hub: str) -> dict[int, dict]:
        client = self._consumer(hub)
        try:
            ids = client.get_partition_ids()
            return {int(p): client.get_partition_properties(p) for p in ids}
        except Exception as exc:  # noqa: BLE001 - the SDK's errors have many classes; say which hub failed
            raise BackendError(f"cannot read the partitions of event hub {hub!r}: {type(exc).__name__}: {exc}") \
                from exc

    def end_offsets(self, stream: str) -> dict[int, int]:
        return {p: int(props["last_enqueued_sequence_number"]) + 1
                for p, props in self.partition_properties(stream).items()}

    def start_offsets(self, stream: str) -> dict[int, int]:
        out = {}
        for p, props in self.partition_properties(stream).items():
            end = int(props["last_enqueued_sequence_number"]) + 1
            out[p] = end if props.get("is_empty") else int(props["beginning_sequence_number"])
        return out

    def read_placements(self, stream: str, ranges: dict[int, tuple[int, int]], timeout: float = 60.0
                        ) -> list[tuple[int, int, int, int]]:
        """(producer, seq, partition, sequence number) of the harness's events at [start, end) of each partition,
        read with a plain SDK consumer: where the service put events whose sends reported no position."""
        from azure.eventhub import EventHubConsumerClient

        from harness.producers.event import decode

        rows: list[tuple[int, int, int, int]] = []
        wanted = {p: (lo, hi) for p, (lo, hi) in ranges.items() if hi > lo}

        def read(p: int, lo: int, hi: int) -> None:
            client = EventHubConsumerClient.from_connection_string(
                self.connection_string(), consumer_group=self.observer_group, eventhub_name=stream)
            seen = [lo]

            def on_batch(_ctx, batch):
                for event in batch:
                    if event.sequence_number < hi:
                        try:
                            body = decode(event.body_as_str().encode())
                            rows.append((int(body["p"]), int(body["s"]), p, event.sequence_number))
                        except (ValueError, KeyError, TypeError):
                            pass  # not the harness's event
                    seen[0] = max(seen[0], event.sequence_number + 1)
                if seen[0] >= hi:
                    threading.Thread(target=client.close, daemon=True).start()

            with client:
                client.receive_batch(on_batch, partition_id=str(p), starting_position=lo,
                                     starting_position_inclusive=True, max_batch_size=500, max_wait_time=1.0)
            if seen[0] < hi:
                raise BackendError(f"reading partition {p} of {stream!r} stopped at {seen[0]}, short of {hi}")

        errors: list[Exception] = []

        def guarded(*args):
            try:
                read(*args)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=guarded, args=(p, lo, hi), daemon=True) for p, (lo, hi) in wanted.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout)
        if errors or any(t.is_alive() for t in threads):
            raise BackendError(f"could not read what {stream!r} holds at {wanted}: {errors or 'timed out'}")
        return rows

    def write_placements(self, path: Path, rows: list[tuple[int, int, int, int]]) -> None:
        atomic.write_text(path, ",".join(PLACEMENT_COLUMNS) + "\n" + "".join(f"{a},{b},{c},{d}\n" for a, b, c, d in rows))

    def record_positions(self, stream: str, out_dir: Path) -> int:
        """Everything the hub still holds, read at the end of the run: with the faults' reads of what they removed,
        every acked event's position is known, so positions are compared and ordered as strictly as Kafka's."""
        from harness.backends.eventhubs.spark_source.clients import is_not_found

        try:
            start, end = self.start_offsets(stream), self.end_offsets(stream)
        except BackendError as exc:
            if not is_not_found(exc.__cause__ or exc):
                raise
            start = end = {}  # the hub was deleted for good: it retains nothing
        rows = self.read_placements(stream, {p: (start[p], end[p]) for p in end})
        self.write_placements(out_dir / "retained.csv", rows)
        return len(rows)

    def close_clients(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a client whose service is gone
                pass

    # -- producers and Spark -----------------------------------------------------------------------------------
    def producer_settings(self) -> dict[str, Any]:
        if self.protocol == "kafka":
            return kafka_producer_settings(self.connection_string(), self.kafka_endpoint())
        return {"connection_string": self.connection_string(), "send": self.send_mode}

    def remember_start(self, hub: str) -> None:
        self._created_at[hub] = self.end_offsets(hub)

    def spark_source(self, stream: str, options: dict[str, str]) -> SparkSource:
        return self._spark_source(stream, options, self.protocol)

    def spark_source_for(self, spec: Any, stream: str, options: dict[str, str]) -> SparkSource:
        """A changed query's source through `spec.protocol`: the Kafka endpoint after the AMQP source (the move to
        Spark 4, whose Scala 2.13 the connector was never built for), or the other way round."""
        return self._spark_source(stream, options, spec.protocol)

    def _spark_source(self, stream: str, options: dict[str, str], protocol: str) -> SparkSource:
        if protocol == "kafka":  # from where the hub stood when the run began, as below: offsets are seq numbers
            opts = kafka_source_options(self.connection_string(), self.kafka_endpoint(), stream, options,
                                                 starting=self._created_at.get(stream) or self.end_offsets(stream))
            return SparkSource("kafka", opts, normalise="harness.spark.events:from_kafka", jars=(SPARK_KAFKA,))
        opts = {"eventhubs.connectionString": with_entity(self.connection_string(), stream)}
        if not any(k.lower() in ("eventhubs.startingposition", "eventhubs.startingpositions") for k in options):
            # read from where the hub stood when the run began: what the producers send, nothing older
            start = self._created_at.get(stream) or self.end_offsets(stream)
            opts["eventhubs.startingPositions"] = starting_positions(stream, start)
        opts.update(options)
        return SparkSource("eventhubs", opts, normalise="harness.spark.events:from_eventhubs",
                           data_sources=("harness.backends.eventhubs.spark_source:EventHubsDataSource",),
                           metrics_option="harness.metricsPath")
