"""The change fault's model (harness.faults.change): phase B's [spark] table built from phase A's, what a change
changed, and the refusals at load, each with the file and the field named."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import ConfigError, load_scenario
from harness.faults.change import Change, ChangeOptions, changed_settings, describe, successor_spark

ROOT = Path(__file__).resolve().parents[2]
WINDOWED = str(ROOT / "scenarios" / "rehearsals" / "bases" / "windowed.toml")


def with_change(**spark_and_options):
    """The windowed base scenario with one change fault appended (its options as given)."""
    options = {"kind": "change", "at_s": 12, **spark_and_options}

    def amend(data):
        data["faults"] = [options]

    return load_scenario(WINDOWED, amend=amend)[0]


def test_maps_merge_key_by_key_and_a_new_query_brings_its_own_params():
    base = load_scenario(WINDOWED)[0]
    table = successor_spark(base.spark, {"conf": {"spark.sql.shuffle.partitions": 8},
                                         "source_options": {"maxOffsetsPerTrigger": 500}})
    assert table["conf"] == {"spark.sql.shuffle.partitions": 8}
    assert table["source_options"] == {"startingOffsets": "earliest", "failOnDataLoss": True,
                                       "maxOffsetsPerTrigger": 500}
    assert table["query_params"] == {"window": "5 seconds", "watermark": "3 seconds"}  # kept: the same query
    table = successor_spark(base.spark, {"query": "dedup", "query_params": {"watermark": "3 seconds"}})
    assert table["query_params"] == {"watermark": "3 seconds"}
    assert successor_spark(base.spark, {"query_params": {"group_by_partition": True}})["query_params"] == {
        "window": "5 seconds", "watermark": "3 seconds", "group_by_partition": True}


def test_what_a_change_changed_is_named_setting_by_setting():
    scenario = with_change(spark={"state_store": "rocksdb", "conf": {"spark.sql.shuffle.partitions": 8},
                                  "source_options": {"maxOffsetsPerTrigger": 500}})
    after = Change(scenario.faults[0]).successor(scenario)
    changed = changed_settings(scenario, after)
    assert changed == {
        "conf": {"spark.sql.shuffle.partitions": "8",
                 "spark.sql.streaming.stateStore.providerClass":
                     "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"},
        "source_options": {"maxOffsetsPerTrigger": "500"}}
    assert describe(changed).startswith("spark.sql.shuffle.partitions 8")
    assert after.faults == [] and after.spark.state_store == "rocksdb" and scenario.spark.state_store == "hdfs"


def test_an_option_name_written_without_quotes_is_the_dotted_name():
    options = ChangeOptions.model_validate({"kind": "change", "at_s": 5,
                                            "spark": {"conf": {"spark": {"sql": {"shuffle": {"partitions": 8}}}}}})
    assert options.spark == {"conf": {"spark.sql.shuffle.partitions": 8}}


@pytest.mark.parametrize("spark, words", [
    ({}, "change nothing the query runs with"),
    ({"master": "local[1]"}, "spark.master is not something a change to the query sets"),
])
def test_a_change_must_change_the_query(spark, words):
    with pytest.raises(ConfigError, match=words):
        with_change(spark=spark)


def test_a_change_to_nothing_is_refused():
    with pytest.raises(ConfigError, match="change nothing the query runs with"):
        with_change(spark={"query": "windowed_count"})


def test_phase_b_is_validated_like_a_scenario_naming_the_fault():
    with pytest.raises(ConfigError, match=r"faults\.0 \(change\): phase B's \[spark\].*state_store"):
        with_change(spark={"state_store": "memory"})
    with pytest.raises(ConfigError, match=r"faults\.0\.spark \(change, phase B\): spark\.query_params: \['window'\] "
                                          r"not known to dedup"):
        with_change(spark={"query": "dedup"})
    with pytest.raises(ConfigError, match=r"faults\.0\.spark \(change, phase B\): spark\.query: unknown query"):
        with_change(spark={"query": "no_such_query"})


def test_a_change_needs_a_query_running_during_the_traffic():
    def amend(data):
        data["spark"]["trigger"] = {"kind": "availableNow"}
        data["faults"] = [{"kind": "change", "at_s": 5, "spark": {"conf": {"spark.sql.shuffle.partitions": 8}}}]

    with pytest.raises(ConfigError, match="needs a query running during the traffic"):
        load_scenario(WINDOWED, amend=amend)


@pytest.mark.parametrize("query, params, problem", [
    ("passthrough", {"extra_column": "region", "min_bytes": 1}, None),
    ("passthrough", {"extra_column": "offset"}, "the output has that column already"),
    ("passthrough", {"extra_column": "Bad Name"}, "a column name"),
    ("passthrough", {"min_bytes": -1}, "0 or more"),
    ("windowed_count", {"group_by_partition": True}, None),
    ("windowed_count", {"group_by_partition": "yes"}, "true or false"),
    ("sessions", {"last_seq": True}, None),
    ("sessions", {"last_seq": 1}, "true or false"),
])
def test_the_code_changes_the_built_in_queries_take(query, params, problem):
    """The params a rehearsal changes a built-in query's code with, checked at load like every param."""
    from harness.queries import resolve

    said = resolve(query).check_params(params)
    assert (said is None) if problem is None else (problem in said), said
