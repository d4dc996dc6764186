"""Records aged out before the query read them, deterministically: Kafka's DeleteRecords on chosen partitions.

The loss is exact: per partition, [log start before, log start after) as the broker reports it. The query fails
with KAFKA_DATA_LOSS under failOnDataLoss=true when some removed record lies beyond the batches Spark had planned
once the records were gone (it will try to read them); with failOnDataLoss=false it skips them and goes on.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.faults import register
from harness.backends.capabilities import TopicAdmin
from harness.faults.base import Fault, FaultOptions, partitions_problem


class DeleteRecordsOptions(FaultOptions):
    kind: Literal["delete_records"] = Field("delete_records", description="delete_records: records deleted before the"
                                                                          " query read them (Kafka's DeleteRecords)")
    partitions: list[int] | None = Field(None, description="partitions to cut (default: all)")
    keep_last: int = Field(0, ge=0, description="records to leave at the end of each partition")


@register
class DeleteRecords(Fault):
    kind = "delete_records"
    capabilities = (TopicAdmin,)
    Options = DeleteRecordsOptions
    requires = "a Kafka backend"
    kafka_operations = {"DELETE": "DeleteRecords"}

    def check(self, scenario) -> str | None:
        return partitions_problem(scenario, self.options.partitions)

    def inject(self, ctx) -> dict:
        before, cut = self.cut_points(ctx, self.options.partitions, self.options.keep_last)
        after = ctx.backend.delete_records(ctx.stream, cut)
        return {"log_start_before": before, "log_start_after": after,
                **self.declare_cut(ctx, before, after, "KAFKA_DATA_LOSS")}
