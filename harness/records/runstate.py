"""What the runner's phases found out about a run, typed: written as run_state.json beside what they recorded,
and read back by the judge (harness.verdict), so a run directory re-judges the same anywhere.

Facts only: live handles (samplers, the nemesis, the producer fleet, the proxy, a standalone cluster) stay on the
run context (harness.context) and end with the run.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness.files import atomic


@dataclass
class RunState:
    drained: Annotated[bool, Field(description=(
        'the query reached the end offsets taken after the traffic and stopped'))] = False
    drain_detail: Annotated[str, Field(description='how the drain went, in words')] = "not reached"
    error: Annotated[str | None, Field(description=(
        'what went wrong with the run itself (then the verdict says so)'))] = None
    interrupted: Annotated[bool, Field(description=(
        'Ctrl-C, SIGTERM or SIGHUP: the run is then not judged (`error` says which)'))] = False
    backend: Annotated[dict[str, Any], Field(description=(
        'the service as it described itself'))] = field(default_factory=dict)
    end_offsets: Annotated[dict[str, int], Field(description=(
        'per partition, the end offset taken after the traffic'))] = field(default_factory=dict)
    scenario_dir: Annotated[str | None, Field(description="where a user's query module was imported from")] = None
    traffic_start: Annotated[float | None, Field(description=(
        "Unix seconds: the measured window's start (faults are timed from it)"))] = None
    query: Annotated[dict[str, Any], Field(description=(
        'the query process at the end: state, error, kills'))] = field(default_factory=dict)
    failed_as_declared: Annotated[bool, Field(description='the query failed with the failure a fault declared')] = False
    stopped_early: Annotated[str | None, Field(description=(
        'a soak stopped at its first failed live check (fail_fast), and why'))] = None
    fault_errors: Annotated[list[str], Field(description=(
        "the nemesis's own problems (a schedule not done)"))] = field(default_factory=list)
    positions_recorded: Annotated[int | None, Field(description=(
        'events whose stored position was read back from the service'))] = None
    positions_error: Annotated[str | None, Field(description=(
        'why reading the positions back failed (the run cannot be judged then)'))] = None
    spark_cluster: Annotated[dict[str, Any] | None, Field(description=(
        "a standalone cluster's master and workers as they ended"))] = None
    elapsed_s: Annotated[float, Field(description="the run's wall time, seconds")] = 0.0
    ended_at: Annotated[float, Field(description='Unix seconds when the run ended')] = 0.0
    extra: Annotated[dict[str, Any], Field(description=(
        'keys of an older run_state.json, kept as they were'))] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunState":
        known = {f.name for f in fields(cls)} - {"extra"}
        return cls(**{k: v for k, v in data.items() if k in known},
                   extra={k: v for k, v in data.items() if k not in known})

    @classmethod
    def read(cls, path: Path) -> "RunState":
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {**{k: v for k, v in data.items() if k != "extra"}, **self.extra}

    def write(self, path: Path) -> None:
        atomic.write_json(path, self.as_dict())
