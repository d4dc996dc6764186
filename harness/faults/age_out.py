"""Events aged out of an Event Hubs partition before the query read them: the emulator drops them on demand, as
the service's retention would, deterministically.

The loss is exact: just before the cut the fault reads, with a plain SDK consumer, which of the harness's events
sit in the range it will remove (Event Hubs sends report no position, so this is how the checker learns them),
then removes [first retained, cut) and reads the partition's new start. Under failOnDataLoss=true the project's
source fails the query when a batch would start behind the first retained event; under false it skips the gap and
reports it exactly. Through the Kafka endpoint (`protocol = "kafka"`) Spark's Kafka source sees the same cut as a
log start moved past its offsets (a fetch below it is OFFSET_OUT_OF_RANGE): under true it fails with
KAFKA_DATA_LOSS, under false it goes on from the new log start; the loss is the same exact range.
"""
from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from harness.faults import register
from harness.backends.capabilities import EmulatorControl
from harness.faults.base import Fault, FaultOptions, partitions_problem



class AgeOutOptions(FaultOptions):
    kind: Literal["age_out"] = Field("age_out", description="age_out: Event Hubs events aged out before the query "
                                                            "read them (the emulator)")
    partitions: list[int] | None = Field(None, description="partitions to cut (default: all)")
    keep_last: int = Field(0, ge=0, description="events to leave at the end of each partition")


@register
class AgeOut(Fault):
    kind = "age_out"
    capabilities = (EmulatorControl,)
    Options = AgeOutOptions
    requires = "an Event Hubs emulator backend"
    eventhubs_control = {"hubs/<hub>/age-out": "drop the first events of a partition, as retention would"}

    def check(self, scenario) -> str | None:
        return partitions_problem(scenario, self.options.partitions)

    def inject(self, ctx) -> dict:
        backend = ctx.backend
        before, cut = self.cut_points(ctx, self.options.partitions, self.options.keep_last)
        placements = backend.read_placements(ctx.stream, {p: (before[p], cut[p]) for p in cut})
        backend.write_placements(ctx.run_dir / "placements" / f"age_out-{time.time_ns()}.csv", placements)
        for p in cut:
            if cut[p] > before[p]:
                backend.control(f"hubs/{ctx.stream}/age-out", {"partition": str(p), "up_to_seq": cut[p] - 1})
        after = {p: o for p, o in backend.start_offsets(ctx.stream).items() if p in cut}
        self.effect.gap_visible = True  # the partition goes on: a source reading it sees exactly what is missing
        return {"start_before": before, "start_after": after, "placements_read": len(placements),
                **self.declare_cut(ctx, before, after, ctx.scenario.backend.data_loss_failure)}
