"""One embedded Kafka broker for every run of a sweep or a capacity search, when the runs allow it.

Why: every run otherwise formats and starts a broker (3 s alone, 5-8 s beside the Spark driver on two cores)
that measures nothing, and a sweep pays it for every point. The runs stay independent: a fresh topic (the last
run's deleted with its records first), a fresh driver, checkpoint and sink per run, each run directory as
self-contained as ever (`harness check <dir>` judges from its files alone), and each result.json records the
broker it used (`backend_info.shared`: its cluster id, when it started, the run's number on it).

When each run still starts its own broker (`reason_not_shared` says why, and the sweep prints it):
- the backend is not the embedded Kafka (Event Hubs, an external cluster, a container);
- the `[backend]` table differs between the runs (a swept broker setting, node count or heap: the broker itself
  is what is compared);
- any run has faults: a fault may kill, restart, proxy or reconfigure the broker, and what it leaves behind
  would carry into the next run;
- `backend.proxy` or `backend.sasl`: the proxied listener, users and ACLs are set up per run;
- HARNESS_SHARED_BROKER=0 in the environment (what `harness bench startup` compares against).
"""
from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from harness.backends.base import Backend
from harness.backends.kafka.shared import SharedKafka
from harness.config import Scenario
from harness.console import Console
from harness.files.paths import switched_off
from harness.supervisor import Supervisor

SHARED_ENV = "HARNESS_SHARED_BROKER"  # "0": every run starts its own broker


def reason_not_shared(scenarios: list[Scenario], environ=None) -> str | None:
    """None when every one of `scenarios` (the runs to make) can use one broker; else why not, in words."""
    if switched_off(SHARED_ENV, environ):
        return f"{SHARED_ENV}=0 in the environment"
    if not scenarios:
        return "no runs"
    first = scenarios[0].backend
    if first.kind != "kafka" or getattr(first, "mode", None) != "embedded":
        return (f"backend {first.kind}" + (f" mode {first.mode}" if getattr(first, "mode", None) else "")
                + ": only the embedded Kafka broker is shared")
    tables = [s.backend.model_dump(mode="json") for s in scenarios]
    differ = sorted({k for t in tables for k in t if t.get(k) != tables[0].get(k)})
    if differ:
        return f"the [backend] settings differ between the runs ({', '.join('backend.' + k for k in differ)})"
    faults = sorted({f.kind for s in scenarios for f in s.faults})
    if faults:
        return (f"the runs have faults ({', '.join(faults)}): a fault may stop, restart, proxy or reconfigure the "
                "broker")
    if first.proxy:
        return "backend.proxy: the proxied listener is set up per run"
    if first.sasl:
        return "backend.sasl: the users and ACLs are set up per run"
    return None


@contextmanager
def shared_broker(scenarios: list[Scenario], out_dir: Path, console: Console,
                  what: str) -> Iterator[Callable[[], Backend] | None]:
    """A function giving each run its view of one broker started now (harness.backends.kafka.shared), or None
    when the runs must each start their own (said on the console, with the reason). The broker lives in
    `out_dir/shared-broker/` and stops when the block ends, also on an error or Ctrl-C."""
    why = reason_not_shared(scenarios)
    if why is not None:
        console.info(f"each run starts its own broker: {why}")
        yield None
        return
    with Supervisor(f"shared-broker-{uuid.uuid4().hex}") as sup:
        broker = scenarios[0].backend.build(scenarios[0].stream)
        home = out_dir / "shared-broker"
        try:
            with console.step(f"starting Kafka once for every run of the {what} (a fresh topic per run)"):
                started = time.time()
                broker.start(home, sup)
            identity = {"by": what, "cluster_id": broker.cluster_id, "started_at": round(started, 3),
                        "start_s": round(time.time() - started, 3), "logs": str(home / "services" / "kafka")}
            runs = [0]

            def backend_for_a_run() -> Backend:
                runs[0] += 1
                return SharedKafka(broker, sup.run_id, {**identity, "run_on_it": runs[0]})

            yield backend_for_a_run
        finally:
            broker.stop()
