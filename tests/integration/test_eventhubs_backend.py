"""The Event Hubs backend as a run uses it: the emulator as a supervised process, producers in each send mode,
positions read through the SDK. What the hub holds is read back with a plain SDK consumer (an independent path)."""
import threading
import time

import pytest
from azure.eventhub import EventHubConsumerClient

from harness.backends import make_backend
from harness.backends.eventhubs.spec import EventHubsSpec
from harness.records.history import load_acks
from harness.config import StreamSpec
from harness.producers.event import decode
from harness.producers.fleet import ProducerFleet

pytestmark = pytest.mark.integration


def read_back(conn: str, hub: str, ends: dict[int, int], timeout: float = 60.0) -> dict[int, list]:
    """Every event of every partition, in sequence order: [(sequence_number, producer, seq, partition_key)]."""
    got: dict[int, list] = {p: [] for p in ends}

    def one(p: int):
        client = EventHubConsumerClient.from_connection_string(conn, consumer_group="$Default", eventhub_name=hub)

        def on_batch(ctx, batch):
            for e in batch:
                body = decode(e.body_as_str().encode())
                got[p].append((e.sequence_number, body["p"], body["s"], e.partition_key))
            if len(got[p]) >= ends[p]:
                threading.Thread(target=client.close, daemon=True).start()

        with client:
            client.receive_batch(on_batch, partition_id=str(p), starting_position="-1", max_batch_size=300,
                                 max_wait_time=0.5)

    threads = [threading.Thread(target=one, args=(p,), daemon=True) for p in ends if ends[p]]
    for t in threads:
        t.start()
    deadline = time.time() + timeout
    while any(len(got[p]) < ends[p] for p in ends) and time.time() < deadline:
        time.sleep(0.1)
    return got


@pytest.mark.parametrize("send", ["partition_key", "round_robin"])
def test_emulated_backend_runs_producers_in_each_send_mode(send, supervisor, tmp_path):
    stream = StreamSpec(name="events", partitions=3, config={"RetentionSeconds": 600})
    spec = EventHubsSpec(kind="eventhubs", send=send)
    backend = make_backend(spec, stream)
    backend.start(tmp_path, supervisor)
    try:
        backend.create_stream("events", 3, {})
        assert backend.end_offsets("events") == {0: 0, 1: 0, 2: 0}
        # at most 100 events a send (the sender packs up to 1,000 while a send is in flight): 12 sends at least,
        # so round robin reaches every partition even when the first send is slow
        settings = dict(backend.producer_settings(), max_batch_events=100)
        job = {"backend": "eventhubs", "sender": spec.sender, "placement": spec.placement, "stream": "events",
               "partitions": 3, "settings": settings, "processes": 1, "users": 2,
               "batch_size": 100, "duration_s": 2.0, "max_backlog_s": 10.0, "seed": 3,
               "rate": {"kind": "constant", "eps": 600},
               "keys": {"kind": "zipf", "count": 40, "s": 1.1} if send == "partition_key" else {"kind": "none"},
               "payload": {"size": {"kind": "fixed", "bytes": 120}}}
        fleet = ProducerFleet(tmp_path / "producers", supervisor, job)
        fleet.start(time.time() + 1.0)
        fleet.wait(90)
        assert not fleet.failures(), fleet.failures()
        acks = load_acks(tmp_path / "producers")
        assert len(acks) == 1200 and (acks["error"] == "").all()
        ends = backend.end_offsets("events")
        assert sum(ends.values()) == 1200
        got = read_back(backend.connection_string(), "events", ends)
        for p, events in got.items():
            assert [e[0] for e in events] == list(range(ends[p]))  # sequence numbers dense from 0
            seqs = [e[2] for e in events]
            assert seqs == sorted(seqs)  # one producer: its events reach each partition in send order
        where = {(e[1], e[2]): p for p, events in got.items() for e in events}
        assert len(where) == 1200
        if send == "partition_key":
            # the service placed each key; the acks name where the published hash says it goes
            assert where == {(r.producer, r.seq): r.partition for r in acks.itertuples()}
            assert all(e[3] is not None for events in got.values() for e in events)
        else:
            assert (acks["partition"] == -1).all() and all(len(v) for v in got.values())
    finally:
        backend.stop()
    assert not backend.alive() and all(c.name != "eventhubs-emulator" for c in supervisor.children)
