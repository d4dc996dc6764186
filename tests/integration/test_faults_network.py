"""The network fault against the real broker: real clients through the proxy (client ids, advertised listener,
reset and blackhole as a consumer lives them), and the `network` scenario end to end."""
import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from harness.backends.kafka.embedded import EmbeddedKafka, free_port
from harness.netproxy import role, start_proxy
from harness.supervisor import Supervisor

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """One broker with a QUERY listener advertised at a proxy in front of it, as the network fault sets it up."""
    out = tmp_path_factory.mktemp("proxied-kafka")
    with Supervisor(f"tests-netproxy-{uuid.uuid4().hex}") as sup:
        port = free_port()
        proxy = start_proxy(sup, out / "proxy", [f"127.0.0.1:{port}"])
        broker = EmbeddedKafka(nodes=1, heap_mb=384)
        broker.add_listener("QUERY", [(port, proxy.listen[0])])
        broker.start(out, sup)
        try:
            yield broker, proxy
        finally:
            broker.stop()


def produce(broker, topic, n, tag):
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=f"{tag}-{i}".encode() + b"x" * 200, key=str(i).encode())
    assert p.flush(30) == 0


def consume(consumer, n, timeout):
    got, deadline = [], time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    return got


def probe(proxy, client_id, **extra):
    return Consumer({"bootstrap.servers": proxy.listen[0], "client.id": client_id, "group.id": client_id,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})


def test_a_real_client_is_counted_by_its_client_id_and_stays_behind_the_proxy(proxied):
    broker, proxy = proxied
    topic, client_id = f"np-{uuid.uuid4().hex[:8]}", f"probe-{uuid.uuid4().hex[:8]}"
    broker.create_stream(topic, 2, {})
    produce(broker, topic, 300, "a")
    before = proxy.call("stats")["stats"]
    consumer = probe(proxy, client_id)
    try:
        md = consumer.list_topics(topic, timeout=20)
        # the client's own view: the broker it talks to is the proxy, not the direct listener
        assert [f"{b.host}:{b.port}" for b in md.brokers.values()] == proxy.listen
        consumer.subscribe([topic])
        assert len(consume(consumer, 300, 60)) == 300
    finally:
        consumer.close()
    after = proxy.call("stats")["stats"]
    # bootstrap connection + the connection to broker 1 at its advertised (proxied) address
    assert after["by_client"].get(client_id, 0) >= 2
    assert after["bytes"]["down"] - before["bytes"]["down"] >= 300 * 200  # the records came through the proxy
    rows = [json.loads(line) for line in (proxy.out_dir / "connections.jsonl").read_text().splitlines()]
    mine = [r for r in rows if r["client_id"] == client_id]
    assert len(mine) == after["by_client"][client_id]
    assert all(r["api_key"] == 18 and r["role"] == "other" for r in mine)  # ApiVersions opens every connection
    assert role(client_id) == "other"


