"""The state store settings (spark.state_store, spark.changelog_checkpointing) as the Spark confs they stand for,
refused when they cannot hold; the checkpoint-tamper fault's state mode picking the file Spark would load."""
from types import SimpleNamespace

import pytest

from harness.config import ConfigError, load_scenario
from harness.faults.checkpoint_tamper import CheckpointTamper

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"  # Spark's class name


def test_rocksdb_with_changelogs_is_the_two_spark_confs():
    s, _, _ = load_scenario("stateful-rocksdb")
    conf = s.spark_conf()
    assert conf["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB
    assert conf["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] == "true"
    plain, _, _ = load_scenario("stateful")
    assert not any(k.startswith("spark.sql.streaming.stateStore") for k in plain.spark_conf())


@pytest.mark.parametrize("overrides, says", [
    (["spark.state_store=\"hdfs\""], "changelog_checkpointing = true needs state_store = \"rocksdb\""),
    (["spark.state_store=\"memory\""], "hdfs"),
    (['spark.conf={"spark.sql.streaming.stateStore.providerClass" = "x"}'], "give one"),
])
def test_settings_that_cannot_hold_are_refused_naming_them(overrides, says):
    with pytest.raises(ConfigError) as err:
        load_scenario("stateful-rocksdb", overrides)
    assert "stateful-rocksdb.toml" in str(err.value) and says in str(err.value)


def ckpt(tmp_path, files: list[str]):
    for f in files:
        (tmp_path / "state" / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "state" / f).write_text("x")
    return SimpleNamespace(checkpoint=tmp_path)


@pytest.mark.parametrize("files, removed", [
    (["0/0/4.changelog", "0/0/3.changelog", "0/0/2.zip", "0/1/4.changelog"], "state/0/0/4.changelog"),
    (["0/0/3.zip", "0/0/4.zip", "0/1/4.zip"], "state/0/0/4.zip"),  # RocksDB without changelogs: the snapshot
    (["0/0/4.delta", "0/0/.4.delta.crc"], "state/0/0/4.delta"),  # HDFS, with its checksum file
    (["0/2/4.changelog", "0/10/4.changelog"], "state/0/2/4.changelog"),  # the first partition by number
])
def test_drop_state_file_removes_the_version_the_last_commit_left(tmp_path, files, removed):
    ctx = ckpt(tmp_path, files)
    detail = CheckpointTamper._drop_state_file(ctx, 3)  # batch 3 committed state version 4
    assert detail["removed"] == [removed] and not (tmp_path / removed).exists()
    assert detail["expected_failure"] == "CANNOT_LOAD_STATE_STORE" and detail["state_version"] == 4
    assert not list(tmp_path.rglob(".4.delta.crc"))


def test_drop_state_file_without_state_is_a_fault_error(tmp_path):
    from harness.faults.base import FaultError

    with pytest.raises(FaultError, match="is the query stateful"):
        CheckpointTamper._drop_state_file(ckpt(tmp_path, ["0/0/3.zip"]), 3)
