"""The producers' history on disk: AckWriter's Arrow stream read back by the readers, torn tails, legacy CSV."""
import shutil

import numpy as np
import pyarrow as pa
import pytest

from harness.records.history import ACK_SCHEMA, AckWriter, ack_batches, ack_files, load_acks

T = 1_795_000_000_000.0  # an epoch-ms instant


def rows_of(producer_dir) -> list[tuple]:
    return [tuple(r.values()) for b in ack_batches(producer_dir) for r in b.to_pylist()]


def test_batches_round_trip_with_whole_batch_scalars_and_error_classes(tmp_path):
    w = AckWriter(tmp_path / "acks-3.arrows", 3, flush_s=3600)
    w.append(np.array([0, 1, 2]), np.array([4, 0, 4]), np.array([10, 0, 11]), np.array([T, T + 0.5, T + 1.25]),
             T + 20.0, np.array([1500, 2500, 3500]))
    w.append([3, 4], 7, -1, [T + 2, T + 3], T + 30.0, [10, 20], "_MSG_TIMED_OUT")
    w.append([5, 6, 7], [1, -1, 2], [99, -1, 100], [T + 4, T + 5, T + 6], [T + 40, T + 41, T + 42], [1, 2, 3],
             ["", "NotSentBeforeExit", None])
    w.close()
    assert rows_of(tmp_path) == [
        (3, 0, 4, 10, T, T + 20.0, 1500, ""), (3, 1, 0, 0, T + 0.5, T + 20.0, 2500, ""),
        (3, 2, 4, 11, T + 1.25, T + 20.0, 3500, ""),
        (3, 3, 7, -1, T + 2, T + 30.0, 10, "_MSG_TIMED_OUT"), (3, 4, 7, -1, T + 3, T + 30.0, 20, "_MSG_TIMED_OUT"),
        (3, 5, 1, 99, T + 4, T + 40, 1, ""), (3, 6, -1, -1, T + 5, T + 41, 2, "NotSentBeforeExit"),
        (3, 7, 2, 100, T + 6, T + 42, 3, ""),
    ]
    acks = load_acks(tmp_path)
    assert list(acks.columns) == list(ACK_SCHEMA.names) + ["produce_ms"]
    assert acks["produce_ms"].tolist()[:2] == [T + 20.0 - 1.5, T + 20.0 - 2.5]
    assert acks["error"].dtype == "string" and acks["error"].tolist()[3] == "_MSG_TIMED_OUT"


def test_one_record_batch_per_flush_at_least_every_flush_s(tmp_path):
    lazy = AckWriter(tmp_path / "acks-0.arrows", 0, flush_s=3600)
    lazy.append([0, 1], 0, [0, 1], [T, T], T, [1, 1])
    lazy.append([2], 0, [2], [T], T, [1])
    assert rows_of(tmp_path) == []  # buffered: nothing on disk before a flush
    lazy.maybe_flush()
    assert rows_of(tmp_path) == []  # within flush_s
    lazy.flush()
    assert len(rows_of(tmp_path)) == 3
    lazy.append([3], 0, [3], [T], T, [1])
    lazy.close()
    assert [b.num_rows for b in ack_batches(tmp_path)] == [3, 1]

    eager = AckWriter(tmp_path / "acks-1.arrows", 1, flush_s=0.0)
    eager.append([0], 0, [0], [T], T, [1])  # flush_s has passed: written by append itself
    assert [r[:2] for r in rows_of(tmp_path)] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    eager.close()


def test_columns_of_different_lengths_are_refused(tmp_path):
    w = AckWriter(tmp_path / "acks-0.arrows", 0, flush_s=3600)
    with pytest.raises(ValueError, match="offset"):
        w.append([0, 1], 0, [0], [T, T], T, [1, 1])  # one offset is not "the same for the whole batch"
    with pytest.raises(ValueError, match="error"):
        w.append([0, 1], 0, [0, 1], [T, T], T, [1, 1], ["", "X", "Y"])
    w.close()
    assert rows_of(tmp_path) == []


