"""SAS validation, the async SDK clients, and EventHubConsumerClient load balancing."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient
from azure.eventhub.aio import EventHubConsumerClient as AsyncConsumer
from azure.eventhub.aio import EventHubProducerClient as AsyncProducer
from azure.eventhub.exceptions import AuthenticationError

from emulator_helpers import FAST, producer, wait_for

from harness.partitioning import eventhubs_partition_for_key
from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig


@pytest.fixture(scope="module")
def sas_emulator():
    cfg = EmulatorConfig(hubs=(HubConfig("secure", 2),), sas_keys={"app": "c2VjcmV0LWtleQ=="})
    with EmulatorServer(cfg) as server:
        yield server


def test_sas_good_key_accepted(sas_emulator):
    cs = sas_emulator.connection_string("secure", key_name="app", key="c2VjcmV0LWtleQ==")
    with EventHubProducerClient.from_connection_string(cs, **FAST) as p:
        assert p.get_partition_ids() == ["0", "1"]
        p.send_batch([EventData("signed")], partition_id="0")
        assert p.get_partition_properties("0")["last_enqueued_sequence_number"] == 0


@pytest.mark.parametrize("key_name,key", [("app", "d3Jvbmcta2V5"), ("nobody", "c2VjcmV0LWtleQ==")])
def test_sas_bad_key_is_authentication_error(sas_emulator, key_name, key):
    cs = sas_emulator.connection_string("secure", key_name=key_name, key=key)
    with EventHubProducerClient.from_connection_string(cs, retry_total=0) as p:
        with pytest.raises(AuthenticationError):
            p.get_eventhub_properties()
        with pytest.raises(AuthenticationError):
            p.send_batch([EventData("forged")], partition_id="0")
    assert sas_emulator.snapshot()["hubs"]["secure"]["partitions"]["0"]["retained_events"] <= 1


def test_wrong_key_refused_by_default(emu):
    """No keys configured: Microsoft's emulator's well-known key, and a token signed with another is refused, as
    on Azure."""
    name, key = emu.sas_key
    assert (name, key) == ("RootManageSharedAccessKey", "SAS_KEY_VALUE")
    for key_name, wrong in ((name, "d3Jvbmcta2V5"), ("anything", key), (name, "sas_key_value")):
        with EventHubProducerClient.from_connection_string(
                emu.connection_string("eh1", key_name=key_name, key=wrong), retry_total=0) as p:
            with pytest.raises(AuthenticationError):
                p.get_eventhub_properties()
    with EventHubProducerClient.from_connection_string(emu.connection_string("eh1"), **FAST) as p:
        assert p.get_eventhub_properties()["eventhub_name"] == "eh1"


def test_any_credential_only_when_asked():
    cfg = EmulatorConfig(hubs=(HubConfig("open", 1),), accept_any_credential=True)
    with EmulatorServer(cfg, tls_port=None, ws_port=None, wss_port=None) as server:
        cs = server.connection_string("open", key_name="anything", key="whatever")
        with EventHubProducerClient.from_connection_string(cs, **FAST) as p:
            assert p.get_eventhub_properties()["eventhub_name"] == "open"
            p.send_batch([EventData("unsigned")], partition_id="0")
        assert server.snapshot()["hubs"]["open"]["partitions"]["0"]["retained_events"] == 1


def test_async_producer_and_consumer(emu):
    hub = "asynchub"

    async def main():
        async with AsyncProducer.from_connection_string(emu.connection_string(hub), **FAST) as p:
            props = await p.get_eventhub_properties()
            assert props["partition_ids"] == ["0", "1"]
            batch = await p.create_batch(partition_key="async-key")
            for i in range(5):
                batch.add(EventData(f"a{i}"))
            await p.send_batch(batch)
            await p.send_event(EventData("solo"), partition_id="1")
            info = {pid: await p.get_partition_properties(pid) for pid in props["partition_ids"]}
        total = sum(i["last_enqueued_sequence_number"] + 1 for i in info.values())
        assert total == 6
        got = []
        done = asyncio.Event()

        async def on_event(ctx, ev):
            got.append((ctx.partition_id, ev.body_as_str()))
            if len(got) >= 6:
                done.set()

        # the async processor only notices close() after its load-balancing sleep: keep that short
        c = AsyncConsumer.from_connection_string(emu.connection_string(hub), consumer_group="cg1",
                                                 load_balancing_interval=0.5, **FAST)
        async with c:
            task = asyncio.ensure_future(c.receive(on_event, starting_position="-1"))
            await asyncio.wait_for(done.wait(), 30)
        await asyncio.wait_for(task, 10)
        return got

    got = asyncio.run(main())
    assert sorted(b for _, b in got) == ["a0", "a1", "a2", "a3", "a4", "solo"]
    by_partition = {}
    for pid, body in got:
        by_partition.setdefault(pid, []).append(body)
    keyed = str(eventhubs_partition_for_key("async-key", 2))
    assert [b for b in by_partition[keyed] if b != "solo"] == ["a0", "a1", "a2", "a3", "a4"]
    assert "solo" in by_partition["1"]


def test_consumer_client_load_balancing_shares_partitions(emu):
    hub = "lb"
    with producer(emu, hub) as p:
        for pid in ("0", "1", "2", "3"):
            p.send_batch([EventData(f"p{pid}-{i}") for i in range(3)], partition_id=pid)
    received = {"a": [], "b": []}
    clients = {}
    threads = []
    for name in ("a", "b"):
        c = EventHubConsumerClient.from_connection_string(
            emu.connection_string(hub), consumer_group="$Default", load_balancing_interval=0.5,
            partition_ownership_expiration_interval=3, **FAST)
        clients[name] = c

        def on_event(ctx, ev, name=name):
            received[name].append((ctx.partition_id, ev.body_as_str()))

        t = threading.Thread(target=c.receive, kwargs=dict(on_event=on_event, starting_position="-1"), daemon=True)
        t.start()
        threads.append(t)
    # without a checkpoint store each client claims every partition (in-memory store per client)
    assert wait_for(lambda: len(received["a"]) >= 12 and len(received["b"]) >= 12, 30)
    for c in clients.values():
        c.close()
    for t in threads:
        t.join(10)
    for name in ("a", "b"):
        assert sorted(received[name]) == sorted((pid, f"p{pid}-{i}") for pid in "0123" for i in range(3))


def test_shared_checkpoint_store_balances_partitions_with_epochs(emu):
    """Two clients sharing the SDK's in-memory store split 4 partitions 2/2 (owner_level 0 receivers)."""
    from azure.eventhub._eventprocessor.in_memory_checkpoint_store import InMemoryCheckpointStore

    hub = "lb2"
    with producer(emu, hub) as p:
        for pid in ("0", "1", "2", "3"):
            p.send_batch([EventData(f"p{pid}-{i}") for i in range(3)], partition_id=pid)
    store = InMemoryCheckpointStore()
    received = {"a": set(), "b": set()}
    errors = []
    clients, threads = {}, []
    for name in ("a", "b"):
        c = EventHubConsumerClient.from_connection_string(
            emu.connection_string(hub), consumer_group="cg1", checkpoint_store=store,
            load_balancing_interval=0.5, partition_ownership_expiration_interval=5, **FAST)
        clients[name] = c

        def on_event(ctx, ev, name=name):
            received[name].add((ctx.partition_id, ev.body_as_str()))
            ctx.update_checkpoint(ev)

        t = threading.Thread(target=c.receive, kwargs=dict(
            on_event=on_event, starting_position="-1", on_error=lambda ctx, err: errors.append(err)), daemon=True)
        t.start()
        threads.append(t)
        time.sleep(1.0)

    def split_evenly():
        namespace = f"127.0.0.1:{emu.port}"
        owned = {}
        for row in store.list_ownership(namespace, hub, "cg1"):
            if time.time() - row["last_modified_time"] < 5:
                owned.setdefault(row["owner_id"], []).append(row["partition_id"])
        return sorted(len(v) for v in owned.values()) == [2, 2]

    everything = {(pid, f"p{pid}-{i}") for pid in "0123" for i in range(3)}
    assert wait_for(lambda: received["a"] | received["b"] >= everything, 30)
    balanced = wait_for(split_evenly, 20)
    time.sleep(1.0)  # let the stealing client's receivers attach
    with producer(emu, hub) as p:
        for pid in ("0", "1", "2", "3"):
            p.send_batch([EventData(f"q{pid}")], partition_id=pid)
    fresh = {(pid, f"q{pid}") for pid in "0123"}
    got_all = wait_for(lambda: (received["a"] | received["b"]) >= fresh, 20)
    for c in clients.values():
        c.close()
    for t in threads:
        t.join(10)
    assert balanced and got_all
    # after balancing each partition's new event went to exactly one client, two partitions each
    assert sorted(len(received[n] & fresh) for n in "ab") == [2, 2]


