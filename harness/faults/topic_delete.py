"""The topic deleted while the query runs, and optionally created again at once (offsets restart at 0).

Loss of the deleted generation is exact: every record it still held, [log start, end) per partition read at the
moment of deletion, open-ended so that a record appended between that read and the deletion is covered too,
limited to events acked before the deletion (`acked_before_ms`). Sends acked without an offset (-1 in the ack
log: librdkafka retried them and the broker already had them) are placed by partition and time only. With `recreate`, the topic comes back with the
same partition count, replication and topic-level configs; `new_generation_ms` tells the checker that offsets
restart there (order is judged per generation).

What Spark 4.2's Kafka source (`subscribe`) does, found by running it:
- Deleted for good: the query fails whatever failOnDataLoss says, with a Kafka client error, never
  KAFKA_DATA_LOSS: between batches the driver's DescribeTopics gets UnknownTopicOrPartitionException (after 3
  attempts), a batch reading the deleted partitions fails its tasks with TimeoutException ("position ... could
  not be determined", after kafkaConsumer.pollTimeoutMs and then the consumer's default.api.timeout.ms).
  Declared as the failure `org.apache.kafka.common.errors` (the package both come from). Producers still
  sending get _MSG_TIMED_OUT after their message.timeout.ms: failed sends are declared while traffic runs.
- Recreated: the query's next batch starts at its old offsets, above the new generation's end. failOnDataLoss=true
  fails with KAFKA_DATA_LOSS (PARTITION_OFFSET_CHANGED when planning, or a read of the missing offsets); declared
  only when certain: some partition's planned offset lies further above the new end than everything the
  producers are scheduled to send in the next minute. failOnDataLoss=false logs and carries on from the new end (a
  range whose end is below its start is dropped). Either way the new generation's first records may be skipped
  silently, and further than the query had planned: an executor's consumer serves later batches from the records
  it had already fetched from the old generation (up to a fetch's worth, max.partition.fetch.bytes) and only then
  fetches from the new one, at offsets the new records are also at. Declared as a bound per partition, [0, the
  old generation's end at deletion), exact = False; beyond it nothing of the new generation may be missing.
  Producers (idempotent confluent-kafka) hold their sends while the topic is gone and deliver them to the new
  one; no send fails unless the gap outlasts their message.timeout.ms.
"""
from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from harness.faults import register
from harness.backends.capabilities import TopicAdmin
from harness.faults.base import Fault, FaultOptions
from harness.effects import LossRange

KAFKA_CLIENT_ERROR = "org.apache.kafka.common.errors"
OPEN_END = 2**63 - 1  # every offset of the deleted generation
CERTAIN_WINDOW_S = 60.0  # producers' scheduled sends over this long could not refill a partition past the query
LONG_SEND_TIMEOUT_MS = 30_000


def _send_timeout_ms(client: dict) -> int:
    """The producers' message.timeout.ms (librdkafka's default 300 s)."""
    return int(next((client[k] for k in ("message.timeout.ms", "delivery.timeout.ms") if k in client), 300_000))


class TopicDeleteOptions(FaultOptions):
    kind: Literal["topic_delete"] = Field("topic_delete", description="topic_delete: the topic deleted while the "
                                                                      "query runs, optionally created again")
    recreate: bool = Field(False, description="create the topic again at once (same partitions, configs)")


