"""The one pipeline every scenario runs through.

backend up -> stream created -> query under test started (first batch done) -> producers on one schedule ->
end offsets taken -> query drains and stops -> everything stopped -> checker -> result.json + report.md.

The run directory is the contract other tools read. Whatever happens (a failure, Ctrl-C, SIGTERM), everything
started is stopped and what was recorded is kept; result.json is written atomically, with the verdict `fail`
and the reason when the run could not finish.
"""
from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness import atomic
from harness.backends.base import Backend
from harness.checker import Check, evaluate, load_acks, percentiles_ms, reconcile
from harness.config import Scenario, load_scenario
from harness.console import Console
from harness.jsonl import read_jsonl
from harness.paths import runs_dir
from harness.sink import read_sink
from harness.spark.process import SparkQueryProcess
from harness.supervisor import Supervisor
from harness.timeline import Timeline
from producers.fleet import ProducerFleet
from producers.rates import make_rate
from reports.lag import LagSampler, lag_series, lag_summary
from reports.report import batch_stats, build_report, rate_accuracy, skew_section


@dataclass
class RunOutcome:
    run_dir: Path
    result: dict
    exit_code: int


def make_backend(scenario: Scenario) -> Backend:
    spec = scenario.backend
    if spec.kind == "kafka":
        if spec.mode == "embedded":
            from harness.backends.kafka.embedded import EmbeddedKafka

            return EmbeddedKafka(nodes=spec.nodes, heap_mb=spec.heap_mb,
                                 broker_config={k: str(v) for k, v in spec.broker.items()})
        if spec.mode == "external":
            from harness.backends.kafka.external import ExternalKafka

            return ExternalKafka(spec.bootstrap_servers or "")
        from harness.backends.kafka.container import ContainerKafka

        return ContainerKafka()
    raise ValueError(f"unsupported backend {spec.kind}")


def new_run_dir(name: str, out: Path | None) -> Path:
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        return out
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")[:-4] + "Z"
    path = runs_dir() / f"{stamp}-{name}"
    path.mkdir(parents=True, exist_ok=False)
    return path


def run(name_or_path: str, overrides: list[str] | None = None, out: Path | None = None,
        console: Console | None = None) -> RunOutcome:
    scenario, path, _ = load_scenario(name_or_path, overrides)  # ConfigError before anything starts
    console = console or Console()
    run_dir = new_run_dir(scenario.name, out)
    atomic.write_json(run_dir / "scenario.json", {"file": str(path), "overrides": overrides or [],
                                                  "resolved": scenario.model_dump(mode="json")})
    console.info(f"run directory: {run_dir}")
    timeline = Timeline(run_dir / "timeline.jsonl")
    run_id = uuid.uuid4().hex
    t0 = time.time()
    state = {"drained": False, "drain_detail": "not reached", "error": None, "interrupted": False,
             "query_exit": None, "backend": {}, "end_offsets": {}}
    fleet: ProducerFleet | None = None
    sampler: LagSampler | None = None
    backend = make_backend(scenario)
    with Supervisor(run_id) as sup:
        try:
            with console.step("starting Kafka" if backend.kind == "kafka" else "starting the backend"):
                backend.start(run_dir, sup)
                backend.create_stream(scenario.stream.name, scenario.stream.partitions,
                                      {k: str(v) for k, v in scenario.stream.config.items()})
            state["backend"] = backend.describe()
            timeline.add("backend_ready", **state["backend"])

            fmt, options = backend.spark_source(scenario.stream.name, scenario.source_options())
            query = SparkQueryProcess(
                run_dir, sup, backend=backend.kind, fmt=fmt, options=options, master=scenario.spark.master,
                conf=scenario.spark_conf(), trigger=scenario.spark.trigger.model_dump(),
                sink=scenario.spark.sink, output_mode=scenario.spark.output_mode,
                driver_memory=scenario.spark.driver_memory)
            with console.step(f"starting the Spark query ({scenario.spark.master})"):
                query.start()
                query.wait_started(scenario.spark.start_timeout_s)
            timeline.add("query_started")

            sampler = LagSampler(run_dir / "lag.jsonl", lambda: backend.end_offsets(scenario.stream.name))
            sampler.start()
            fleet = ProducerFleet(run_dir / "producers", sup, _producer_job(scenario, backend))
            start_at = time.time() + 1.5
            fleet.start(start_at)
            timeline.add("traffic_start", at=start_at)
            duration = scenario.producers.duration_s
            with console.progress("traffic", duration) as bar:
                def tick():
                    if query.child is not None and not query.child.alive():
                        status = query.status()
                        raise RuntimeError(f"the Spark query stopped during traffic (state {status.get('state')!r}"
                                           f"): {str(status.get('error', ''))[:500]}")
                    live = fleet.live()
                    bar.update(min(duration, max(0.0, time.time() - start_at)),
                               f"sent {live['sent']:,}  acked {live['acked']:,}  failed {live['failed']:,}  "
                               f"batches {_count_lines(run_dir / 'progress.jsonl')}")
                fleet.wait(duration + 120.0, tick)
            timeline.add("traffic_end")
            if fleet.failures():
                raise RuntimeError("; ".join(fleet.failures()))

            ends = backend.end_offsets(scenario.stream.name)
            state["end_offsets"] = ends
            with console.step("draining the query"):
                query.drain({scenario.stream.name: {str(p): o for p, o in ends.items()}},
                            scenario.spark.drain_timeout_s)
                code = query.wait_exit(scenario.spark.drain_timeout_s + 60)
            state["query_exit"] = code
            status = query.status()
            state["drained"] = code == 0 and status.get("state") == "drained"
            state["drain_detail"] = (f"query reached end offsets {ends}" if state["drained"] else
                                     f"query state {status.get('state')!r}, exit {code}: "
                                     f"{str(status.get('error', ''))[:500]}")
            timeline.add("query_stopped", state=status.get("state"), exit=code)
        except KeyboardInterrupt:
            state["interrupted"] = True
            state["error"] = "interrupted (Ctrl-C / SIGTERM): processes stopped, partial results kept"
            timeline.add("interrupted")
            console.warn(state["error"])
        except Exception as exc:  # a failed run still gets its result.json with the reason
            state["error"] = f"{type(exc).__name__}: {exc}"
            timeline.add("error", error=state["error"])
            console.warn(state["error"])
        finally:
            if sampler is not None:
                sampler.stop()
            with console.step("stopping everything"):
                sup.stop_all()
                backend.stop()
    result = _evaluate(scenario, run_dir, fleet, state, time.time() - t0)
    atomic.write_json(run_dir / "result.json", result)
    atomic.write_text(run_dir / "report.md", build_report(result, run_dir))
    console.summary(result, run_dir)
    code = 130 if state["interrupted"] else (0 if result["verdict"] == "pass" else 1)
    return RunOutcome(run_dir, result, code)


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def _producer_job(scenario: Scenario, backend: Backend) -> dict:
    p = scenario.producers
    settings = backend.producer_settings()
    settings.update(p.client)
    return {
        "backend": backend.kind, "stream": scenario.stream.name, "partitions": scenario.stream.partitions,
        "settings": settings, "processes": p.processes, "users": p.users, "batch_size": p.batch_size,
        "duration_s": p.duration_s, "max_backlog_s": p.max_backlog_s, "seed": scenario.seed,
        "rate": p.rate.model_dump(mode="json"), "keys": p.keys.model_dump(mode="json"),
        "payload": p.payload.model_dump(mode="json"),
    }


