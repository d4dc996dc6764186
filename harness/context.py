"""What a run is made of while it runs, handed to every phase of the runner and to every fault.

Faults act on the system only through this: the backend (brokers, topics), the query process (kill it: the
runner restarts it from the same checkpoint, as a production supervisor would), the checkpoint's logs, the
timeline. Anything a fault needs to know about the query's position it reads here, at the moment of the fault.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.backends.base import Backend
from harness.config import Scenario
from harness.console import Console
from harness.records.runstate import RunState
from harness.spark import checkpoint as ckpt
from harness.supervisor import Supervisor, wait_until
from harness.records.timeline import Timeline

if TYPE_CHECKING:
    from harness.spark.process import SparkQueryProcess


@dataclass
class RunContext:
    scenario: Scenario
    run_dir: Path
    supervisor: Supervisor
    timeline: Timeline
    backend: Backend
    console: Console
    query: "SparkQueryProcess | None" = None
    traffic_start: float | None = None
    state: RunState = field(default_factory=RunState)  # what the phases found out, for the verdict
    # live handles, ended with the run
    fleet: Any = None  # producers.fleet.ProducerFleet
    nemesis: Any = None  # harness.faults.nemesis.Nemesis
    lag_sampler: Any = None  # harness.samplers.lag.LagSampler
    resource_sampler: Any = None  # harness.samplers.resources.ResourceSampler
    live_monitor: Any = None  # harness.soak.live.LiveMonitor
    cluster: Any = None  # harness.spark.cluster.StandaloneCluster
    netproxy: dict[str, Any] | None = None  # the TCP proxy in front of the brokers: control address, ports, pid
    objstore: dict[str, Any] | None = None  # the S3 store the checkpoint is on and its proxy (harness.objstore)
    query_watch: str = "running"  # what the last look at the query process saw
    fault_memory: dict[str, int] = field(default_factory=dict)  # faults' own counters across injections
    # a query process for a changed scenario on this run's checkpoint (harness.faults.change), set by the runner
    make_query: Any = None

    def query_for(self, scenario: Scenario) -> "SparkQueryProcess":
        return self.make_query(scenario)

    @property
    def stream(self) -> str:
        return self.scenario.stream.name

    @property
    def checkpoint(self) -> Path:
        return self.run_dir / "checkpoint"

    def offset_log(self) -> list[int]:
        return ckpt.batch_ids(self.checkpoint / "offsets")

    def commit_log(self) -> list[int]:
        return ckpt.batch_ids(self.checkpoint / "commits")

    def committed_offsets(self) -> dict[int, int]:
        """Per partition, where the query's last committed batch ended ({} before the first commit)."""
        return {int(p): o for p, o in ckpt.committed(self.checkpoint).get(self.stream, {}).items()}

    def planned_offsets(self) -> dict[int, int]:
        """Per partition, where the last planned batch (offset log, committed or not) ends."""
        return {int(p): o for p, o in ckpt.planned(self.checkpoint).get(self.stream, {}).items()}

    def wait_for(self, predicate, timeout: float, what: str, interval: float = 0.05):
        return wait_until(predicate, timeout, interval, what)
