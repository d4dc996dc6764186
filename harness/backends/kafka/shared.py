"""A run's view of an embedded Kafka broker that a sweep or a capacity search started once for all its runs
(harness.commands.shared_broker): starting a broker is seconds of CPU per run that measure nothing.

The runs stay independent of each other: each one creates its topic afresh (the previous run's topic of the same
name is deleted with its records first, so offsets start at 0), starts its own Spark driver with a fresh
checkpoint and sink in its own directory, and never stops the broker. `describe()` says the broker was shared
(its cluster id, when and by what it was started, how many runs used it before), which lands in the run's
result.json (`backend_info.shared`), so a reader knows the runs shared a broker. The broker's processes carry the
sweep's run id, not the run's: `add_to_sampler` has the run's resource sampler follow them too.
"""
from __future__ import annotations

from pathlib import Path

from harness.backends.kafka.admin import KafkaBackendBase
from harness.backends.kafka.embedded import EmbeddedKafka
from harness.samplers.resources import ProcessFinder
from harness.supervisor import Supervisor


class Finders:
    """Several ProcessFinders as one: the run's processes and the shared broker's."""

    def __init__(self, *finders: ProcessFinder):
        self.finders = finders
        self.me = finders[0].me

    def find(self) -> list[int]:
        return sorted({pid for f in self.finders for pid in f.find()})


class SharedKafka(KafkaBackendBase):
    existing_topic = "recreate"  # the previous run's topic of the same name goes, records and all

    def __init__(self, broker: EmbeddedKafka, processes_run_id: str, identity: dict):
        self.broker = broker
        self.bootstrap = broker.bootstrap
        self.replication = broker.replication
        self.processes_run_id = processes_run_id
        self.identity = dict(identity)
        self.set_client(broker.client)

    def _alive(self) -> bool:
        return all(n.child is not None and n.child.alive() for n in self.broker.nodes)

    def start(self, run_dir: Path, supervisor: Supervisor) -> None:
        """Started already: only checked to answer (a broker that died between runs fails this run, named)."""
        self.wait_ready(self.broker.n, timeout=30, alive=self._alive)

    def stop(self) -> None:
        self.close_clients()  # the broker is the sweep's: it stops after the last run

    def describe(self) -> dict:
        return {**self.broker.describe(), "shared": dict(self.identity)}

    def add_to_sampler(self, sampler) -> None:
        """The run's resource sampler follows the shared broker's processes too (they are the system under test)."""
        sampler.finder = Finders(sampler.finder, ProcessFinder(self.processes_run_id, include_self=False))