def _evaluate(scenario: Scenario, run_dir: Path, fleet: ProducerFleet | None, state: dict,
              elapsed: float) -> dict:
    acks = load_acks(run_dir / "producers")
    sink = read_sink(run_dir / "sink")
    rec = reconcile(acks, sink)
    latency = percentiles_ms(rec.latency_ms)
    rate = make_rate(scenario.producers.rate)
    target = rate.cumulative(scenario.producers.duration_s)  # events scheduled
    checks = evaluate(rec, scenario.checks, target_events=target, latency=latency,
                      drained=state["drained"], drain_detail=state["drain_detail"])
    if state["error"]:
        checks.insert(0, Check("completed", False, state["error"]))
    progress = read_jsonl(run_dir / "progress.jsonl")
    producers = fleet.merged_summary() if fleet else {}
    accuracy = {}
    if fleet:
        per_second = fleet.per_second()
        accuracy = rate_accuracy(per_second, rate, fleet.job.get("start_at", 0.0), scenario.producers.duration_s,
                                 rec.produced)
        atomic.write_json(run_dir / "producers" / "per_second.json", per_second)
        checks.append(Check("producers_reported", producers["reported"] == producers["processes"]
                            and producers["sent"] == rec.produced,
                            f"{producers['reported']}/{producers['processes']} producer summaries; "
                            f"{producers['sent']} sent vs {rec.produced} rows in the ack logs"))
    duration = scenario.producers.duration_s
    batches = batch_stats(progress)
    lag = lag_summary(lag_series(read_jsonl(run_dir / "lag.jsonl"), progress))
    verdict = "pass" if all(c.ok for c in checks) else "fail"
    return {
        "scenario": scenario.name, "backend": scenario.backend.kind, "verdict": verdict,
        "checks": [c.as_dict() for c in checks],
        "counts": rec.counts(),
        "throughput": {"produce_eps": rec.acked / duration if duration else 0.0,
                       "process_rps": batches["process_rps"], "target_eps": target / duration if duration else 0.0},
        "latency_ms": latency,
        "publish_delay_ms": percentiles_ms(rec.publish_delay_ms),
        "batches": batches["count"], "batch_stats": batches, "lag_events": lag,
        "duration_s": round(elapsed, 3),
        "traffic_s": duration,
        "producers": {**producers, **skew_section(producers), **accuracy},
        "backend_info": state["backend"], "end_offsets": {str(k): v for k, v in state["end_offsets"].items()},
        "query_exit": state["query_exit"], "run_dir": str(run_dir),
        "versions": _versions(),
    }


def _versions() -> dict:
    import pyspark

    return {"pyspark": pyspark.__version__, "python": sys.version.split()[0]}