@register
class TopicDelete(Fault):
    kind = "topic_delete"
    capabilities = (TopicAdmin,)
    Options = TopicDeleteOptions
    requires = "a Kafka backend"
    kafka_operations = {"DELETE": "DeleteTopics", "DESCRIBE_CONFIGS": "DescribeConfigs"}

    def needs(self) -> dict[str, str]:
        return dict(super().needs(), **({"CREATE": "CreateTopics"} if self.options.recreate else {}))

    def check(self, scenario) -> str | None:
        o = self.options
        timeout = _send_timeout_ms(scenario.producers.client)
        during_traffic = o.every_s is not None or o.first_s < scenario.producers.duration_s
        if not o.recreate and during_traffic and timeout > LONG_SEND_TIMEOUT_MS:
            return (f"a topic deleted during the traffic makes every later send wait message.timeout.ms "
                    f"({timeout} ms) before it fails: set producers.client.\"message.timeout.ms\" to at most "
                    f"{LONG_SEND_TIMEOUT_MS} or time the deletion after the traffic (at_s >= "
                    f"{scenario.producers.duration_s:g})")
        return None

    def inject(self, ctx) -> dict:
        backend, stream, s = ctx.backend, ctx.stream, ctx.scenario
        start = backend.start_offsets(stream)
        configs = {k: v for k, (v, topic_level) in backend.topic_configs(stream).items() if topic_level}
        replication = backend.topic_replication(stream)
        planned_before = ctx.planned_offsets()
        reading = time.time()
        ends = backend.end_offsets(stream)
        deleting = time.time()
        backend.delete_stream(stream)
        deleted = time.time()
        traffic_end = (ctx.traffic_start or deleted) + s.producers.duration_s
        detail = {"log_start": start, "end_offsets": ends, "query_planned_up_to": planned_before,
                  "query_committed_up_to": ctx.committed_offsets(), "deleted_at": deleted,
                  "topic_configs": configs, "replication": replication}
        if not self.options.recreate:
            self.effect.loss = [LossRange(p, lo, hi, acked_before_ms=deleted * 1000.0)
                                for p in start for lo, hi in ((start[p], OPEN_END), (-1, 0))]  # -1: unknown
            self.effect.failure = KAFKA_CLIENT_ERROR
            self.effect.send_failures = deleted < traffic_end
            return detail
        recreated = time.time()
        backend.create_stream(stream, len(ends), configs, replication)
        # sends wait for the topic to come back (found by running it); they fail only if that outlasts their timeout
        self.effect.send_failures = (deleting < traffic_end
                                     and (time.time() - deleting) * 1000.0 >= _send_timeout_ms(s.producers.client))
        new_ends = backend.end_offsets(stream)
        planned = {p: max(planned_before.get(p, 0), o) for p, o in ctx.planned_offsets().items()}
        planned.update({p: o for p, o in planned_before.items() if p not in planned})
        # old-generation events may report a little after the deletion; new-generation ones only after this
        self.effect.new_generation_ms = recreated * 1000.0
        self.effect.loss = [LossRange(p, start[p], OPEN_END, acked_before_ms=recreated * 1000.0) for p in start]
        # the new generation's first offsets may be skipped up to where the old one ended (see above); it may have
        # grown between reading its end and the deletion: by at most what was scheduled meanwhile (and linger)
        grown = int(self._scheduled(s, reading - 0.1 - (ctx.traffic_start or reading), deleted - reading + 0.2)) + 1
        skip_up_to = {p: max(ends.get(p, 0) + grown, planned.get(p, 0)) for p in sorted(set(ends) | set(planned))}
        self.effect.loss += [LossRange(p, 0, o, exact=False) for p, o in skip_up_to.items() if o > 0]
        # sends in flight at the deletion may be acked without their offset (-1 in the ack log; librdkafka retried
        # them and the broker already had them), in either generation, until their timeout runs out
        unknown_until = deleting * 1000.0 + _send_timeout_ms(s.producers.client)
        self.effect.loss += [LossRange(p, -1, 0, acked_before_ms=unknown_until, exact=False) for p in start]
        refill = self._scheduled(s, recreated - (ctx.traffic_start or recreated), CERTAIN_WINDOW_S)
        behind = {p: o - new_ends.get(p, 0) for p, o in planned.items() if o - new_ends.get(p, 0) > refill}
        if behind and s.fail_on_data_loss:
            self.effect.failure = "KAFKA_DATA_LOSS"
        detail.update(recreated_at=recreated, new_end_offsets=new_ends, query_planned_at_recreation=planned,
                      new_generation_may_skip_up_to=skip_up_to, producers_may_refill=refill, behind_new_end=behind)
        return detail

    @staticmethod
    def _scheduled(scenario, t: float, window: float) -> float:
        """Events the producers are scheduled to send in [t, t + window] (seconds after traffic start)."""
        from harness.producers.rates import make_rate

        duration = scenario.producers.duration_s
        rate = make_rate(scenario.producers.rate)
        lo, hi = min(max(t, 0.0), duration), min(max(t + window, 0.0), duration)
        return rate.cumulative(hi) - rate.cumulative(lo)
