"""EventHubsSender's finished sends into the history, recorded in bulk: every event once, on the partition its
lane sends to, acked when its send returned, failed with the SDK's error class when it raised. The SDK's client is
replaced by a stand-in (its batches are the real EventDataBatch's interface: add, then send_batch), so the test
sees exactly which events each send carried."""
import gevent
import numpy as np
import pytest

from harness.backends.eventhubs import sender as eh
from harness.records.history import AckWriter, load_acks
from harness.partitioning import eventhubs_partition_for_key
from harness.producers.payloads import PayloadSource
from harness.producers.records import SecondStats
from harness.producers.spec import PayloadSpec


class ServerBusyError(Exception):
    pass


class FakeBatch(list):
    def __init__(self, partition_id):
        super().__init__()
        self.partition_id = partition_id

    def add(self, event):
        self.append(event)


class FakeClient:
    fail_partitions: set = set()

    def __init__(self):
        self.sends: list[tuple[str, int, float]] = []  # (partition id, events, when it returned)

    @classmethod
    def from_connection_string(cls, *_, **__):
        return cls()

    def create_batch(self, partition_id=None, partition_key=None):
        return FakeBatch(partition_id)

    def send_batch(self, batch):
        gevent.sleep(0.01)
        if batch.partition_id in self.fail_partitions:
            raise ServerBusyError("busy")
        self.sends.append((batch.partition_id, len(batch), eh.time.time()))

    def close(self):
        pass


@pytest.fixture
def sender(tmp_path, monkeypatch):
    monkeypatch.setattr(eh, "EventHubProducerClient", FakeClient)
    acks = AckWriter(tmp_path / "acks-3.arrows", 3, flush_s=3600)
    return eh.EventHubsSender("hub", {"connection_string": "x", "send": "partition_id"}, acks,
                              SecondStats(tmp_path / "stats-3.jsonl"), partitions=4)


def events(seq0: int, n: int) -> list[bytes]:
    src = PayloadSource(PayloadSpec.model_validate({"size": {"kind": "fixed", "bytes": 100}}), 1)
    intended = 1_795_313_990.25 + np.arange(n) * 0.001
    return src.events(3, seq0, intended, src.next_sizes_array(n))[0]


def test_every_event_is_recorded_once_on_its_keys_partition_when_its_send_returned(sender, tmp_path):
    keys = [f"k{i}".encode() for i in range(40)]
    sender.send_many(events(0, 40), keys, None)
    assert sender.outstanding() == 40
    gevent.sleep(0.1)  # the lanes started at once: no service() needed
    assert sender.outstanding() == 0 and sum(n for _, n, _ in sender.client.sends) == 40
    assert sender.stats.acked == 0  # held until the bulk recording (service() after HOLD_S, or close())
    sender.close()
    sender.acks.close()
    acks = load_acks(tmp_path).sort_values("seq")
    assert acks["seq"].tolist() == list(range(40)) and (acks["error"] == "").all()
    want = [eventhubs_partition_for_key(k.decode(), 4) for k in keys]
    assert acks["partition"].tolist() == want and (acks["offset"] == -1).all()
    returned = {p: t for p, _, t in sender.client.sends}  # one send per partition here
    assert np.allclose(acks["ack_ms"], [returned[str(p)] * 1000.0 for p in want])
    assert sender.stats.acked == 40 and sender.stats.failed == 0


def test_a_send_that_raises_fails_its_events_with_the_error_class_and_the_rest_are_acked(sender, tmp_path):
    keys = [f"k{i}".encode() for i in range(40)]
    bad = eventhubs_partition_for_key("k0", 4)
    FakeClient.fail_partitions = {str(bad)}
    try:
        sender.send_many(events(100, 40), keys, None)
        gevent.sleep(0.1)
        sender.service()
        sender.close()
    finally:
        FakeClient.fail_partitions = set()
    sender.acks.close()
    acks = load_acks(tmp_path).sort_values("seq")
    assert acks["seq"].tolist() == list(range(100, 140))
    failed = acks["partition"] == bad
    assert (acks.loc[failed, "error"] == "ServerBusyError").all() and (acks.loc[~failed, "error"] == "").all()
    assert sender.stats.errors_total == {"ServerBusyError": int(failed.sum())}
    assert sender.stats.acked == 40 - int(failed.sum())
