"""The Event Hubs source's pure parts, without Spark: option parsing, batch planning, preferred locations.

Expected values are written from the connector's documented shapes and algorithms, worked by hand, or computed
with the real Scala library (see the locality tests), never with the functions under test.
"""
import json
import sys

import pytest

from harness.errors import InputError
from harness.backends.eventhubs.spark_source.locality import (java_string_hash, placement, preferred_executor, scala_tuple2_hash,
                                              sorted_executors)
from harness.backends.eventhubs.spark_source.offsets import (EventHubsDataLossError, Generation, PartitionBounds, Range, offset_json,
                                             plan_batch_end, plan_ranges, read_offset, split_limit)
from harness.backends.eventhubs.spark_source.options import (ALLOWED_OPTIONS, EventHubsOptionError, EventPosition,
                                             parse_options)

CONN = ("Endpoint=sb://127.0.0.1:5672/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=k;"
        "UseDevelopmentEmulator=true;EntityPath=hub")


def opts(**extra):
    return parse_options({"eventhubs.connectionString": CONN, **extra})


def test_importing_the_options_does_not_import_spark_or_the_sdk():
    import subprocess

    code = ("import sys; from harness.backends.eventhubs.spark_source.options import parse_options, ALLOWED_OPTIONS; "
            "import harness.backends.eventhubs.spark_source; print('pyspark' in sys.modules, 'azure.eventhub' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_defaults_are_the_connectors():
    o = opts()
    assert o.hub == "hub" and o.connection.host == "127.0.0.1:5672" and o.connection.emulator
    assert o.consumer_group == "$Default"
    assert o.starting_position is None and o.starting_positions == ()
    assert o.position_for(3) == EventPosition("offset", "@latest", inclusive=False)  # end of stream
    assert o.max_events_per_trigger is None and o.default_max_events(4) == 4000  # partitionCount * 1000
    assert (o.receiver_timeout_s, o.operation_timeout_s) == (60.0, 300.0)
    assert o.prefetch_count == 500 and o.use_exclusive_receiver is True
    assert o.preferred_location_strategy == "Hash" and o.fail_on_data_loss is True and o.metrics_path is None
    assert o.receiver_cache is True


def test_option_names_are_case_insensitive_and_aliases_are_accepted():
    o = parse_options({"EVENTHUBS.CONNECTIONSTRING": CONN, "eventhubs.maxEventsPerTrigger": "7",
                       "eventhubs.partitionPreferredLocationStrategy": "BalancedHash", "FAILONDATALOSS": "False",
                       "Eventhubs.UseExclusiveReceiver": "false", "harness.metricspath": "/tmp/m",
                       "harness.receivercache": "false"})
    assert o.max_events_per_trigger == 7 and o.preferred_location_strategy == "BalancedHash"
    assert o.fail_on_data_loss is False and o.use_exclusive_receiver is False and o.metrics_path == "/tmp/m"
    assert o.receiver_cache is False
    with pytest.raises(EventHubsOptionError, match="given twice"):
        parse_options({"eventhubs.connectionString": CONN, "maxEventsPerTrigger": "1",
                       "eventhubs.maxEventsPerTrigger": "2"})


def test_unknown_option_names_it_and_lists_the_allowed_ones():
    with pytest.raises(EventHubsOptionError) as err:
        opts(**{"eventhubs.consumerGroupp": "x"})
    text = str(err.value)
    assert "'eventhubs.consumerGroupp'" in text
    assert all(name in text for name in ALLOWED_OPTIONS)
    assert isinstance(err.value, ValueError) and isinstance(err.value, InputError)
    with pytest.raises(EventHubsOptionError, match="does not implement"):
        opts(**{"eventhubs.endingPosition": "{}"})
    # the connector's option is partitionPreferredLocationStrategy: a Kafka-ism is still unknown
    with pytest.raises(EventHubsOptionError, match="maxOffsetsPerTrigger"):
        opts(maxOffsetsPerTrigger="10")


@pytest.mark.parametrize("conn, fragment", [
    ("Endpoint=sb://x/;SharedAccessKeyName=a;SharedAccessKey=b", "no EntityPath"),
    ("SharedAccessKeyName=a;EntityPath=h", "no Endpoint"),
    ("c2VjcmV0IGVuY3J5cHRlZA==", "encrypted"),
])
def test_bad_connection_strings(conn, fragment):
    with pytest.raises(EventHubsOptionError, match=fragment):
        parse_options({"eventhubs.connectionString": conn})


def test_connection_string_is_required():
    with pytest.raises(EventHubsOptionError, match="eventhubs.connectionString.*required"):
        parse_options({"maxEventsPerTrigger": "5"})


def test_timeouts_are_checked_against_each_other_and_must_be_positive():
    o = opts(**{"eventhubs.receiverTimeout": "PT5S", "eventhubs.operationTimeout": "PT10S"})
    assert (o.receiver_timeout_s, o.operation_timeout_s) == (5, 10)
    with pytest.raises(EventHubsOptionError, match="greater than 'eventhubs.operationTimeout'"):
        opts(**{"eventhubs.receiverTimeout": "PT120S", "eventhubs.operationTimeout": "PT60S"})
    with pytest.raises(EventHubsOptionError, match="must be positive"):
        opts(**{"eventhubs.receiverTimeout": "PT0S"})
    with pytest.raises(EventHubsOptionError, match="eventhubs.receiverTimeout"):
        opts(**{"eventhubs.receiverTimeout": "60"})


@pytest.mark.parametrize("name, value, fragment", [
    ("eventhubs.prefetchCount", "0", r"\[1, 8000\]"),
    ("eventhubs.prefetchCount", "8001", r"\[1, 8000\]"),
    ("eventhubs.prefetchCount", "many", "integer"),
    ("maxEventsPerTrigger", "0", ">= 1"),
    ("eventhubs.useExclusiveReceiver", "yes", "true or false"),
    ("failOnDataLoss", "1", "true or false"),
    ("partitionPreferredLocationStrategy", "hash", "Hash, BalancedHash"),
    ("eventhubs.consumerGroup", " ", "empty"),
])
def test_bad_values_name_the_option_and_what_is_allowed(name, value, fragment):
    with pytest.raises(EventHubsOptionError) as err:
        opts(**{name: value})
    assert name in str(err.value)
    assert __import__("re").search(fragment, str(err.value))


def test_event_positions_in_the_connectors_json_shape():
    # the shapes of the connector's PySpark documentation
    start = {"offset": "-1", "seqNo": -1, "enqueuedTime": None, "isInclusive": True}
    assert opts(**{"eventhubs.startingPosition": json.dumps(start)}).starting_position == \
        EventPosition("offset", "-1", True)
    latest = {"offset": "@latest", "seqNo": -1, "enqueuedTime": None, "isInclusive": True}
    assert opts(**{"eventhubs.startingPosition": json.dumps(latest)}).starting_position.is_end_of_stream
    by_seq = {"offset": None, "seqNo": 100, "enqueuedTime": None, "isInclusive": True}
    assert opts(**{"eventhubs.startingPosition": json.dumps(by_seq)}).starting_position == \
        EventPosition("seqNo", 100, True)
    by_time = {"offset": None, "seqNo": -1, "enqueuedTime": "2024-01-31T12:00:00.000000Z", "isInclusive": True}
    # 2024-01-31T12:00:00Z = 1706702400 s since the epoch
    assert opts(**{"eventhubs.startingPosition": json.dumps(by_time)}).starting_position == \
        EventPosition("enqueuedTime", 1706702400000, True)
    by_epoch = {"enqueuedTime": 1706702400000}
    assert opts(**{"eventhubs.startingPosition": json.dumps(by_epoch)}).starting_position.value == 1706702400000
    exclusive = {"offset": "1234", "isInclusive": False}
    assert opts(**{"eventhubs.startingPosition": json.dumps(exclusive)}).starting_position == \
        EventPosition("offset", "1234", False)


@pytest.mark.parametrize("position, fragment", [
    ({"offset": "-1", "seqNo": 5}, "only one of"),
    ({"seqNo": -1}, "no position set"),
    ({"offset": "latest"}, "'@latest'"),
    ({"seqNo": -2}, "seqNo"),
    ({"enqueuedTime": "yesterday"}, "ISO-8601"),
    ({"offset": "-1", "inclusive": True}, "unknown field 'inclusive'"),
    ({"offset": "-1", "isInclusive": "yes"}, "isInclusive"),
])
def test_bad_event_positions(position, fragment):
    with pytest.raises(EventHubsOptionError, match=fragment):
        opts(**{"eventhubs.startingPosition": json.dumps(position)})


def test_starting_positions_are_keyed_by_the_connectors_name_and_partition_json():
    # as the connector's PySpark docs build them: json.dumps({"ehName": ..., "partitionId": ...}) keys
    positions = {
        json.dumps({"ehName": "hub", "partitionId": 0}): {"offset": "@latest", "seqNo": -1, "enqueuedTime": None,
                                                           "isInclusive": True},
        json.dumps({"ehName": "hub", "partitionId": 2}): {"offset": None, "seqNo": 100, "enqueuedTime": None,
                                                           "isInclusive": True},
    }
    o = opts(**{"eventhubs.startingPositions": json.dumps(positions),
                "eventhubs.startingPosition": json.dumps({"offset": "-1"})})
    assert o.position_for(0).is_end_of_stream
    assert o.position_for(2) == EventPosition("seqNo", 100, True)
    assert o.position_for(1).is_start_of_stream  # startingPosition for the partitions not named


@pytest.mark.parametrize("key, fragment", [
    (json.dumps({"ehName": "other", "partitionId": 0}), "names event hub 'other'"),
    ("0", "not a NameAndPartition"),
    (json.dumps({"ehName": "hub", "partition": 0}), "not a NameAndPartition"),
    (json.dumps({"ehName": "hub", "partitionId": "0"}), "not a NameAndPartition"),
])
def test_bad_starting_positions_keys(key, fragment):
    with pytest.raises(EventHubsOptionError, match=fragment):
        opts(**{"eventhubs.startingPositions": json.dumps({key: {"offset": "-1"}})})


def test_arrow_schema_is_the_one_pyspark_expects_for_the_connector_schema():
    from pyspark.sql.pandas.types import to_arrow_schema

    from harness.backends.eventhubs.spark_source.rows import ARROW_SCHEMA, spark_schema

    assert [(f.name, f.dataType.simpleString()) for f in spark_schema().fields] == [
        ("body", "binary"), ("partition", "string"), ("offset", "string"), ("sequenceNumber", "bigint"),
        ("enqueuedTime", "timestamp"), ("publisher", "string"), ("partitionKey", "string"),
        ("properties", "map<string,string>"), ("systemProperties", "map<string,string>")]
    assert to_arrow_schema(spark_schema(), timezone="UTC").equals(ARROW_SCHEMA)


# ------------------------------------------------------------------------------------------------ planning
def test_split_limit_is_proportional_to_backlog_and_exact():
    # 10+20+30+40 = 100 events, cap 40: 4, 8, 12, 16
    assert split_limit(40, {"0": 10, "1": 20, "2": 30, "3": 40}) == {"0": 4, "1": 8, "2": 12, "3": 16}
    # 3 equal backlogs, cap 10: floors 3,3,3 and the one left goes to the lowest partition id
    assert split_limit(10, {"0": 5, "1": 5, "2": 5}) == {"0": 4, "1": 3, "2": 3}
    # 1+1+98 = 100, cap 10: quotas .1, .1, 9.8 -> 0, 0, 9, then the largest remainder (.8) gets the last one
    assert split_limit(10, {"0": 1, "1": 1, "2": 98}) == {"0": 0, "1": 0, "2": 10}
    # under the cap: everything
    assert split_limit(100, {"0": 3, "1": 0}) == {"0": 3, "1": 0}


def test_split_limit_sum_is_always_min_of_cap_and_backlog():
    import random

    rng = random.Random(7)
    for _ in range(500):
        backlog = {str(p): rng.choice([0, 1, 2, 7, 100, 12345]) for p in range(rng.randint(1, 9))}
        cap = rng.randint(1, 20000)
        shares = split_limit(cap, backlog)
        assert sum(shares.values()) == min(cap, sum(backlog.values()))
        assert all(0 <= shares[p] <= backlog[p] for p in backlog)


def bounds(**parts):
    return {p.lstrip("p"): PartitionBounds(p.lstrip("p"), first, end) for p, (first, end) in parts.items()}


def test_plan_caps_a_batch_and_reports_the_unlimited_end():
    plan = plan_batch_end({"0": 0, "1": 0}, bounds(p0=(0, 30), p1=(0, 10)), 20, True, "hub")
    assert plan.end == {"0": 15, "1": 5} and plan.available == {"0": 30, "1": 10} and plan.warnings == ()
    plan = plan_batch_end({"0": 15, "1": 5}, bounds(p0=(0, 30), p1=(0, 10)), None, True, "hub")
    assert plan.end == {"0": 30, "1": 10}


def test_plan_stays_put_without_new_events_and_starts_new_partitions_at_zero():
    plan = plan_batch_end({"0": 30}, bounds(p0=(0, 30), p1=(0, 4)), None, True, "hub")
    assert plan.end == {"0": 30, "1": 4}


def test_plan_fails_on_aged_out_start_with_failondataloss_true():
    with pytest.raises(EventHubsDataLossError) as err:
        plan_batch_end({"0": 10}, bounds(p0=(15, 20)), None, True, "hub")
    text = str(err.value)
    assert "failOnDataLoss" in text and "Partition 0" in text and "10" in text and "15" in text


def test_plan_moves_past_aged_out_events_with_failondataloss_false():
    plan = plan_batch_end({"0": 10, "1": 0}, bounds(p0=(15, 20), p1=(0, 10)), 6, False, "hub")
    # the backlog counts retained events only (5 + 10, cap 6 -> 2 + 4); p0's range starts at 10 so its task
    # reports 10..14 lost
    assert plan.end == {"0": 17, "1": 4} and len(plan.warnings) == 1
    # the task learns where the retained events began, so it delivers nothing below (even from a buffer)
    assert plan.retained_from == {"0": 15}
    assert plan_ranges({"0": 10, "1": 0}, plan.end, False, "hub", retained_from=plan.retained_from) == [
        Range("0", 10, 17, retained_from=15), Range("1", 0, 4)]
    # everything aged out and nothing new: still move past the loss so it is reported once
    assert plan_batch_end({"0": 10}, bounds(p0=(20, 20)), None, False, "hub").end == {"0": 20}


def test_plan_recreated_hub_resets_with_an_end_below_the_start():
    with pytest.raises(EventHubsDataLossError, match="went back"):
        plan_batch_end({"0": 50}, bounds(p0=(0, 7)), None, True, "hub")
    # new hub holds 7 events: read [0, 7) -> end 7 < start 50
    assert plan_batch_end({"0": 50}, bounds(p0=(0, 7)), None, False, "hub").end == {"0": 7}
    # recreated and already past our start: read at most start - 1 this batch, so the offsets still show it
    assert plan_batch_end({"0": 5}, bounds(p0=(0, 9)), None, False, "hub", recreated=True).end == {"0": 4}
    ranges = plan_ranges({"0": 50, "1": 3}, {"0": 7, "1": 9}, False, "hub")
    assert ranges == [Range("0", 0, 7, reset_from=50), Range("1", 3, 9)]
    with pytest.raises(EventHubsDataLossError, match="failOnDataLoss"):
        plan_ranges({"0": 50}, {"0": 7}, True, "hub")


def test_ranges_after_a_reset_answer_for_the_old_hub_and_carry_the_planned_hub():
    # the old hub was last seen ending at 60 (p0) and 3 (p1); the query stood at 50 and 3: p0 skipped 50..59
    ranges = plan_ranges({"0": 50, "1": 3}, {"0": 7, "1": 9}, False, "hub", old_ends={"0": 60, "1": 3})
    assert ranges == [Range("0", 0, 7, reset_from=50, old_end=60), Range("1", 3, 9)]
    # the new hub is still empty (end 0): a range with no events, only to report the old hub's 50..59
    assert plan_ranges({"0": 50}, {"0": 0}, False, "hub", old_ends={"0": 60}) == [
        Range("0", 0, 0, reset_from=50, old_end=60)]
    assert plan_ranges({"0": 50}, {"0": 0}, False, "hub", old_ends={"0": 50}) == []  # nothing was skipped
    # the enqueued-time span of the hub as planned: its creation, and each partition's last enqueued time
    gen = Generation(1_000, {"0": 5_000, "1": 6_000})
    assert plan_ranges({"0": 0, "1": 2}, {"0": 4, "1": 5}, True, "hub", generation=gen) == [
        Range("0", 0, 4, not_before_ms=1_000, not_after_ms=5_000), Range("1", 2, 5, not_before_ms=1_000,
                                                                         not_after_ms=6_000)]


def test_plan_vanished_partition():
    with pytest.raises(EventHubsDataLossError, match="Partition 3 .* no longer exists"):
        plan_batch_end({"0": 1, "3": 5}, bounds(p0=(0, 1)), None, True, "hub")
    assert plan_batch_end({"0": 1, "3": 5}, bounds(p0=(0, 1)), None, False, "hub").end == {"0": 1}


def test_plan_available_now_ceiling():
    plan = plan_batch_end({"0": 0}, bounds(p0=(0, 100)), None, True, "hub", ceiling={"0": 60})
    assert plan.end == {"0": 60}


def test_offsets_have_the_kafka_source_shape():
    assert offset_json("hub", {"10": 5, "2": 7}) == {"hub": {"2": 7, "10": 5}}
    assert read_offset({"hub": {"0": 3}}, "hub") == {"0": 3}
    with pytest.raises(ValueError, match="another hub"):
        read_offset({"other": {"0": 3}}, "hub")


def test_partition_bounds_from_sdk_properties():
    # shapes of EventHubConsumerClient.get_partition_properties
    never_used = {"id": "0", "beginning_sequence_number": -1, "last_enqueued_sequence_number": -1,
                  "is_empty": True}
    assert PartitionBounds.from_properties(never_used) == PartitionBounds("0", 0, 0)
    live = {"id": "1", "beginning_sequence_number": 15, "last_enqueued_sequence_number": 19, "is_empty": False}
    assert PartitionBounds.from_properties(live) == PartitionBounds("1", 15, 20)
    drained = {"id": "2", "beginning_sequence_number": 20, "last_enqueued_sequence_number": 19, "is_empty": True}
    assert PartitionBounds.from_properties(drained) == PartitionBounds("2", 20, 20)


# ------------------------------------------------------------------------------------------------ locality
def test_java_string_hash_known_values():
    assert java_string_hash("hello") == 99162322  # the textbook example
    assert java_string_hash("") == 0
    assert java_string_hash("h") == 104
    # computed with java.lang.String.hashCode on JDK 17
    assert java_string_hash("events") == -1291329255
    assert java_string_hash("spark-stream-harness") == 1428021267


def test_scala_tuple_hash_matches_the_scala_library():
    # new scala.Tuple2("h", 0).hashCode() etc. run on the JVM with scala-library-2.12.18.jar (the connector's
    # Scala) and with pyspark's scala-library-2.13.18.jar
    assert [scala_tuple2_hash("events", p) for p in range(4)] == \
        [-1502755220, -1121934997, 545557279, -1573815713]
    assert scala_tuple2_hash("h", 0) == 1534227688
    assert scala_tuple2_hash("hub", 3) == -516831240
    assert scala_tuple2_hash("h", 0, scala="2.13") == -772200855
    assert scala_tuple2_hash("hub", 3, scala="2.13") == 817221398


def test_executor_order_is_the_connectors():
    executors = [("10.0.0.2", "1"), ("10.0.0.1", "3"), ("10.0.0.1", "10"), ("10.0.0.2", "2")]
    # host descending, then executor id descending as strings ("3" > "10")
    assert sorted_executors(executors) == [("10.0.0.2", "2"), ("10.0.0.2", "1"), ("10.0.0.1", "3"),
                                           ("10.0.0.1", "10")]


def test_preferred_executor_matches_the_connectors_placement():
    # Expected values: the connector's getBatch placement (sortWith(compare), NameAndPartition.hashCode or
    # ehName.hashCode + partitionId, Math.floorMod) run in Java against scala-library 2.12.18.
    executors = [("10.0.0.2", "1"), ("10.0.0.1", "3"), ("10.0.0.1", "10"), ("10.0.0.2", "2")]
    e22, e21, e13, e110 = ("10.0.0.2", "2"), ("10.0.0.2", "1"), ("10.0.0.1", "3"), ("10.0.0.1", "10")
    assert [preferred_executor("Hash", "events", p, executors) for p in range(8)] == \
        [e22, e110, e110, e110, e13, e21, e22, e22]
    assert [preferred_executor("BalancedHash", "events", p, executors) for p in range(8)] == \
        [e21, e13, e110, e22, e21, e13, e110, e22]
    assert [preferred_executor("Hash", "eh1", p, executors) for p in range(8)] == \
        [e22, e110, e21, e21, e13, e22, e110, e110]
    assert [preferred_executor("BalancedHash", "eh1", p, executors) for p in range(8)] == \
        [e13, e110, e22, e21, e13, e110, e22, e21]


def test_balanced_hash_by_hand_and_no_executors():
    # "events".hashCode = -1291329255 is divisible by 3 (digit sum 39), so partition p lands on sorted[p mod 3];
    # sorted ids on one host, descending: 2, 1, 0
    assert placement("BalancedHash", "events", range(6), ["0", "1", "2"]) == \
        {"0": "2", "1": "1", "2": "0", "3": "2", "4": "1", "5": "0"}
    assert [preferred_executor("Hash", "events", p, ["0", "1", "2"]) for p in range(8)] == \
        ["1", "0", "1", "1", "1", "2", "0", "0"]
    assert preferred_executor("Hash", "events", 0, []) is None  # local mode: no executor peers, no preference
    with pytest.raises(ValueError, match="Hash, BalancedHash"):
        preferred_executor("Random", "events", 0, ["0"])
