"""EventsAhead: a producer's events prepared in bulk for the times the pacer computed ahead, handed out a batch
at a time. Each batch must be what it would be built alone: every value is `producers.event.encode` of its own
sequence number and the pacer's intended time, the keys are the key chooser's stream in order, and a batch the
pacer did not foresee (skipped events, a new rate) is still right."""
import numpy as np
from pydantic import TypeAdapter

from harness.producers.ahead import EventsAhead
from harness.producers.event import decode, encode
from harness.producers.keys import make_key_chooser
from harness.producers.pacer import TokenPacer
from harness.producers.payloads import PayloadSource
from harness.producers.rates import make_rate, warmed_up
from harness.producers.spec import KeysSpec, PayloadSpec, RateSpec

START = 1_795_313_990.0
KEYS = {"kind": "uniform", "count": 1000}


def parts(seed: int = 4):
    keys = make_key_chooser(TypeAdapter(KeysSpec).validate_python(KEYS), 8, seed)
    source = PayloadSource(PayloadSpec.model_validate({"size": {"kind": "fixed", "bytes": 256},
                                                       "content": "compressible"}), seed)
    return keys, source


def send(pacer: TokenPacer, ahead: EventsAhead, ticks, seq0: int = 0, limit: int = 50):
    """Every batch at each tick: (intended times, values, keys, value bytes), the sequence numbers running on."""
    out = []
    for now in ticks:
        first, times = pacer.take(now, limit)
        if times:
            values, keys, partitions, nbytes = ahead.batch(first, seq0, times, pacer.ahead())
            assert partitions is None  # uniform keys: the client places them
            out.append((times, values, keys, nbytes))
            seq0 += len(times)
    return out


def check_encoded(batches, producer: int, seq0: int = 0) -> None:
    seq = seq0
    for times, values, _, nbytes in batches:
        assert len(values) == len(times) and nbytes == sum(map(len, values))
        for t, v in zip(times, values):
            assert v == encode(producer, seq, t, decode(v)["pad"]) and len(v) == 256
            seq += 1


def test_batches_from_prepared_events_are_the_events_built_alone(monkeypatch):
    built = []
    real_events = PayloadSource.events
    monkeypatch.setattr(PayloadSource, "events", lambda self, *a: built.append(len(a[2])) or real_events(self, *a))
    rate = make_rate(TypeAdapter(RateSpec).validate_python({"kind": "constant", "eps": 1000}))
    pacer = TokenPacer(rate, START, max_backlog_s=None)
    keys, source = parts()
    batches = send(pacer, EventsAhead(3, keys, source), START + 0.01 * np.arange(1, 301))
    check_encoded(batches, 3)
    assert sum(len(t) for t, *_ in batches) == 3000
    twin_keys, _ = parts()
    assert [k for *_, ks, _ in batches for k in ks] == twin_keys.next_columns(3000)[0]  # the same stream, in order
    assert len(built) < len(batches) / 10  # built in bulk: a few times for 300 batches


def test_skipped_events_and_a_new_rate_are_still_encoded_right_and_keys_stay_with_their_sequence_numbers():
    warm = warmed_up(make_rate(TypeAdapter(RateSpec).validate_python({"kind": "constant", "eps": 2000})), 120)
    pacer = TokenPacer(warm, START, max_backlog_s=0.5)
    keys, source = parts()
    ahead = EventsAhead(0, keys, source)
    first = send(pacer, ahead, START + 0.01 * np.arange(1, 44))  # 860 events: the skip comes mid-way through
    sent_first = sum(len(t) for t, *_ in first)  # what was prepared ahead
    later = send(pacer, ahead, START + 3.0 + 0.01 * np.arange(0, 20), seq0=sent_first)  # 2.5 s of events skipped
    assert pacer.skipped > 0
    pacer.set_rate(warmed_up(make_rate(TypeAdapter(RateSpec).validate_python({"kind": "constant", "eps": 2000})), 3.1))
    sent_later = sent_first + sum(len(t) for t, *_ in later)
    after = send(pacer, ahead, START + 3.2 + 0.01 * np.arange(0, 50), seq0=sent_later)
    check_encoded(first, 0)
    check_encoded(later, 0, seq0=sent_first)
    check_encoded(after, 0, seq0=sent_later)
    assert later[0][0][0] > START + 2.5 - 1e-6  # the first event after the skip: due within the backlog
    assert after and all(len(t) for t, *_ in after)
    # the event with sequence number s has the chooser's s-th key, whatever was skipped or built again
    sent = [k for batches in (first, later, after) for *_, ks, _ in batches for k in ks]
    twin_keys, _ = parts()
    assert sent == twin_keys.next_columns(len(sent))[0]


def test_a_batch_the_pacer_did_not_foresee_is_built_alone():
    keys, source = parts()
    ahead = EventsAhead(1, keys, source)
    times = [START + 0.5, START + 0.75]
    values, batch_keys, _, nbytes = ahead.batch(7, 40, times, None)  # no times computed ahead
    assert [decode(v)["s"] for v in values] == [40, 41] and nbytes == 512 and len(batch_keys) == 2
    assert values[1] == encode(1, 41, START + 0.75, decode(values[1])["pad"])


def test_a_producer_skipping_at_every_batch_builds_only_what_it_sends(monkeypatch):
    """Flat out against a short backlog the pacer skips events at every batch: nothing prepared ahead would be
    used, so nothing is; the events built are the events sent."""
    built = []
    real_events = PayloadSource.events
    monkeypatch.setattr(PayloadSource, "events", lambda self, *a: built.append(len(a[2])) or real_events(self, *a))
    rate = make_rate(TypeAdapter(RateSpec).validate_python({"kind": "constant", "eps": 2_000_000}))
    pacer = TokenPacer(rate, START, max_backlog_s=0.05)
    keys, source = parts()
    batches = send(pacer, EventsAhead(2, keys, source), START + 0.1 * np.arange(1, 21), limit=1000)
    check_encoded(batches, 2)
    assert pacer.skipped > 0 and len(batches) == 20
    assert sum(built) == sum(len(t) for t, *_ in batches) == 20_000
