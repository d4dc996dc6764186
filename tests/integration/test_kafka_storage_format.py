"""A node's storage formatted from the storage tool's kept output is what the tool itself writes, and a cluster
starts on it (harness.backends.kafka.storage)."""
from __future__ import annotations

import base64
import uuid

import pytest
from confluent_kafka import Consumer, Producer

import harness.backends.kafka.storage as storage
from harness.config import load_scenario
from harness.emulator.kafka.records import decode_batches
from harness.supervisor import Supervisor

pytestmark = pytest.mark.integration


def properties(path) -> dict[str, str]:
    """Java Properties as the broker reads them (comments and blank lines skipped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))


def records(path) -> list:
    """A snapshot file's batches as what they say: offsets, control or not, every record's key, value, headers."""
    return [(b.base_offset, b.is_control, [(r.key, r.value, r.headers) for r in b.records])
            for b in decode_batches(path.read_bytes())]


def cluster():
    scenario, _, _ = load_scenario("steady")
    return scenario.backend.build(scenario.stream)


def test_the_template_writes_what_the_tool_writes_and_a_cluster_starts_on_it(tmp_path, monkeypatch):
    monkeypatch.setattr(storage, "cache_dir", lambda: tmp_path / "cache")
    # first: the tool formats the node (nothing kept yet), and its output is kept
    with Supervisor(uuid.uuid4().hex) as sup:
        tool = cluster()
        tool.start(tmp_path / "tool", sup)
        tool.stop()
    kept = list((tmp_path / "cache" / "kafka-format").glob(f"*/{storage.BOOTSTRAP}"))
    assert len(kept) == 1 and kept[0].stat().st_size > 0
    # then: a cluster formatted from it, serving a record end to end
    with Supervisor(uuid.uuid4().hex) as sup:
        reused = cluster()
        reused.start(tmp_path / "reused", sup)
        reused.create_stream("formatted", 2, {})
        producer = Producer(reused.producer_settings())
        producer.produce("formatted", b"v", partition=1)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": reused.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["formatted"])
        got = None
        for _ in range(60):
            got = consumer.poll(1.0)
            if got is not None and got.error() is None:
                break
        consumer.close()
        reused.stop()
    assert got is not None and got.value() == b"v"
    by_tool = tmp_path / "tool" / "services" / "kafka" / "node-1" / "data"
    theirs = properties(by_tool / storage.META)
    assert theirs["cluster.id"] == tool.cluster_id and theirs["node.id"] == "1"
    by_template = tmp_path / "reused" / "services" / "kafka" / "node-1" / "data"
    # the tool's bootstrap records (decoded, CRCs checked), the same but for the time they were written
    assert records(by_template / storage.BOOTSTRAP) == records(by_tool / storage.BOOTSTRAP)
    mine = properties(by_template / storage.META)
    assert set(mine) == set(theirs) == {"version", "cluster.id", "node.id", "directory.id"}
    assert (mine["version"], mine["node.id"], mine["cluster.id"]) == ("1", "1", reused.cluster_id)
    assert mine["directory.id"] != theirs["directory.id"] and not mine["directory.id"].startswith("-")
    assert len(base64.urlsafe_b64decode(mine["directory.id"] + "==")) == 16


def test_settings_that_move_the_directories_always_get_the_tool():
    assert storage.template_dir("a.jar", {"log.dirs": "/elsewhere"}) is None
    assert storage.template_dir("a.jar", {"metadata.log.dir": "/elsewhere"}) is None
    one, other = storage.template_dir("a.jar", {}), storage.template_dir("a.jar", {"num.io.threads": "4"})
    assert one is not None and other is not None and one != other  # kept per broker settings
    assert storage.template_dir("kafka_2.13-4.1.1.jar", {}) != storage.template_dir("kafka_2.13-4.2.0.jar", {})
