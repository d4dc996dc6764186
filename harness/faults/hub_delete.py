"""An event hub deleted under the running query, and optionally created again empty (same name, partitions).

Just before deleting, the fault reads with a plain SDK consumer where the harness's retained events sit (Event
Hubs sends report no position), so the loss it declares is exact: everything retained is gone, for events acked
before the deletion. A recreated hub starts its sequence numbers at 0 again: a new generation, for the order check.
Under failOnDataLoss=true the project's source fails the query once it sees the partitions' sequence numbers go
back or the hub gone. A hub deleted for good needs failOnDataLoss=true: under false the source waits for the hub
to come back, and the run could never drain. Through the Kafka endpoint (`protocol = "kafka"`) only recreate with
failOnDataLoss = false is declared: Spark's Kafka source carries on at its old offsets in the new hub, so the new
hub's first events up to the old end may be skipped (a bound, as the Kafka backend's topic_delete declares it).
"""
from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from harness.faults import register
from harness.backends.capabilities import EmulatorControl
from harness.faults.base import Fault, FaultOptions
from harness.effects import LossRange
from harness.faults.topic_delete import OPEN_END

class HubDeleteOptions(FaultOptions):
    kind: Literal["hub_delete"] = Field("hub_delete", description="hub_delete: the event hub deleted under the query,"
                                                                  " optionally created again")
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
        if getattr(scenario.backend, "protocol", "amqp") == "kafka" and (
                not self.options.recreate or scenario.fail_on_data_loss):
            return ("backend.protocol = 'kafka': only recreate = true with spark.source_options.failOnDataLoss = false "
                    "is measured on the Kafka endpoint (Spark's Kafka source goes on at its old offsets in the new "
                    "hub); a hub deleted for good, or failOnDataLoss = true, has no declared effect there yet: use "
                    "protocol = 'amqp'")
        if not self.options.recreate and not scenario.fail_on_data_loss:
            return ("a hub deleted for good needs spark.source_options.failOnDataLoss = true (under false the "
                    "source waits for the hub to come back and the run cannot drain); or set recreate = true")
        return None

    def inject(self, ctx) -> dict:
        backend, hub = ctx.backend, ctx.stream
        planned = ctx.planned_offsets()
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
        if self.options.recreate and ctx.scenario.backend.protocol == "kafka":
            # Spark's Kafka source (failOnDataLoss = false) goes on at its old offsets in the new hub, and an
            # executor's consumer may serve records it had fetched from the old one: the new hub's first events,
            # up to where the old one ended (or the query had planned), may be skipped (measured: eh-hub-delete
            # through the Kafka endpoint lost 5,034 such events); a bound, as topic_delete declares it
            self.effect.loss += [LossRange(p, 0, max(tail_end[p], planned.get(p, 0)), exact=False)
                                 for p in tail_end if max(tail_end[p], planned.get(p, 0)) > 0]
            # a Kafka producer throttled is delayed (throttle_time_ms), not refused: the old hub may take sends
            # after its tail was read, up to the deletion (measured: 31 such events over 4 partitions)
            self.effect.loss += [LossRange(p, tail_end[p], OPEN_END, acked_before_ms=resumed_ms, exact=False)
                                 for p in tail_end]
        self.effect.send_failures = True  # sends refused while the hub goes may run out of retries
        if ctx.scenario.fail_on_data_loss:
            self.effect.failure = ctx.scenario.backend.data_loss_failure
        return {"start": before, "end": tail_end, "placements_read": len(placements),
                "recreated": self.options.recreate}
