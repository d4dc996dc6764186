"""An event hub deleted under the running query, and optionally created again empty (same name, partitions).

Just before deleting, the fault reads with a plain SDK consumer where the harness's retained events sit (Event
Hubs sends report no position), so the loss it declares is exact: everything retained is gone, for events acked
before the deletion. A recreated hub starts its sequence numbers at 0 again: a new generation, for the order check.
Under failOnDataLoss=true the project's source fails the query once it sees the partitions' sequence numbers go
back or the hub gone. A hub deleted for good needs failOnDataLoss=true: under false the source waits for the hub
to come back, and the run could never drain.
"""
from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from harness.faults import register
from harness.faults.age_out import DATA_LOSS
from harness.backends.capabilities import EmulatorControl
from harness.faults.base import Fault, FaultOptions
from harness.effects import LossRange

class HubDeleteOptions(FaultOptions):
    kind: Literal["hub_delete"] = "hub_delete"
    recreate: bool = Field(False, description="create the hub again, empty, right after deleting it")


@register
class HubDelete(Fault):
    kind = "hub_delete"
    capabilities = (EmulatorControl,)
    Options = HubDeleteOptions
    requires = "an Event Hubs emulator backend"
    eventhubs_control = {"hubs/<hub>/delete": "delete the hub", "hubs/<hub>/recreate": "create it again empty",
                         "throttle": "refuse sends for the moment of the deletion"}

    def check(self, scenario) -> str | None:
        if not self.options.recreate and not scenario.fail_on_data_loss:
            return ("a hub deleted for good needs spark.source_options.failOnDataLoss = true (under false the "
                    "source waits for the hub to come back and the run cannot drain); or set recreate = true")
        return None

    def inject(self, ctx) -> dict:
        backend, hub = ctx.backend, ctx.stream
        before, ends = backend.start_offsets(hub), backend.end_offsets(hub)
        placements = backend.read_placements(hub, {p: (before[p], ends[p]) for p in ends})  # the bulk, seconds
        # then, with sends refused (server busy: producers retry), the tail that came meanwhile: the hub holds
        # exactly what was read when it goes, and every event acked before the sends resume is of the old hub
        backend.control("throttle", {"on": True, "mode": "reject"})
        try:
            tail_end = backend.end_offsets(hub)
            placements += backend.read_placements(hub, {p: (ends[p], tail_end[p]) for p in tail_end})
            backend.control(f"hubs/{hub}/delete")
            if self.options.recreate:
                backend.control(f"hubs/{hub}/recreate", {"partition_count": len(ends)})
        finally:
            backend.control("throttle", {"on": False})
        resumed_ms = time.time() * 1000.0
        backend.write_placements(ctx.run_dir / "placements" / f"hub_delete-{time.time_ns()}.csv", placements)
        if self.options.recreate:
            self.effect.new_generation_ms = resumed_ms
        self.effect.loss = [LossRange(p, before[p], tail_end[p], acked_before_ms=resumed_ms) for p in tail_end
                            if tail_end[p] > before[p]]
        self.effect.send_failures = True  # sends refused while the hub goes may run out of retries
        if ctx.scenario.fail_on_data_loss:
            self.effect.failure = DATA_LOSS
        return {"start": before, "end": tail_end, "placements_read": len(placements),
                "recreated": self.options.recreate}
