"""What the runner's phases found out about a run, typed: written as run_state.json beside what they recorded,
and read back by the judge (harness.verdict), so a run directory re-judges the same anywhere.

Facts only: live handles (samplers, the nemesis, the producer fleet, the proxy, a standalone cluster) stay on the
run context (harness.context) and end with the run.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from harness import atomic


@dataclass
class RunState:
    drained: bool = False  # the query reached the end offsets taken after the traffic and stopped
    drain_detail: str = "not reached"
    error: str | None = None  # what went wrong with the run itself (then the verdict says so)
    interrupted: bool = False  # Ctrl-C, SIGTERM or SIGHUP: the run is then not judged (`error` says which)
    backend: dict[str, Any] = field(default_factory=dict)  # the service as it described itself
    end_offsets: dict[str, int] = field(default_factory=dict)  # per partition, taken after the traffic
    scenario_dir: str | None = None  # where a user's query module sits
    traffic_start: float | None = None  # epoch s: the measured window's start (faults are timed from it)
    query: dict[str, Any] = field(default_factory=dict)  # the query process at the end: state, error, kills
    failed_as_declared: bool = False  # the query failed with the failure a fault declared
    stopped_early: str | None = None  # a soak stopped at its first failed live check (fail_fast), and why
    fault_errors: list[str] = field(default_factory=list)  # the nemesis's own problems (a schedule not done)
    positions_recorded: int | None = None  # events whose stored position was read back from the service
    positions_error: str | None = None  # ... or why that failed (the run cannot be judged then)
    spark_cluster: dict[str, Any] | None = None  # a standalone cluster's master and workers as they ended
    elapsed_s: float = 0.0
    ended_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)  # keys of an older run_state.json, kept as they were

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
