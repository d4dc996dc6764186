"""`harness kafka up|down|status`: an embedded broker that outlives the command, for manual work.

`up` starts this module as a detached process that owns the broker JVM(s) under its own Supervisor and writes
`state.json` (bootstrap address, its pid); `down` sends it SIGTERM, and it stops the broker before exiting.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from harness import atomic
from harness.backends.kafka.embedded import EmbeddedKafka
from harness.paths import runs_dir
from harness.supervisor import Supervisor


def home() -> Path:
    return runs_dir() / "standalone-kafka"


def _state() -> dict | None:
    try:
        state = json.loads((home() / "state.json").read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(state["pid"], 0)
    except OSError:
        return None
    return state


def up(nodes: int = 1, timeout: float = 120.0) -> dict:
    state = _state()
    if state:
        return state
    home().mkdir(parents=True, exist_ok=True)
    (home() / "state.json").unlink(missing_ok=True)
    with open(home() / "standalone.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "harness.backends.kafka.standalone", str(nodes)],
                                stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _state()
        if state:
            return state
        if proc.poll() is not None:
            raise RuntimeError(f"the standalone broker exited ({proc.returncode}); see {home() / 'standalone.log'}")
        time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)
    raise TimeoutError(f"the standalone broker did not come up in {timeout:.0f}s; see {home() / 'standalone.log'}")


def down(timeout: float = 60.0) -> bool:
    state = _state()
    if not state:
        return False
    os.kill(state["pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(state["pid"], 0)
        except OSError:
            break
        time.sleep(0.2)
    else:
        os.killpg(state["pid"], signal.SIGKILL)
    (home() / "state.json").unlink(missing_ok=True)
    return True


def status() -> dict | None:
    return _state()


def _serve(nodes: int) -> int:
    """SIGTERM/SIGINT arrive as KeyboardInterrupt (Supervisor), which stops the broker on the way out."""
    try:
        with Supervisor(f"standalone-{uuid.uuid4().hex}") as sup:
            kafka = EmbeddedKafka(nodes=nodes)
            kafka.start(home(), sup)
            atomic.write_json(home() / "state.json", {"pid": os.getpid(), "bootstrap": kafka.bootstrap,
                                                     "nodes": nodes, "started_at": time.time(),
                                                     "logs": str(home() / "services")})
            while all(n.child and n.child.alive() for n in kafka.nodes):
                time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        (home() / "state.json").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(_serve(int(sys.argv[1])))
