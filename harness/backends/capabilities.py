"""What a backend can do beyond the one interface (harness.backends.base.Backend), as faults need it.

A fault names the capabilities it needs (`Fault.needs_capabilities`); a scenario whose `[backend]` does not offer
one is refused at load, exit 2, with the capability's own words for what the scenario must have. The `[backend]`
model says what it offers (`BackendSpec.capabilities`), so no fault compares backend kinds or modes.
"""
from __future__ import annotations


class Capability:
    """A capability: a class, never instantiated. `refusal(spec, fault)` says what a scenario with this `[backend]`
    lacks for that fault."""

    @classmethod
    def refusal(cls, spec, fault) -> str:
        raise NotImplementedError


class TopicAdmin(Capability):
    """Kafka topic administration through the admin API: delete records, add partitions, change topic configs,
    delete and recreate the topic, read records back (the backend's `admin()`, `delete_records`, ...)."""

    @classmethod
    def refusal(cls, spec, fault) -> str:
        return "needs a Kafka backend"


class BrokerProcesses(Capability):
    """The harness's own Kafka broker processes: stop, pause and restart one (`nodes`, `start_node`)."""

    @classmethod
    def refusal(cls, spec, fault) -> str:
        return "needs the embedded Kafka backend (backend.mode = \"embedded\"): it stops and starts broker processes"


class ProxiedListener(Capability):
    """A listener of the harness's own brokers that its TCP proxy (harness.netproxy) can stand in front of."""

    @classmethod
    def refusal(cls, spec, fault) -> str:
        return "needs backend.kind = 'kafka' with mode = 'embedded' (the proxied listener is added to its brokers)"


class EmulatorControl(Capability):
    """The project's Event Hubs emulator's control API (`control(path, body)`): delete and recreate hubs, age
    events out, throttle, steal receivers. The service offers no such API, nor does Microsoft's emulator."""

    @classmethod
    def refusal(cls, spec, fault) -> str:
        if getattr(spec, "kind", None) != "eventhubs":
            return "needs backend.kind = 'eventhubs' with mode = 'emulator' (faults act through its control API)"
        where = ("a real namespace does not allow it" if spec.mode == "namespace" else
                 "Microsoft's emulator (mode = 'container') has none")
        control = getattr(fault, "eventhubs_control", None)
        what = f" ({'; '.join(control.values())})" if control else ""
        return f"needs the emulator's control API{what}; {where} (run it with backend.mode = 'emulator')"


class EpochReceivers(Capability):
    """The query reads Event Hubs through AMQP receivers with an owner level (epoch), which a competing reader with
    a higher one takes over. Spark's Kafka source, through the Kafka endpoint, has no such receivers: its consumers
    are given partitions by assignment."""

    @classmethod
    def refusal(cls, spec, fault) -> str:
        if getattr(spec, "protocol", "amqp") == "kafka":
            return ("has no meaning with backend.protocol = 'kafka': Spark's Kafka source reads through Kafka "
                    "consumers given their partitions by assignment, with no epoch receiver to steal from; use "
                    "protocol = 'amqp'")
        return EmulatorControl.refusal(spec, fault)