def test_a_torn_last_batch_never_yields_a_partial_row(tmp_path):
    """Cut the file at every byte offset inside its last batch (a writer killed mid-write): the readers give every
    earlier batch whole and nothing of the last until it is complete."""
    path = tmp_path / "acks-0.arrows"
    w = AckWriter(path, 0, flush_s=3600)
    sizes = []
    for b in range(3):
        w.append(np.arange(b * 4, b * 4 + 4), b, np.arange(4), np.full(4, T + b), T + 100, np.full(4, 7),
                 None if b < 2 else ["", "E", "", "E2"])
        w.flush()
        sizes.append(path.stat().st_size)
    w.close()
    whole = path.read_bytes()
    assert len(whole) > sizes[-1]  # the end-of-stream marker, at close
    cut_dir = tmp_path / "cut"
    cut_dir.mkdir()
    cut = cut_dir / "acks-0.arrows"
    seen = set()
    for end in range(sizes[1], len(whole) + 1):
        cut.write_bytes(whole[:end])
        seqs = [s for b in ack_batches(cut_dir) for s in b.column("seq").to_pylist()]
        assert seqs in (list(range(8)), list(range(12))), end
        assert seqs == list(range(12 if end >= sizes[2] else 8)), end
        seen.add(len(seqs))
    assert seen == {8, 12}
    for end in range(0, sizes[0], 7):  # torn before the first batch is whole: nothing, and no error
        cut.write_bytes(whole[:end])
        assert rows_of(cut_dir) == []


def test_legacy_csv_logs_read_beside_arrow_ones(tmp_path):
    """Run directories written before the Arrow history hold acks-<process>.csv with the same columns; a torn
    last line is dropped there too."""
    (tmp_path / "acks-1.csv").write_text(
        "producer,seq,partition,offset,intended_ms,ack_ms,latency_us,error\n"
        f"1,0,2,5,{T:.3f},{T + 9:.3f},1000,\n"
        f"1,1,-1,-1,{T + 1:.3f},{T + 9:.3f},2000,_MSG_TIMED_OUT\n"
        "1,2,2,6,17950")
    w = AckWriter(tmp_path / "acks-0.arrows", 0)
    w.append([0], 3, [8], [T], T + 5, [4000])
    w.close()
    assert [p.name for p in ack_files(tmp_path)] == ["acks-0.arrows", "acks-1.csv"]
    assert rows_of(tmp_path) == [(0, 0, 3, 8, T, T + 5, 4000, ""), (1, 0, 2, 5, T, T + 9, 1000, ""),
                                 (1, 1, -1, -1, T + 1, T + 9, 2000, "_MSG_TIMED_OUT")]


def test_an_empty_history_is_an_empty_frame_with_the_columns(tmp_path):
    AckWriter(tmp_path / "acks-0.arrows", 0).close()  # a producer that never got a report
    shutil.copy(tmp_path / "acks-0.arrows", tmp_path / "acks-1.arrows")
    acks = load_acks(tmp_path)
    assert len(acks) == 0 and list(acks.columns) == list(ACK_SCHEMA.names) + ["produce_ms"]
    assert pa.types.is_string(ACK_SCHEMA.field("error").type)


def test_writing_the_history_never_imports_pandas(tmp_path):
    """pyarrow's pa.array imports pandas on first use (a second or more): in a producer that was a stall in the
    middle of its traffic at the first flush. A fresh interpreter writes acked and failed rows without it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from harness.records.history import AckWriter\n"
        f"w = AckWriter({str(tmp_path / 'acks-0.arrows')!r}, 0)\n"
        "w.append([0, 1], 0, [5, 6], [1.0, 2.0], 3.0, [10, 20])\n"
        "w.append([2, 3], -1, -1, [4.0, 5.0], 6.0, [1, 2], ['_MSG_TIMED_OUT', ''])\n"
        "w.close()\n"
        "print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert [r[-1] for r in rows_of(tmp_path)] == ["", "", "_MSG_TIMED_OUT", ""]


def test_many_small_appends_across_buffer_growth_keep_every_row(tmp_path):
    """Thousands of small delivery batches (a producer's usual flow) into one flush, buffers growing on the way,
    failures among them: every row as appended, in order, the failed ones with their class."""
    w = AckWriter(tmp_path / "acks-2.arrows", 2, flush_s=3600)
    expected = []
    seq = 0
    for k in range(1500):
        n = 1 + k % 4
        seqs = list(range(seq, seq + n))
        if k % 500 == 7:
            w.append(seqs, -1, -1, [T + s for s in seqs], T + k, [5] * n, "_MSG_TIMED_OUT")
            expected += [(2, s, -1, -1, T + s, T + k, 5, "_MSG_TIMED_OUT") for s in seqs]
        else:
            w.append(seqs, k % 8, [10 * s for s in seqs], [T + s for s in seqs], T + k, [5] * n)
            expected += [(2, s, k % 8, 10 * s, T + s, T + k, 5, "") for s in seqs]
        seq += n
    w.close()
    assert [b.num_rows for b in ack_batches(tmp_path)] == [len(expected)]
    assert rows_of(tmp_path) == expected
