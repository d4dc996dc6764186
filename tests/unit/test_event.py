from harness.producers.event import decode, encode, encode_many, pad_lengths
from harness.backends.kafka.sender import event_fields


def test_encoded_events_have_their_wanted_size_and_round_trip():
    sizes = [256, 1000, 64, 300]
    seq0 = 99_998  # crosses a digit boundary inside the batch
    pads = ["x" * n for n in pad_lengths(12, seq0, sizes)]
    times = [1795313990.1234567 + i for i in range(4)]
    values = encode_many(12, seq0, times, pads)
    assert [len(v) for v in values] == sizes
    for i, value in enumerate(values):
        e = decode(value)
        assert (e["p"], e["s"]) == (12, seq0 + i) and abs(e["t"] - times[i] * 1000) < 1e-3
        assert event_fields(value) == (str(seq0 + i), f"{times[i] * 1000:.3f}")


def test_small_sizes_never_pad_negative():
    assert pad_lengths(1, 1, [10]) == [0]
    assert decode(encode(1, 1, 1795313990.0))["pad"] == ""
