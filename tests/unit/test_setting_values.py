"""Values of pass-through settings are judged by the type the software gave each one (harness.settings.values).

Expected types and ranges come from the software's documentation: Spark's configuration page
(spark.sql.adaptive.enabled is a boolean, spark.network.timeout a time, spark.executor.memory a size,
spark.sql.shuffle.partitions a positive int, spark.sql.parquet.compression.codec one of its codecs) and Kafka's
topic/broker/consumer config pages (retention.ms a long of at least -1, cleanup.policy a list of compact/delete,
num.network.threads an int of at least 1, max.poll.records an int of at least 1). The bad values are the issue's.
tests/integration/test_setting_values_real.py holds the same checks to Spark's converters and a broker.
"""
import pytest

from harness.config import ConfigError
from harness.settings import catalogue
from harness.settings.values import KafkaType, SparkType, kafka_value_problem, spark_value_problem

from test_setting_names import load  # one way of loading a scenario text for both catalogues

KAFKA = """
name = "t"
[producers]
rate = { kind = "constant", eps = 100 }
"""


def refused(tmp_path, text, *sets) -> str:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, text, *sets)
    return str(err.value)


def test_the_catalogue_holds_the_documented_types():
    spark = catalogue.spark_names().types
    assert spark["spark.sql.adaptive.enabled"].kind == "boolean"
    assert spark["spark.network.timeout"].kind == "time"
    assert spark["spark.network.timeout"].unit == 10 ** 9  # "120s" by default: a bare number is seconds
    assert spark["spark.executor.memory"].kind == "bytes"
    assert spark["spark.executor.memory"].unit == 1 << 20  # a bare number is MiB (the docs' "in MiB unless")
    assert spark["spark.sql.shuffle.partitions"].kind == "int"
    assert spark["spark.sql.shuffle.partitions"].minimum == ">0"
    codec = spark["spark.sql.parquet.compression.codec"]
    assert codec.kind == "enum" and {"snappy", "gzip", "zstd", "none"} <= set(codec.options) and codec.any_case
    kafka = catalogue.kafka_names().types
    assert (kafka["topic"]["retention.ms"].kind, kafka["topic"]["retention.ms"].minimum) == ("LONG", -1)
    assert set(kafka["topic"]["cleanup.policy"].options) == {"compact", "delete"}
    assert (kafka["broker"]["num.network.threads"].kind, kafka["broker"]["num.network.threads"].minimum) == ("INT", 1)
    assert catalogue.spark_names().consumer_types["max.poll.records"].kind == "INT"


@pytest.mark.parametrize("key,value,why", [
    ("spark.sql.adaptive.enabled", '"maybe"', "not a boolean; allowed: true, false"),
    ("spark.network.timeout", '"1 secnd"', "not a Spark time; allowed: an integer with a suffix us, ms, s"),
    ("spark.executor.memory", '"lots"', "not a Spark size; allowed: an integer with a suffix b, k, m, g"),
    ("spark.sql.shuffle.partitions", "8.5", "not an integer; allowed: an integer from -2147483648 to 2147483647"),
    ("spark.sql.shuffle.partitions", "0", "not positive; allowed: more than 0"),
    ("spark.sql.parquet.compression.codec", '"zip"', "allowed: "),
])
def test_spark_conf_values_spark_would_refuse_are_refused(tmp_path, key, value, why):
    msg = refused(tmp_path, KAFKA + f'[spark.conf]\n"{key}" = {value}\n')
    assert msg.startswith(f"{tmp_path / 's.toml'}: spark.conf.{key}: Spark "), msg  # file, then field
    assert why in msg, msg


def test_spark_conf_values_spark_takes_pass(tmp_path):
    body = ('[spark.conf]\n"spark.sql.adaptive.enabled" = false\n"spark.network.timeout" = "300s"\n'
            '"spark.executor.memory" = "2g"\n"spark.sql.shuffle.partitions" = 8\n'
            '"spark.sql.parquet.compression.codec" = "ZSTD"\n"spark.sql.streaming.minBatchesToRetain" = "+3"\n')
    conf = load(tmp_path, KAFKA + body).spark_conf()
    assert conf["spark.sql.adaptive.enabled"] == "false" and conf["spark.sql.parquet.compression.codec"] == "ZSTD"


def test_a_time_below_the_settings_unit_is_what_spark_reads_as_zero():
    """spark.barrier.sync.timeout is kept in whole seconds and must be positive: '500ms' is 0 seconds to Spark."""
    timeout = SparkType("time", ">0", unit=10 ** 9)
    assert "Spark reads it as 0 seconds" in spark_value_problem("500ms", timeout)
    assert spark_value_problem("2s", timeout) is None and spark_value_problem("5", timeout) is None


@pytest.mark.parametrize("table,key,value,why", [
    ("stream.config", "retention.ms", '"abc"', "not an integer (LONG)"),
    ("stream.config", "retention.ms", "-5", "out of range; allowed: at least -1"),
    ("stream.config", "cleanup.policy", '"dlete"', "allowed: a comma-separated list of"),
    ("backend.broker", "num.network.threads", "0", "out of range; allowed: at least 1"),
    ("spark.source_options", "kafka.max.poll.records", '"many"', "not an integer (INT)"),
])
def test_kafka_values_kafka_would_refuse_are_refused(tmp_path, table, key, value, why):
    msg = refused(tmp_path, KAFKA + f'[{table}]\n"{key}" = {value}\n')
    assert f"s.toml: {table}.{key}: " in msg and why in msg, msg


def test_kafka_values_kafka_takes_pass(tmp_path):
    body = ('[stream.config]\n"retention.ms" = -1\n"cleanup.policy" = "compact, delete"\n'
            '"unclean.leader.election.enable" = "TRUE"\n"min.cleanable.dirty.ratio" = 0.5\n'
            '[backend.broker]\n"num.network.threads" = 3\n'
            '[spark.source_options]\n"kafka.max.poll.records" = 500\n')
    assert load(tmp_path, KAFKA + body).stream.config["retention.ms"] == -1


def test_a_reference_to_an_environment_variable_is_judged_when_expanded():
    assert kafka_value_problem("${RETENTION}", KafkaType("LONG", -1)) is None
    assert spark_value_problem("${TIMEOUT}", SparkType("time")) is None


def test_a_bad_value_given_by_set_is_blamed_on_the_set(tmp_path):
    msg = refused(tmp_path, KAFKA, "spark.conf.spark.sql.adaptive.enabled=maybe")
    assert msg.startswith("--set 'spark.conf.spark.sql.adaptive.enabled=maybe' (on "), msg


def test_the_files_bad_setting_is_blamed_on_the_file_not_on_another_keys_set(tmp_path):
    """A --set of one spark.conf key does not take the blame for another key's typo in the file."""
    text = KAFKA + '[spark.conf]\n"spark.sql.shufle.partitions" = 4\n'
    msg = refused(tmp_path, text, "spark.conf.spark.sql.shuffle.partitions=3")
    assert msg.startswith(f"{tmp_path / 's.toml'}: spark.conf.spark.sql.shufle.partitions: unknown"), msg
    msg = refused(tmp_path, KAFKA + '[stream.config]\n"retention.ms" = "abc"\n', "stream.config.segment.ms=60000")
    assert msg.startswith(f"{tmp_path / 's.toml'}: stream.config.retention.ms: "), msg
