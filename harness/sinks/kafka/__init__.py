"""`spark.sink = "kafka"`: Spark's own Kafka sink into the output topic `<stream.name>-out` the backend creates with
`message.timestamp.type=LogAppendTime` (the broker stamps when each record became visible: the end of the
end-to-end latency, per record).

At-least-once: a batch written and then re-run after a driver kill is written again, so a driver kill declares
the input ranges whose events may appear twice (harness.spark.reruns). Append and update output modes
(harness.sinks judges which query may use update); its options and what it refuses at load are `rules.py`'s.
The driver writes with `writer.py`; the run reads the output topic back into the run directory once the query has
stopped, and the checker reads that copy (`output.py`).
"""
from __future__ import annotations

from pathlib import Path

from harness.effects import DupRange
from harness.secrets import expand_all, referenced
from harness.sinks import EVENT_COLUMNS, EVENT_ID_COLUMNS, SinkPart
from harness.sinks.kafka.rules import async_progress, output_topic, refusal
from harness.sinks.kafka.writer import kafka_rows, sink_options as writer_options
from harness.spark.reruns import dup_ranges


class KafkaSink(SinkPart):
    kind = "kafka"
    summary = ("Spark's Kafka sink into the output topic <stream.name>-out the backend creates (at-least-once; "
               "Kafka backends only: harness.sinks)")
    title = "the Kafka sink"
    output_modes = ("append", "update")
    real_time = True
    # Spark's sink writes, so no writer of the harness's holds: the fault watches the output topic instead
    kill_after_write = True
    latency_end = "each record's broker append time in the output topic"
    reads_output_after_run = True
    recording = "reading the Kafka sink's output topic"
    output_name = ("the Kafka sink's output (sink/kafka-output.parquet, the output topic as the run read it when "
                   "the query had stopped)")
    rows_name = "the Kafka sink's records (their values' JSON)"

    def refusal(self, scenario, query_def) -> str | None:
        return refusal(scenario, query_def)

    def job_part(self, scenario) -> dict:
        """The output topic and the user's options as strings, secrets as ${VAR} references the driver expands
        (harness.secrets)."""
        options = {k: (str(v).lower() if isinstance(v, bool) else str(v))
                   for k, v in scenario.spark.sink_options.items()}
        return {"sink_topic": output_topic(scenario.stream.name), "sink_options": referenced(options)}

    def rows(self, out):
        """One record per row: the row's columns as the value's JSON (harness.sinks.kafka.writer)."""
        return kafka_rows(out)

    def writer(self, writer, job: dict, source_options: dict[str, str]):
        """The output topic, connected as the source is, beneath the user's options (secrets expanded here)."""
        options = writer_options(source_options, job["sink_topic"], expand_all(job.get("sink_options") or {}))
        return writer.format("kafka").options(**options)

    def create_output(self, ctx) -> None:
        """The output topic, stamped by the broker (LogAppendTime), as many partitions as asked or the input's."""
        s = ctx.scenario
        ctx.backend.create_output_topic(output_topic(s.stream.name), s.spark.sink_partitions or s.stream.partitions)

    def visible_output(self, ctx) -> int:
        """The output topic's records: its end offsets, summed (records appear as the broker appends them)."""
        return sum(ctx.backend.end_offsets(output_topic(ctx.scenario.stream.name)).values())

    def record_output(self, ctx) -> None:
        from harness.sinks.kafka.output import record_output  # pandas and Arrow: the judge's, not the driver's

        with ctx.console.step(self.recording):
            meta = record_output(ctx.backend, output_topic(ctx.scenario.stream.name), ctx.run_dir / "sink")
        ctx.timeline.add("sink_output_read", records=meta["records"], end_offsets=meta["end_offsets"])

    def read_output(self, sink_dir: Path):
        from harness.sinks.kafka.output import read_output

        return read_output(sink_dir)

    def latency_source(self, rows) -> str:
        if all(c in rows.columns for c in EVENT_COLUMNS):
            return f"measured: {self.latency_end}"
        return f"not measured: the Kafka sink's records carry no {', '.join(EVENT_ID_COLUMNS)} each"

    def rewritable(self, ctx) -> list[DupRange]:
        """From the checkpoint as it is now: the batches logged beyond the last commit. Real-time mode logs a
        batch's end offsets only when it ends (it reads until its interval is up), so the batch in flight has read,
        and written, up to the input's end at most, as with asynchronous progress tracking."""
        s = ctx.scenario
        unlogged = async_progress(s.spark.sink_options) or s.spark.trigger.kind == "realTime"
        bound = ctx.backend.end_offsets(s.stream.name) if unlogged else None
        return dup_ranges(ctx.checkpoint, s.stream.name, bound)


PART = KafkaSink()
