"""Kafka consumer groups on the emulator's Kafka endpoint (harness/emulator/kafka/groups.py), driven by the real
librdkafka consumer (confluent-kafka): what is expected comes from the client's own view -- its assignment,
``committed()``, the offsets of the messages it receives -- never from the coordinator's state.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafka_helpers import client_conf

import harness.emulator.kafka.errors as E
from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig
from harness.emulator.broker import Broker
from harness.emulator.kafka.coordinator import GroupCoordinator

HUBS = (HubConfig("grp-share", 4, ("$Default",)), HubConfig("grp-commit", 2, ("$Default",)),
        HubConfig("grp-gone", 1, ("$Default",)))
FAST_GROUP = {"heartbeat.interval.ms": 300, "session.timeout.ms": 6000, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 2000}


@pytest.fixture(scope="module")
def emu():
    server = EmulatorServer(EmulatorConfig(hubs=HUBS)).start()
    yield server
    server.stop()


def _consumer(emu, group: str, **extra) -> Consumer:
    return Consumer(client_conf(emu, **{"group.id": group, **FAST_GROUP, **extra}))


def _poll_until(consumers, predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.1)
        if predicate():
            return True
    return predicate()


def _parts(consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def test_two_members_share_partitions_then_one_takes_all(emu):
    a = _consumer(emu, "share")
    b = _consumer(emu, "share")
    try:
        a.subscribe(["grp-share"])
        b.subscribe(["grp-share"])
        assert _poll_until([a, b], lambda: _parts(a) and _parts(b) and len(_parts(a) | _parts(b)) == 4), \
            (a.assignment(), b.assignment())
        assert not _parts(a) & _parts(b)  # each partition to one member only
        assert _parts(a) | _parts(b) == {0, 1, 2, 3}
        admin = AdminClient(client_conf(emu))
        listed = admin.list_consumer_groups(request_timeout=10).result(timeout=15)
        assert "share" in {g.group_id for g in listed.valid}
        desc = admin.describe_consumer_groups(["share"], request_timeout=10)["share"].result(timeout=15)
        assert desc.state == ConsumerGroupState.STABLE
        assert {m.member_id for m in desc.members} == {a.memberid(), b.memberid()}
        by_member = {m.member_id: {tp.partition for tp in m.assignment.topic_partitions} for m in desc.members}
        assert by_member == {a.memberid(): _parts(a), b.memberid(): _parts(b)}
        a.close()  # LeaveGroup: the other member is rebalanced onto every partition
        assert _poll_until([b], lambda: _parts(b) == {0, 1, 2, 3}), b.assignment()
    finally:
        for c in (a, b):
            try:
                c.close()
            except RuntimeError:  # already closed
                pass


def test_committed_offsets_survive_a_consumer_restart(emu):
    p = Producer(client_conf(emu))
    for i in range(10):
        p.produce("grp-commit", value=b"m%d" % i, partition=i % 2)
    assert p.flush(30) == 0

    first = _consumer(emu, "commit")
    seen = []
    first.subscribe(["grp-commit"])
    deadline = time.monotonic() + 30
    while len(seen) < 6 and time.monotonic() < deadline:
        msg = first.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.append(msg)
    assert len(seen) == 6
    first.commit(asynchronous=False)  # the positions after what was consumed
    want = {}
    for msg in seen:
        want[msg.partition()] = max(want.get(msg.partition(), 0), msg.offset() + 1)
    asked = [TopicPartition("grp-commit", part) for part in (0, 1)]
    before = {tp.partition: tp.offset for tp in first.committed(asked, timeout=10)}
    assert {k: v for k, v in before.items() if k in want} == want
    first.close()

    second = _consumer(emu, "commit")
    try:
        after = {tp.partition: tp.offset for tp in second.committed(asked, timeout=10)}
        assert after == before  # a new consumer of the group reads the same committed offsets
        second.subscribe(["grp-commit"])
        rest = []
        deadline = time.monotonic() + 30
        while len(rest) < 4 and time.monotonic() < deadline:
            msg = second.poll(0.2)
            if msg is not None and msg.error() is None:
                rest.append(msg)
        # it resumes at the committed offsets: together the two consumers saw each event exactly once
        got = sorted((m.partition(), m.offset()) for m in seen + rest)
        assert got == sorted((part, off) for part in (0, 1) for off in range(5))
    finally:
        second.close()


def test_deleting_the_hub_drops_its_committed_offsets(emu):
    c = _consumer(emu, "gone")
    try:
        tp = TopicPartition("grp-gone", 0, 0)
        c.commit(offsets=[tp], asynchronous=False)  # a simple commit, no membership needed
        assert c.committed([TopicPartition("grp-gone", 0)], timeout=10)[0].offset == 0
        emu.recreate_hub("grp-gone")
        assert c.committed([TopicPartition("grp-gone", 0)], timeout=10)[0].offset < 0  # OFFSET_INVALID
    finally:
        c.close()


def test_session_timeout_outside_the_service_range_is_refused(emu):
    c = _consumer(emu, "bad-timeout", **{"session.timeout.ms": 3000, "heartbeat.interval.ms": 1000})
    errors = []
    try:
        c.subscribe(["grp-share"])
        deadline = time.monotonic() + 15
        while not errors and time.monotonic() < deadline:
            try:
                msg = c.poll(0.2)
            except KafkaException as exc:
                errors.append(exc.args[0])
                continue
            if msg is not None and msg.error() is not None:
                errors.append(msg.error())
        assert errors and "session timeout" in str(errors[0]).lower(), errors
        assert not c.assignment()
    finally:
        c.close()


def test_a_static_member_coming_back_replaces_its_old_self(emu):
    """group.instance.id (KIP-345): a restarted static member takes its old place at once; the group never holds
    the old and the new member together (the old one is not left to expire with its session)."""
    admin = AdminClient(client_conf(emu))
    first = _consumer(emu, "static", **{"group.instance.id": "worker-1", "session.timeout.ms": 60000})
    first.subscribe(["grp-share"])
    assert _poll_until([first], lambda: _parts(first) == {0, 1, 2, 3})
    old_id = first.memberid()
    first.close()  # a static member's close sends no LeaveGroup: its membership stays for the session timeout
    desc = admin.describe_consumer_groups(["static"], request_timeout=10)["static"].result(timeout=15)
    assert [m.member_id for m in desc.members] == [old_id]
    second = _consumer(emu, "static", **{"group.instance.id": "worker-1", "session.timeout.ms": 60000})
    try:
        second.subscribe(["grp-share"])
        assert _poll_until([second], lambda: _parts(second) == {0, 1, 2, 3})
        desc = admin.describe_consumer_groups(["static"], request_timeout=10)["static"].result(timeout=15)
        assert [(m.member_id, m.group_instance_id) for m in desc.members] == [(second.memberid(), "worker-1")]
        assert second.memberid() != old_id
    finally:
        second.close()


def test_a_member_whose_connection_dies_mid_rebalance_does_not_hold_the_group():
    """Kafka counts a JoinGroup that is waiting as joined even if its connection then goes away: the rebalance
    completes with it (its session timeout removes it later) instead of waiting out the rebalance timeout.
    Coordinator-level, on a real Broker: the cut connection is the cancelled JoinGroup task."""

    async def scenario():
        coord = GroupCoordinator(Broker(EmulatorConfig(hubs=HUBS), asyncio.get_running_loop()))
        g = coord.group("cut")
        proto = [("range", b"")]

        def join(member_id, client):
            return asyncio.ensure_future(coord.join(g, member_id, None, 6000, 300000, "consumer", proto, client,
                                                    "/127.0.0.1", require_known_member=False))

        a = (await join("", "a"))["member_id"]  # generation 1: a alone
        c_join = join("", "c")  # c joins: a rebalance, a rejoins, generation 2 holds a and c
        await asyncio.sleep(0)
        a_join = join(a, "a")
        c = (await asyncio.wait_for(c_join, 5))["member_id"]
        assert (await a_join)["generation"] == 2
        b_join = join("", "b")  # b joins: the rebalance waits for a and c
        await asyncio.sleep(0)
        assert coord.heartbeat(g, 2, a, None) == E.REBALANCE_IN_PROGRESS
        a_join = join(a, "a")
        await asyncio.sleep(0)
        assert not b_join.done()  # c has not rejoined yet
        a_join.cancel()  # a's connection is cut while its JoinGroup waits
        await asyncio.sleep(0)
        c_join = join(c, "c")
        b = await asyncio.wait_for(b_join, 5)  # c's rejoin completes the rebalance: a counts as joined
        assert (b["error"], b["generation"]) == (E.NONE, 3)
        assert (await c_join)["generation"] == 3
        assert set(g.members) == {a, b["member_id"], c}  # a stays until its session ends
        for m in g.members.values():
            m.timer.cancel()

    asyncio.run(scenario())
