from producers.event import decode, encode, pad_length


def test_encoded_event_has_wanted_size_and_round_trips():
    for producer, seq, size in [(0, 0, 256), (3, 123456789, 1000), (12, 7, 64)]:
        value = encode(producer, seq, 1795313990.1234567, "x" * pad_length(producer, seq, size))
        assert len(value) == size
        e = decode(value)
        assert (e["p"], e["s"]) == (producer, seq) and abs(e["t"] - 1795313990123.457) < 1e-3


def test_small_sizes_never_pad_negative():
    assert pad_length(1, 1, 10) == 0
