"""KafkaSender's delivery reports into the history, with the real client and no broker: every event handed over
is recorded once, as failed with the client's own error class (timed out, or purged at exit)."""
import time

import numpy as np

from harness.records.history import AckWriter, load_acks
from harness.backends.kafka.sender import KafkaSender
from harness.producers.payloads import PayloadSource
from harness.producers.records import SecondStats
from harness.producers.spec import PayloadSpec

NOWHERE = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0, "reconnect.backoff.max.ms": 1000}


def sender(tmp_path, **settings) -> KafkaSender:
    acks = AckWriter(tmp_path / "acks-5.arrows", 5, flush_s=3600)
    return KafkaSender("t", dict(NOWHERE, **settings), acks, SecondStats(tmp_path / "stats-5.jsonl"))


def batch(seq0: int, n: int) -> tuple[list[bytes], np.ndarray]:
    src = PayloadSource(PayloadSpec.model_validate({"size": {"kind": "fixed", "bytes": 100}}), 1)
    intended = 1_795_313_990.25 + np.arange(n) * 0.001
    return src.events(5, seq0, intended, src.next_sizes_array(n))[0], intended


def service_until(s: KafkaSender, n: int, timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while s.stats.failed < n and time.time() < deadline:
        s.service()
        time.sleep(0.02)


def test_undeliverable_events_are_recorded_failed_with_their_error_class(tmp_path):
    s = sender(tmp_path, **{"message.timeout.ms": 300, "enable.idempotence": False})
    values, intended = batch(0, 5)
    s.send_many(values[:3], [b"a", b"b", None], None)
    s.send_many(values[3:], [b"c", b"d"], [2, 4])  # explicit partitions
    service_until(s, 5)
    s.acks.close()
    acks = load_acks(tmp_path).sort_values("seq")
    assert acks["seq"].tolist() == [0, 1, 2, 3, 4] and (acks["producer"] == 5).all()
    assert (acks["error"] == "_MSG_TIMED_OUT").all() and (acks["offset"] == -1).all()
    assert acks["partition"].tolist() == [-1, -1, -1, 2, 4]  # never placed: no metadata
    assert acks["intended_ms"].tolist() == [float(f"{t * 1000:.3f}") for t in intended]
    assert s.stats.errors_total == {"_MSG_TIMED_OUT": 5} and s.stats.acked == 0
    assert (acks["latency_us"] > 200_000).all()  # produce() to the report: the timeout


def test_abandon_purges_whats_queued_and_each_event_is_recorded(tmp_path):
    s = sender(tmp_path, **{"message.timeout.ms": 60_000})
    values, _ = batch(100, 50)
    s.send_many(values, [b"k"] * 50, None)
    assert s.outstanding() >= 50  # the client's queue (and its own requests)
    s.abandon()
    service_until(s, 50)
    s.acks.close()
    acks = load_acks(tmp_path)
    assert sorted(acks["seq"]) == list(range(100, 150))
    assert set(acks["error"]) == {"_PURGE_QUEUE"}


def test_a_full_queue_is_waited_out_and_every_event_handed_over_exactly_once(tmp_path):
    """A queue of 4 and a batch of 10: the batch waits (cooperatively) for room, made here by a greenlet that
    purges and serves the reports, and resumes with the refused event: none skipped, none sent twice."""
    import gevent

    s = sender(tmp_path, **{"message.timeout.ms": 60_000, "queue.buffering.max.messages": 4})
    values, _ = batch(0, 10)
    refused = []
    s.stats.on_buffer_full = refused.append  # called with the time of each refusal

    def make_room():
        while True:
            gevent.sleep(0.02)
            s.abandon()
            s.service()

    helper = gevent.spawn(make_room)
    try:
        s.send_many(values, [b"k"] * 10, None)
    finally:
        helper.kill()
    s.abandon()
    service_until(s, 10)
    s.acks.close()
    acks = load_acks(tmp_path)
    assert sorted(acks["seq"]) == list(range(10))
    assert len(refused) >= 1  # the queue did fill: the resume path ran


def test_held_reports_keep_the_time_their_poll_saw_them(tmp_path, monkeypatch):
    """Reports are recorded in bulk, later than their poll: each ack time is still its poll's, so ack_ms minus
    the client's latency is the produce call (here recorded 0.4 s after the poll that served the reports)."""
    import harness.backends.kafka.sender as kafka_sender

    monkeypatch.setattr(kafka_sender, "HOLD_S", 3600.0)
    s = sender(tmp_path, **{"message.timeout.ms": 300, "enable.idempotence": False})
    values, _ = batch(0, 5)
    before = time.time()
    s.send_many(values, [b"k"] * 5, None)
    after = time.time()
    deadline = time.time() + 20
    while len(s._held) < 5 and time.time() < deadline:  # served (timed out) but held, not recorded
        s.service()
        time.sleep(0.01)
    assert len(s._held) == 5 and s.stats.failed == 0
    time.sleep(0.4)
    s.close()  # records what is held
    s.acks.close()
    acks = load_acks(tmp_path)
    assert sorted(acks["seq"]) == list(range(5)) and (acks["error"] == "_MSG_TIMED_OUT").all()
    assert (acks["produce_ms"] >= before * 1000 - 2).all() and (acks["produce_ms"] <= after * 1000 + 20).all()


def test_reports_served_by_the_poll_thread_are_each_recorded_once_at_their_time(tmp_path):
    """A producer process's sender: a native thread waits in poll(timeout) for the reports while the hub is idle,
    the hub polls itself when it calls service(); each event is recorded once, and ack_ms - latency is still the
    produce call."""
    import gevent

    acks = AckWriter(tmp_path / "acks-5.arrows", 5, flush_s=3600)
    s = KafkaSender("t", dict(NOWHERE, **{"message.timeout.ms": 300, "enable.idempotence": False}), acks,
                    SecondStats(tmp_path / "stats-5.jsonl"), poll_thread=True)
    assert s._poller is not None
    values, _ = batch(0, 5)
    before = time.time()
    s.send_many(values, [b"k"] * 5, None)
    after = time.time()
    deadline = time.time() + 20
    while s.stats.failed < 5 and time.time() < deadline:
        s.service()
        gevent.sleep(0.06)
    assert s.stats.failed == 5
    s.close()
    assert s._poller is None  # the thread stopped
    s.acks.close()
    acks = load_acks(tmp_path)
    assert sorted(acks["seq"]) == list(range(5)) and (acks["error"] == "_MSG_TIMED_OUT").all()
    assert (acks["produce_ms"] >= before * 1000 - 2).all() and (acks["produce_ms"] <= after * 1000 + 20).all()
    assert (acks["ack_ms"] >= before * 1000 + 300).all()  # reported at the timeout, not before