def test_a_real_consumer_rides_out_a_reset_and_a_blackhole(proxied):
    broker, proxy = proxied
    topic, client_id = f"np-{uuid.uuid4().hex[:8]}", f"probe-{uuid.uuid4().hex[:8]}"
    broker.create_stream(topic, 1, {})
    consumer = probe(proxy, client_id, **{"reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500})
    try:
        consumer.subscribe([topic])
        produce(broker, topic, 100, "before")
        assert len(consume(consumer, 100, 60)) == 100
        connections = proxy.call("stats")["stats"]["by_client"][client_id]
        reply = proxy.call("reset")
        assert reply["reset_clients"].get(client_id, 0) >= 1
        produce(broker, topic, 100, "after-reset")
        got = consume(consumer, 100, 60)
        assert len(got) == 100 and all(v.startswith(b"after-reset") for v in got)
        assert proxy.call("stats")["stats"]["by_client"][client_id] > connections  # it reconnected

        proxy.call("set", id="bh", blackhole=True)
        produce(broker, topic, 50, "in-blackhole")  # the producer writes directly: unaffected
        assert consume(consumer, 50, 3) == []
        proxy.call("clear", id="bh")
        got = consume(consumer, 50, 60)
        assert len(got) == 50 and all(v.startswith(b"in-blackhole") for v in got)
    finally:
        proxy.call("clear", id="bh")
        consumer.close()


@pytest.mark.slow  # `make test-slow`: keeps `make test` within its time budget
def test_network_scenario_passes_and_counts_reconnections(harness_env, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "network", "--out", str(out),
                           "--set", "producers.duration_s=20"], env=harness_env, capture_output=True, text=True,
                          timeout=900)
    result = json.loads((out / "result.json").read_text())
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    c = result["counts"]
    assert c["lost"] == 0 and c["duplicates"] == 0 and c["delivered_unique"] == c["acked"] > 0
    assert {ch["name"]: ch["ok"] for ch in result["checks"]}["drained"]
    faults = result["faults"]
    assert [f["detail"]["inject_mode"] for f in faults] == ["latency", "bandwidth", "blackhole", "reset", "reset"]
    assert all(f["kind"] == "network" and f["injected_at"] and f["healed_at"] and not f["errors"] for f in faults)
    assert all(not f["effect"]["loss"] and not f["effect"]["failure"] for f in faults)

    stats = json.loads((out / "services" / "proxy" / "stats.json").read_text())
    assert stats["bytes"]["down"] >= c["delivered_unique"] * 256  # the executors read every record through it
    blackhole = faults[2]["detail"]["heal_since_inject"]
    assert blackhole["bytes"] == {"up": 0, "down": 0}
    bandwidth = faults[1]
    capped_s = bandwidth["healed_at"] - bandwidth["injected_at"]
    assert bandwidth["detail"]["heal_since_inject"]["bytes"]["down"] <= 262144 * capped_s * 1.1 + 65536

    # every client a reset cut came back: a later connection with the same client id (connections.jsonl). The
    # driver's admin client is connected from the query's start, so a reset always cuts it; the executors'
    # consumers are cut too unless the machine is so starved that the first batch has not read by 17 s.
    rows = [json.loads(line) for line in (out / "services" / "proxy" / "connections.jsonl").read_text().splitlines()]
    cut = {(cid, f["injected_at"]) for f in faults[3:] for cid in f["detail"]["inject_reset_clients"] if cid}
    assert {role(cid) for cid, _ in cut} >= {"driver"}
    for cid, at in cut:
        assert any(r["client_id"] == cid and r["t"] > at and not r.get("refused") for r in rows), cid
    executors = {r["client_id"] for r in rows if r["role"] == "executor"}
    assert executors and all(cid.startswith("consumer-spark-kafka-source-") for cid in executors)
    assert faults[3]["detail"]["inject_reset_connections"] >= 1

    proxy_pid = json.loads((out / "run_state.json").read_text())["netproxy"]["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(proxy_pid, 0)  # the proxy ended with the run


@pytest.mark.slow
def test_network_scenario_on_three_brokers_proxies_each_of_them(harness_env, tmp_path):
    """One proxy port per broker: the executors reach every partition leader through its own proxied address."""
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "network", "--out", str(out),
                           "--set", "backend.nodes=3"], env=harness_env, capture_output=True, text=True,
                          timeout=1800)
    result = json.loads((out / "result.json").read_text())
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    assert result["counts"]["lost"] == 0 and result["counts"]["duplicates"] == 0
    ready = json.loads((out / "services" / "proxy" / "ready.json").read_text())
    assert len(ready["listen"]) == 3 and result["backend_info"]["query_bootstrap"] == ",".join(ready["listen"])
    rows = [json.loads(line) for line in (out / "services" / "proxy" / "connections.jsonl").read_text().splitlines()]
    assert {r["broker"] for r in rows if r["role"] == "executor" and not r.get("refused")} == {0, 1, 2}
