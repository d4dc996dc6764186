"""The sink reader sees exactly what `_spark_metadata` lists, timed by each batch's commit."""
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

from harness.sinks.parquet.files import SINK_COLUMNS, batch_log, read_sink


def _write(sink, name, rows):
    path = sink / name
    table = pa.table({c: [r[i] for r in rows] for i, c in enumerate(SINK_COLUMNS)})
    pq.write_table(table, path)
    return path


def _log(sink, batch, paths, mtime, suffix=""):
    meta = sink / "_spark_metadata"
    meta.mkdir(exist_ok=True)
    f = meta / f"{batch}{suffix}"
    f.write_text("v1\n" + "\n".join(json.dumps({"path": f"file://{p}", "size": 1, "isDir": False,
                                                 "modificationTime": 0, "blockReplication": 1,
                                                 "blockSize": 1, "action": "add"}) for p in paths) + "\n")
    os.utime(f, (mtime, mtime))


def test_only_logged_files_count_and_compaction_adds_new_files_only(tmp_path):
    r = lambda s: (0, s, 0, s, 1.0, 2.0, 10, 3.0)  # noqa: E731
    a = _write(tmp_path, "a.parquet", [r(0), r(1)])
    b = _write(tmp_path, "b.parquet", [r(2)])
    _write(tmp_path, "orphan.parquet", [r(99)])  # a failed attempt's file: not in the log, not visible
    _log(tmp_path, 0, [a], 100.0)
    _log(tmp_path, 1, [a, b], 101.5, suffix=".compact")
    log = batch_log(tmp_path)
    assert [(bid, t) for bid, t, _ in log] == [(0, 100000.0), (1, 101500.0)]
    df = read_sink(tmp_path)
    assert sorted(df["seq"]) == [0, 1, 2]
    assert dict(zip(df["seq"], df["commit_ms"])) == {0: 100000.0, 1: 100000.0, 2: 101500.0}
    assert set(df["batch_id"]) == {0, 1}


def test_empty_sink(tmp_path):
    assert len(read_sink(tmp_path / "missing")) == 0


def test_optional_columns_are_read_when_present_and_a_missing_required_one_is_an_error(tmp_path):
    core = {"producer": [0], "seq": [5], "intended_ms": [1.0], "partition": [0], "offset": [5]}
    pq.write_table(pa.table(core), tmp_path / "a.parquet")
    pq.write_table(pa.table({**core, "seq": [6], "batch_ms": [9.0]}), tmp_path / "b.parquet")
    _log(tmp_path, 0, [tmp_path / "a.parquet", tmp_path / "b.parquet"], 100.0)
    df = read_sink(tmp_path)
    assert sorted(df["seq"]) == [5, 6] and "batch_ms" in df and "bytes" not in df
    pq.write_table(pa.table({"producer": [0]}), tmp_path / "c.parquet")
    _log(tmp_path, 1, [tmp_path / "c.parquet"], 101.0)
    import pytest

    with pytest.raises(Exception, match="seq"):
        read_sink(tmp_path)
