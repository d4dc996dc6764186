"""Other work on the machine, on purpose: `harness bench verdicts --busy-cores K` keeps K cores busy while a run
runs, to see whether the run's verdict holds when the machine is not quiet.

The load is one child of the bench's own Supervisor (`python -m harness.bench.busy K`), never of the run's: the run
sees it as it would see a colleague's build, another process on the machine. The child starts K spinners, each a
CPU-bound loop in a process of its own (threads would share one core under the GIL), through a Supervisor of its
own, so a spinner dies with the child (PR_SET_PDEATHSIG) even when the child is killed with SIGKILL. The child
prints one JSON line when its spinners run ({"ready": K}) and, stopped with SIGTERM, one more: the CPU seconds
its spinners spent and over how long, which shows the load was there (a spinner the machine starved shows as
less than K cores).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path

from harness.supervisor import Child, Supervisor, log_lines, wait_until

SPIN = "while True:\n    pass\n"  # a spinner's whole program: no import, nothing but CPU
READY_TIMEOUT_S = 30.0


def serve(cores: int) -> None:
    """The child: K spinners until SIGTERM (or SIGHUP), then their CPU seconds on stdout."""
    started = time.monotonic()
    try:
        with Supervisor(uuid.uuid4().hex) as sup:
            for i in range(cores):
                sup.spawn(f"spinner-{i}", [sys.executable, "-c", SPIN])
            print(json.dumps({"ready": cores}), flush=True)
            while True:
                signal.pause()
    except KeyboardInterrupt:  # SIGTERM/SIGHUP as StoppedBySignal: the Supervisor stopped and reaped the spinners
        pass
    times = os.times()  # reaped children's CPU, all spinners'
    print(json.dumps({"cores": cores, "cpu_s": round(times.children_user + times.children_system, 2),
                      "wall_s": round(time.monotonic() - started, 2)}), flush=True)


def _json_lines(path: Path) -> list[dict]:
    out = []
    for line in log_lines(path):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


class BusyCores:
    """`with BusyCores(sup, k, log):` K cores busy from entry (the spinners running) to exit (stopped, whatever
    ended the block: Ctrl-C included). After exit, `report` is the child's last line: {"cores", "cpu_s", "wall_s"},
    or {} when it said nothing (killed)."""

    def __init__(self, sup: Supervisor, cores: int, log_path: Path):
        self.sup, self.cores, self.log_path = sup, cores, log_path
        self.child: Child | None = None
        self.report: dict = {}

    def __enter__(self) -> "BusyCores":
        self.child = self.sup.spawn(f"busy-{self.cores}", [sys.executable, "-m", "harness.bench.busy",
                                                           str(self.cores)], log_path=self.log_path)
        child = self.child
        try:
            wait_until(lambda: any("ready" in line for line in _json_lines(self.log_path)), READY_TIMEOUT_S,
                       gone=lambda: None if child.alive() else RuntimeError(
                           f"the busy-core process exited with {child.proc.returncode} before its spinners ran "
                           f"(see {self.log_path})"),
                       what=f"{self.cores} busy cores (see {self.log_path})")
        except BaseException:
            self.sup.stop(child)
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.child is not None:
            self.sup.stop(self.child, timeout=15)
            self.report = next((line for line in reversed(_json_lines(self.log_path)) if "cpu_s" in line), {})


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit() or int(argv[0]) < 1:
        print("usage: python -m harness.bench.busy CORES (a whole number, at least 1)", file=sys.stderr)
        return 2
    serve(int(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
