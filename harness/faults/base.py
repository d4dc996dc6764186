"""What a fault is: one small unit with inject, heal and a declared effect (Jepsen's nemesis package).

A fault's options are a strict pydantic model (so a scenario's `[[faults]]` table is validated like the rest of
the file); its schedule fields are common to every fault. `inject(ctx)` acts on the running system and returns
what it did (recorded in faults.jsonl); `heal(ctx)` undoes it, is idempotent and is always called, also on Ctrl-C
and on errors. The *effect* is what the fault makes expected, read from the system at the moment of the fault:
exact loss ranges, the Spark error class the query should fail with, whether the query is down for a while, and
whether producer sends may fail. The checker judges against these declarations, never against guesses.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.backends.capabilities import Capability
from harness.effects import Effect, LossRange



class RunHandle(Protocol):
    """What a fault acts on, and all it may touch: the running system as harness.context.RunContext (the one
    implementation) hands it over. Declared here, on the faults' side, because the scenario model that lists the
    faults sits below the run context: faults depend on what they use, not on the layer above them."""

    scenario: Any  # harness.config.Scenario
    run_dir: Path
    backend: Any  # harness.backends.base.Backend: brokers, topics, the emulator's control API
    query: Any  # harness.spark.process.SparkQueryProcess | None: kill it, the runner restarts it
    supervisor: Any
    timeline: Any
    state: Any  # harness.records.runstate.RunState: what the run found out
    traffic_start: float | None
    netproxy: dict[str, Any] | None  # the TCP proxy in front of the brokers, when there is one
    objstore: dict[str, Any] | None  # the S3 store the checkpoint is on, and its proxy (harness.objstore)
    fault_memory: dict[str, int]  # a fault's own counters across its injections (which executor was picked)

    @property
    def stream(self) -> str: ...

    @property
    def checkpoint(self) -> Path: ...

    def offset_log(self) -> list[int]: ...

    def commit_log(self) -> list[int]: ...

    def committed_offsets(self) -> dict[int, int]: ...

    def planned_offsets(self) -> dict[int, int]: ...

    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any: ...

    def query_for(self, scenario: Any) -> Any:
        """A query process (not started) for `scenario`'s [spark] table on this run's checkpoint: what a change
        (harness.faults.change) hands the running one to become."""


class FaultOptions(BaseModel):
    """Schedule fields every fault has; a fault's own options are declared on its subclass."""

    # no inf or nan (TOML has both): an injection at inf never comes, and the run would wait for it
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)

    kind: str
    at_s: float | None = Field(None, ge=0, description="first injection, seconds after traffic starts")
    every_s: float | None = Field(None, gt=0, description="inject again every this many seconds")
    count: int | None = Field(None, ge=1, le=10_000, description="injections in all (default 1, or until_s)")
    until_s: float | None = Field(None, gt=0, description="no injection after this (with every_s)")
    jitter_s: float = Field(0.0, ge=0, description="uniform random delay added to each injection, seeded")
    duration_s: float | None = Field(None, ge=0, description="heal this long after each injection")
    window: tuple[float, float] | None = Field(None, description="[start_s, end_s]: inject at start, heal at end")

    @model_validator(mode="after")
    def _schedule(self):
        if self.window is not None:
            start, end = self.window
            if not 0 <= start < end:
                raise ValueError("window = [start_s, end_s] needs 0 <= start_s < end_s")
            if self.at_s is not None or self.duration_s is not None:
                raise ValueError("window replaces at_s and duration_s: give one or the other")
        elif self.at_s is None:
            raise ValueError("a fault needs at_s (seconds after traffic starts) or window = [start_s, end_s]")
        if self.until_s is not None and self.every_s is None:
            raise ValueError("until_s needs every_s")
        if self.count is not None and self.count > 1 and self.every_s is None:
            raise ValueError("count > 1 needs every_s")
        return self

    @property
    def first_s(self) -> float:
        return self.window[0] if self.window else float(self.at_s)  # type: ignore[arg-type]

    @property
    def heal_after_s(self) -> float | None:
        return self.window[1] - self.window[0] if self.window else self.duration_s


