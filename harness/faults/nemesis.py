"""The nemesis: one thread that runs the fault schedule against the run and records every step.

Each injection gets a fresh fault unit; its inject and heal are written to faults.jsonl (wall-clock time, what
was done, the effect declared) and to the timeline. Whatever happens, everything injected is healed: at its
scheduled time, before the drain (`finish`), or on the way out after an error or Ctrl-C (`stop`).
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from harness.faults import fault_for
from harness.faults.base import Fault, FaultOptions, RunHandle
from harness.effects import Effect
from harness.faults.schedule import Step, last_action_s, plan
from harness.files.jsonl import read_jsonl


class Nemesis(threading.Thread):
    def __init__(self, ctx: RunHandle, faults: list[FaultOptions], seed: int, horizon_s: float):
        super().__init__(name="nemesis", daemon=True)
        self.ctx = ctx
        self.faults = faults
        self.steps = plan(faults, seed, horizon_s)
        self.path = ctx.run_dir / "faults.jsonl"
        self.errors: list[str] = []
        self._active: dict[Step, Fault] = {}
        self._lock = threading.Lock()  # one inject/heal at a time, also against heal_all from the main thread
        self._halt = threading.Event()

    @property
    def end_s(self) -> float:
        """When the last scheduled action is due (seconds after traffic start)."""
        return last_action_s(self.steps)

    def run(self) -> None:
        actions = [(s.inject_s, 0, s) for s in self.steps] + [(s.heal_s, 1, s) for s in self.steps
                                                              if s.heal_s is not None]
        for at, kind, step in sorted(actions, key=lambda a: (a[0], a[1], a[2].fault_index, a[2].n)):
            start = self.ctx.traffic_start
            assert start is not None, "the nemesis starts with the traffic"
            if self._halt.wait(max(0.0, start + at - time.time())):
                return
            if kind == 0:
                self._inject(step)
            else:
                self._heal(step)

    def _inject(self, step: Step) -> None:
        with self._lock:
            if self._halt.is_set():
                return
            fault = fault_for(self.faults[step.fault_index])
            self._active[step] = fault
            started = time.time()  # an injection may take seconds (reading what it cuts): its effects start here
            try:
                detail = fault.inject(self.ctx) or {}
                self._record("inject", step, fault, detail, started=started)
            except Exception as exc:  # recorded and judged: a fault that did not apply fails the run
                self._record("inject", step, fault, {}, error=f"{type(exc).__name__}: {exc}", started=started)

    def _heal(self, step: Step) -> None:
        with self._lock:
            fault = self._active.pop(step, None)
            if fault is None:
                return
            try:
                detail = fault.heal(self.ctx) or {}
                self._record("heal", step, fault, detail)
            except Exception as exc:
                self._record("heal", step, fault, {}, error=f"{type(exc).__name__}: {exc}")

    def heal_all(self) -> None:
        for step in sorted(list(self._active), key=lambda s: s.inject_s, reverse=True):
            self._heal(step)

    def finish(self, timeout: float) -> None:
        """Wait for the rest of the schedule (a fault may be timed after the traffic), then heal everything."""
        self.join(timeout)
        if self.is_alive():
            self._halt.set()
            self.join(30)
            self.errors.append(f"fault schedule not done {timeout:.0f}s after the traffic; the rest was skipped")
        self.heal_all()

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(60)
        self.heal_all()

    def _record(self, action: str, step: Step, fault: Fault, detail: dict, error: str | None = None,
                started: float | None = None) -> None:
        row = {"t": time.time(), **({"started": started} if started is not None else {}), "action": action, "kind": fault.kind, "fault": step.fault_index, "n": step.n,
               "scheduled_s": step.inject_s if action == "inject" else step.heal_s, "detail": detail,
               "effect": fault.effect.as_dict()}
        if error:
            row["error"] = error
            self.errors.append(f"{fault.kind} #{step.n} {action}: {error}")
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row, default=str) + "\n")
        self.ctx.timeline.add(f"fault_{action}", kind=fault.kind, fault=step.fault_index, n=step.n,
                              **({"error": error} if error else {}))


def recorded_faults(run_dir: Path) -> list[dict]:
    """One entry per injection: {kind, fault, n, inject_started_at, injected_at (inject returned), healed_at,
    heal_scheduled_s (None: healed at the drain, not on a schedule), detail, effect, errors}; the effect is
    the last one declared (a fault may only know its exact loss when it heals)."""
    out: dict[tuple[int, int], dict] = {}
    for row in read_jsonl(run_dir / "faults.jsonl"):
        key = (row["fault"], row["n"])
        entry = out.setdefault(key, {"kind": row["kind"], "fault": row["fault"], "n": row["n"],
                                     "inject_started_at": None, "injected_at": None, "healed_at": None,
                                     "detail": {}, "errors": []})
        entry[f"{'injected' if row['action'] == 'inject' else 'healed'}_at"] = row["t"]
        if row["action"] == "inject":
            entry["inject_started_at"] = row.get("started", row["t"])
        else:  # healed on its schedule (duration_s, window), or only at the drain (a fault whose act is instant)
            entry["heal_scheduled_s"] = row.get("scheduled_s")
        entry["detail"].update({f"{row['action']}_{k}": v for k, v in row.get("detail", {}).items()})
        entry["effect"] = Effect.from_dict(row.get("effect") or {}).as_dict()
        if row.get("error"):
            entry["errors"].append(f"{row['action']}: {row['error']}")
    return [out[k] for k in sorted(out, key=lambda k: (out[k]["injected_at"] or 0, k))]
