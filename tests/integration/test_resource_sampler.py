"""The resource sampler against real processes of a run: an embedded Kafka broker (a JVM) and a producer fleet
(locust + confluent-kafka processes), all under one Supervisor, sampled while the traffic runs."""
import statistics
import time
import uuid

import pytest

from harness.backends.kafka.embedded import EmbeddedKafka
from harness.files.jsonl import read_jsonl
from harness.samplers.resources import ResourceSampler
from harness.supervisor import Supervisor
from harness.producers.fleet import ProducerFleet
from harness.reports.resources import resources_markdown
from harness.analysis.resources import summarize
from harness.backends.kafka.spec import KafkaSpec

KAFKA_SENDER = KafkaSpec.model_construct().sender  # the runner writes the backend's sender into the job

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # make test keeps its budget: the steady run's report and the soak test see the sampler's broker too


def test_the_sampler_sees_the_broker_and_the_producers_with_their_roles(tmp_path):
    run_id = f"res-{uuid.uuid4().hex}"
    with Supervisor(run_id) as sup:
        sampler = ResourceSampler(tmp_path / "resources.jsonl", run_id, tmp_path, interval_s=0.5)
        sampler.start()
        broker = EmbeddedKafka(nodes=1, heap_mb=384)
        try:
            broker.start(tmp_path, sup)
            broker.create_stream("events", 3, {})
            broker_pid = broker.nodes[0].child.pid
            job = {"backend": "kafka", "sender": KAFKA_SENDER, "stream": "events", "partitions": 3,
                   "settings": broker.producer_settings(),
                   "processes": 2, "users": 2, "batch_size": 100, "duration_s": 6.0, "max_backlog_s": 10.0,
                   "seed": 3, "rate": {"kind": "constant", "eps": 2000}, "keys": {"kind": "uniform", "count": 50},
                   "payload": {"size": {"kind": "fixed", "bytes": 256}}}
            fleet = ProducerFleet(tmp_path / "producers", sup, job)
            fleet.start(time.time() + 1.0)
            fleet.wait(60)
            assert not fleet.failures(), fleet.failures()
            time.sleep(1.0)  # a sample after the producers exited
        finally:
            sampler.stop()
            broker.stop()
    assert sampler.errors == []
    samples = read_jsonl(tmp_path / "resources.jsonl")
    assert len(samples) >= 10
    procs = {(r["pid"], r["create_time"]): r for s in samples for r in s["procs"]}
    roles = {}
    for (pid, _), r in procs.items():
        roles.setdefault(r["role"], set()).add(pid)
    assert roles["broker"] == {broker_pid}
    assert roles["producer"] == {c.pid for c in fleet.children}
    assert len(roles["runner"]) == 1
    assert set(roles) <= {"broker", "producer", "runner", "other"}, roles
    s = summarize(samples, after_s=0, min_span_s=3)
    b, p = s["roles"]["broker"], s["roles"]["producer"]
    assert b["rss_peak_process_bytes"] > 50_000_000  # a JVM with its 384 MB heap in use
    assert b["threads_max"] > 30 and b["fds_max"] > 20  # Kafka's request handlers, log segments, sockets
    assert 20_000_000 < p["rss_peak_process_bytes"] < 1_000_000_000 and p["processes"] == 2
    assert b["cpu_s"] > 1.0 and p["cpu_s"] > 0.5 and p["cores_peak"] > 0.05
    # the broker's log directory and the producers' ack logs are on disk, in their top-level directories
    assert s["disk"]["by_dir_peak"]["services"] > 100_000 and s["disk"]["by_dir_peak"]["producers"] > 10_000
    # what sampling 4-5 processes costs, on a machine also running a broker and producers
    assert statistics.median(x["cost_ms"] for x in samples) < 50
    text = "\n".join(resources_markdown(s))
    assert "| broker | 1 |" in text and "| producer | 2 |" in text
    print(f"\nsample cost ms: median {statistics.median(x['cost_ms'] for x in samples):.2f}, "
          f"max {max(x['cost_ms'] for x in samples):.2f}; broker RSS {b['rss_peak_bytes'] / 1e6:.0f} MB, "
          f"{b['cores_mean']:.2f} cores; producers RSS {p['rss_peak_bytes'] / 1e6:.0f} MB, {p['cores_mean']:.2f} "
          f"cores")