def _sasl_plain(port: int, user: str, password: str) -> int:
    """SASL PLAIN over a raw socket; returns the sasl-outcome code."""
    import socket

    from harness.emulator.amqp import performatives as P
    from harness.emulator.amqp.frames import SASL_HEADER, FrameReader, frame
    from harness.emulator.amqp.types import Symbol

    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(SASL_HEADER)
        s.sendall(frame(0, P.encode_performative(
            P.SASL_INIT, [Symbol("PLAIN"), f"\0{user}\0{password}".encode(), "127.0.0.1"]), 1))
        reader, frames = FrameReader(), []
        while len(frames) < 3:
            data = s.recv(4096)
            if not data:
                break
            frames.extend(reader.feed(data))
            while reader.buf:
                more = reader.feed(b"")
                if not more:
                    break
                frames.extend(more)
        outcome = P.decode_body(frames[2][2])
        assert outcome.code == P.SASL_OUTCOME
        return int(outcome.fields[0])


def test_sasl_plain_checks_configured_keys(sas_emulator, emu):
    assert _sasl_plain(sas_emulator.port, "app", "c2VjcmV0LWtleQ==") == 0
    assert _sasl_plain(sas_emulator.port, "app", "wrong") == 1
    assert _sasl_plain(emu.port, "any", "thing") == 1  # no keys configured: the well-known one is still checked
    assert _sasl_plain(emu.port, *emu.sas_key) == 0


def test_configured_message_size_becomes_sdk_batch_limit():
    cfg = EmulatorConfig(hubs=(HubConfig("small", 1),), max_message_size=64 * 1024)
    with EmulatorServer(cfg) as server:
        with EventHubProducerClient.from_connection_string(server.connection_string("small"), **FAST) as p:
            batch = p.create_batch()
            assert batch.max_size_in_bytes == 64 * 1024
            while True:
                try:
                    batch.add(EventData(b"b" * 1000))
                except ValueError:
                    break
            p.send_batch(batch)
            assert p.get_partition_properties("0")["last_enqueued_sequence_number"] == len(batch) - 1
