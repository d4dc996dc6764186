"""fill_batch, the one loop that fills an Event Hubs batch (the producers' sender and the benchmarks), against the
real SDK's EventDataBatch and its size limit."""
from azure.eventhub import EventData, EventDataBatch

from harness.backends.eventhubs.sender import fill_batch


def full_at(max_bytes: int, body: bytes) -> int:
    """How many of these events the SDK's batch takes, found by the SDK itself."""
    batch, n = EventDataBatch(max_size_in_bytes=max_bytes), 0
    try:
        while True:
            batch.add(EventData(body))
            n += 1
    except ValueError:
        return n


def test_it_stops_where_the_sdk_says_the_batch_is_full():
    body = b"x" * 300
    batch = EventDataBatch(max_size_in_bytes=2000)
    assert fill_batch(batch, lambda _: EventData(body), 1000) == full_at(2000, body) == len(batch) > 0


def test_it_stops_at_the_limit_and_where_the_events_end():
    asked = []

    def event_at(i):
        asked.append(i)
        return EventData(b"e") if i < 3 else None

    assert fill_batch(EventDataBatch(), lambda _: EventData(b"e"), 5) == 5
    assert fill_batch(EventDataBatch(), event_at, 10) == 3 and asked == [0, 1, 2, 3]
    assert fill_batch(EventDataBatch(), event_at, 0) == 0
