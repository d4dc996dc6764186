"""A competing reader with a higher epoch takes the query's partitions: the emulator detaches their receivers
with amqp:link:stolen, as the service does when another exclusive (epoch) receiver opens, and keeps lower epochs
out for `hold_s`. What the query does next is what the scenario shows: the project's source counts the steal,
opens its receiver again, and the run judges that nothing was lost or duplicated."""
from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from harness.faults import register
from harness.backends.capabilities import EmulatorControl, EpochReceivers
from harness.faults.base import Fault, FaultError, FaultOptions, partitions_problem


class EpochStealOptions(FaultOptions):
    kind: Literal["epoch_steal"] = Field("epoch_steal", description="epoch_steal: a reader with a higher epoch takes "
                                                                    "the query's partitions (Event Hubs)")
    partitions: list[int] | None = Field(None, description="partitions to take (default: all)")
    consumer_group: str = Field("$Default", description="the consumer group the competing reader joins (the query's, "
                                                        "to take its partitions)")
    hold_s: float = Field(0.0, ge=0, le=600, description="the competing reader holds the partition this long")
    attached_timeout_s: float = Field(30.0, gt=0, le=3600, description="wait this long for the query's receivers")


@register
class EpochSteal(Fault):
    kind = "epoch_steal"
    capabilities = (EmulatorControl, EpochReceivers)
    Options = EpochStealOptions
    requires = "an Event Hubs emulator backend"
    eventhubs_control = {"hubs/<hub>/partitions/<p>/steal": "attach a higher-epoch reader held for hold_s"}

    def check(self, scenario) -> str | None:
        return partitions_problem(scenario, self.options.partitions)

    def inject(self, ctx) -> dict:
        o, hub = self.options, ctx.stream
        chosen = o.partitions if o.partitions is not None else list(range(ctx.scenario.stream.partitions))
        stolen: dict[int, int] = {}
        deadline = time.monotonic() + o.attached_timeout_s
        while True:  # a receiver must be attached to be stolen from (the query reads between batches too)
            for p in chosen:
                if not stolen.get(p):
                    stolen[p] = int(ctx.backend.control(f"hubs/{hub}/partitions/{p}/steal",
                                                        {"consumer_group": o.consumer_group,
                                                         "hold_s": o.hold_s})["stolen"])
            if all(stolen.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if not any(stolen.values()):
            raise FaultError(f"no receiver of the query was attached to partitions {chosen} within "
                             f"{o.attached_timeout_s:.0f}s: nothing to steal")
        # the source must notice (a receiver cached in a worker no later task uses may never learn of it)
        self.effect.expect_source = {"stolen": 1}
        return {"receivers_detached": stolen, "hold_s": o.hold_s}
