"""The service busy: the emulator answers sends and receives with com.microsoft:server-busy (`reject`) or detaches
every link with it (`detach`) while the fault is active, as an Event Hubs namespace over its throughput units
does. Clients are expected to retry: nothing acked may be lost; sends whose retries ran out fail, and count as
failed sends, never as losses."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.faults import register
from harness.backends.capabilities import EmulatorControl
from harness.faults.base import Fault, FaultOptions


class ThrottleOptions(FaultOptions):
    kind: Literal["throttle"] = Field("throttle", description='throttle: the Event Hubs service busy (the emulator)')
    mode: Literal["reject", "detach"] = Field("reject", description="refuse each operation, or detach the links")


@register
class Throttle(Fault):
    kind = "throttle"
    capabilities = (EmulatorControl,)
    Options = ThrottleOptions
    requires = "an Event Hubs emulator backend"
    eventhubs_control = {"throttle": "answer every send and receive with server-busy, or detach every link"}

    def check(self, scenario) -> str | None:
        if self.options.heal_after_s is None:
            return "needs duration_s or window: a throttle that never ends stalls the run"
        return None

    def inject(self, ctx) -> dict:
        self.effect.send_failures = True
        ctx.backend.control("throttle", {"on": True, "mode": self.options.mode})
        return {"mode": self.options.mode}

    def heal(self, ctx) -> dict:
        ctx.backend.control("throttle", {"on": False})
        return {}