class Fault:
    """Subclasses set `kind` and `Options`, and implement inject/heal; one file each under harness/faults/."""

    kind: ClassVar[str]
    Options: ClassVar[type[FaultOptions]]
    requires: ClassVar[str] = ""  # a sentence: what the run must have for this fault (checked before start)
    # Kafka topic operations (ACL operation names, as the broker authorizes them) -> the admin request that needs
    # each. Checked against the configured principal once the topic exists, before any traffic: a fault the
    # principal may not apply refuses the run rather than fail half-applied (harness.backends.kafka.authz).
    kafka_operations: ClassVar[dict[str, str]] = {}
    # Event Hubs: the project's emulator's control API endpoints the fault drives -> what each does. The service
    # offers no such API (a real namespace: deleting hubs is Azure Resource Manager's, retention and throttling
    # are the service's own), nor does Microsoft's emulator: such a fault is refused before the run there.
    eventhubs_control: ClassVar[dict[str, str]] = {}
    # what the backend must offer (harness.backends.capabilities): refused at load otherwise, in its own words
    capabilities: ClassVar[tuple[type[Capability], ...]] = ()
    # its injection takes the query down for a while (Effect.query_down, set by `inject`): a run is then judged on
    # the restarted query's first batch (`query_recovered`), known before the run from this declaration
    takes_query_down: ClassVar[bool] = False
    # the checks of its own its declared effect is judged by (harness.checkers.pauses), listed before the run
    checks: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: FaultOptions):
        self.options = options
        self.effect = Effect(query_down=self.takes_query_down)

    @classmethod
    def prepare(cls, ctx: RunHandle, options: list[FaultOptions]) -> None:
        """Once per kind, before the backend starts, with every scheduled entry of this kind: set up what the
        fault needs in place from the start (a proxy in front of the brokers, a broker setting)."""

    def needs(self) -> dict[str, str]:
        """This entry's Kafka topic operations (`kafka_operations`; an option may add some)."""
        return dict(self.kafka_operations)

    def successor(self, scenario) -> Any:
        """The scenario the query runs as after this fault, when the fault changes it (harness.faults.change):
        validated at load like the scenario itself. None: the query stays what it was."""
        return None

    @classmethod
    def pinned(cls, detail: dict[str, Any]) -> dict[str, Any]:
        """Options that make a recorded injection (its `detail` as faults.jsonl has it) hit again what it hit when
        it is replayed on its own (harness shrink): a choice drawn with the seed and a count of earlier injections
        (a broker's node) is drawn anew once those are gone. {}: the fault draws nothing."""
        return {}

    def check(self, scenario) -> str | None:
        """Before anything starts, once the backend offers the fault's capabilities: None, or why this scenario
        cannot carry this fault (the CLI exits 2)."""
        return None

    def refusal(self, scenario) -> str | None:
        """Why this scenario cannot carry this fault: a capability its backend lacks, or `check`'s reason."""
        offered = scenario.backend.capabilities()
        missing = [c for c in self.capabilities if c not in offered]
        return missing[0].refusal(scenario.backend, self) if missing else self.check(scenario)

    def inject(self, ctx: RunHandle) -> dict[str, Any]:
        raise NotImplementedError

    def heal(self, ctx: RunHandle) -> dict[str, Any]:
        return {}

    def cut_points(self, ctx, partitions: list[int] | None, keep_last: int) -> tuple[dict[int, int], dict[int, int]]:
        """(first retained, where to cut) per chosen partition (default: all), leaving `keep_last` events."""
        before, ends = ctx.backend.start_offsets(ctx.stream), ctx.backend.end_offsets(ctx.stream)
        chosen = partitions if partitions is not None else sorted(ends)
        return before, {p: max(before[p], ends[p] - keep_last) for p in chosen}

    def declare_cut(self, ctx: RunHandle, before: dict[int, int], after: dict[int, int], failure: str) -> dict:
        """For faults that remove the start of partitions: the exact loss [before, after) per partition, and the
        query's failure (`failure`) under failOnDataLoss=true when removed events lay beyond the batches Spark had
        planned. Spark's planned position is read after the removal: every batch planned from now on starts there
        or later, so removed events past it will certainly be missed."""
        self.effect.loss = [LossRange(p, before[p], after[p]) for p in after if after[p] > before[p]]
        planned = ctx.planned_offsets()
        unread_removed = {p: after[p] - max(before[p], planned.get(p, 0)) for p in after
                          if after[p] > max(before[p], planned.get(p, 0))}
        if unread_removed and ctx.scenario.fail_on_data_loss:
            self.effect.failure = failure
        return {"query_planned_up_to": planned, "removed_beyond_query": unread_removed}


def partitions_problem(scenario, partitions: list[int] | None) -> str | None:
    """For faults that act on chosen partitions: why the scenario's stream does not have them, or None."""
    bad = [p for p in partitions or [] if not 0 <= p < scenario.stream.partitions]
    if bad:
        return f"partitions {bad} out of range for {scenario.stream.partitions} partitions"
    return None


class FaultError(RuntimeError):
    """A fault could not be applied; the run records it and fails (a half-applied fault is never hidden)."""
