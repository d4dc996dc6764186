"""`harness setup` makes what a first `steady` run would (harness.commands.setup), with the real JVMs: from an
empty cache, one start of steady's broker and query leaves the storage tool's kept output and the three class
archives, each kept only because a JVM mapped it (cds.promote), each holding the classes its JVM needs in a run
(read from the archive's own symbol table, not from setup's code); a second setup starts nothing.

Slow (make test-slow): every `make test` runs `harness setup` first, and in a new virtualenv the driver's archive
is always missing (it is keyed by PySpark's jars there), so set-up's first start already runs in every CI run."""
from __future__ import annotations

import pytest

from harness.backends.kafka import storage
from harness.commands import setup
from harness.console import Console
from harness.jvm import cds

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# classes a run's JVMs load beyond their start, which an archive of a JVM that only started would lack
CLASSES = {
    "the Spark driver's class archive": (b"org/apache/spark/sql/kafka010/KafkaMicroBatchStream",  # the Kafka source
                                         b"org/apache/spark/sql/execution/streaming/sinks/FileStreamSink",
                                         b"org/apache/parquet/hadoop/ParquetOutputFormat",  # the first batch written
                                         b"org/apache/spark/sql/execution/streaming/runtime/ProcessingTimeExecutor"),
    "the broker's class archive": (b"kafka/server/KafkaApis",
                                   b"org/apache/kafka/storage/internals/log/ProducerStateManager"),
    "the storage tool's class archive": (b"kafka/tools/StorageTool",),
}


def test_setup_makes_what_a_first_steady_run_would_and_then_starts_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(cds, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(storage, "cache_dir", lambda: tmp_path)
    monkeypatch.delenv(cds.CDS_ENV, raising=False)
    scenario = setup.first_run_scenario()
    todo = setup.missing(scenario)
    assert {i.what for i in todo} == {"the Kafka storage tool's output", *CLASSES}

    made = setup.make_first_run_files(Console(quiet=True))
    assert made == todo and setup.missing(scenario) == []
    for item in made:
        data = item.path.read_bytes()
        if item.what in CLASSES:
            assert cds.looks_valid(item.path)
            absent = [name.decode() for name in CLASSES[item.what] if name not in data]
            assert not absent, f"{item.what} lacks {absent}"
        else:  # a Kafka metadata snapshot: a record batch at base offset 0, magic byte 2 (record batch v2)
            assert data[:8] == bytes(8) and data[16] == 2
    assert not list((tmp_path / "cds").glob(f"*{cds.TMP_SUFFIX}"))  # no dump left behind

    def started(*_args, **_kwargs):
        raise AssertionError("a second setup started something")

    monkeypatch.setattr(setup, "Supervisor", started)
    assert setup.make_first_run_files(Console(quiet=True)) == []
