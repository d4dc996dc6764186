"""harness.text.durations agrees with Spark itself on every string in a list of good and bad ones: Spark's own parsers
are asked through py4j (the session's one SparkSession), so the expected values come from Spark, not from the
port under test. A trigger interval the harness accepts is one Spark starts the query with, and one it refuses
Spark would have refused 30 s into the run."""
import pytest

from harness.text.durations import spark_bytes, spark_time_string_ms, spark_trigger_ms

TRIGGERS = [
    "0 seconds", "1 second", "10 seconds", "10 SECONDS", "  5 seconds  ", "\t5 seconds\n", "1 minute 30 seconds",
    "interval 2 hours", "INTERVAL 1 day", "interval  3 minutes", "intervalx 1 second", "interval", "1 week",
    "500 milliseconds", "250 microseconds", "1500 microseconds", "1.5 seconds", ".5 seconds", "-.5 seconds",
    "5. seconds", ". seconds", "0.123456789 seconds", "0.1234567891 seconds", "1.5 minutes", "1 secnd", "banana",
    "-5 seconds", "- 5 seconds", "+5 seconds", "+ 5 seconds", "5seconds", "5", "", "   ", "1 month", "1 year",
    "1 month -1 month", "2 seconds 1 second", "1 second,", "1 seconds s", "1 secondss", "1 hours",
    "10 minute", "1 min", "1 ms", "3 days", "106751991 days", "106751992 days", "2147483647 days",
    "2147483648 days", "9223372036854775807 microseconds", "9223372036854775808 microseconds",
    "1 second -2 seconds", "-1 microsecond", "1 day -86399 seconds", "1 day -86400001 milliseconds",
    "1 week 1 day", "1 MilliSecond", "1e3 seconds", "١ second", "1 hour 1", "interval -", "1 second interval",
]
TIME_STRINGS = ["15m", "30s", "500ms", "500", "1min", "2h", "1d", "100us", "1500us", "15 m", "15M", " 15m ",
                "1.5m", "m", "", "15mins", "-5s", "15x", "9223372036854775807", "9223372036854775808"]
SIZES = ["1g", "512m", "512M", "2gb", "1024k", "1t", "1p", "100", "1.5g", "g", "", "1x", "-1g", " 2g "]


def _spark(call, text):
    """Spark's answer: its value, or None when it throws (the string is refused)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException

    try:
        return call(text)
    except (Py4JJavaError, CapturedException):  # PySpark converts most JVM exceptions to its own
        return None


def _ours(call, text):
    try:
        return call(text)
    except ValueError:
        return None


def test_trigger_intervals_as_spark_reads_them(spark):
    trigger = spark._jvm.org.apache.spark.sql.streaming.Trigger
    disagree = []
    for text in TRIGGERS:
        # PySpark's DataStreamWriter.trigger refuses a blank string before the JVM sees it
        expected = None if not text.strip() else _spark(lambda t: trigger.ProcessingTime(t).intervalMs(), text)
        got = _ours(spark_trigger_ms, text)
        if got != expected:
            disagree.append((text, "spark", expected, "harness", got))
    assert not disagree
    assert _spark(lambda t: trigger.ProcessingTime(t).intervalMs(), "1 minute 30 seconds") == 90_000


def test_time_strings_as_spark_reads_them(spark):
    """JavaUtils.timeStringAsMs (the Kafka source's maxTriggerDelay); the harness also refuses a negative one."""
    java = spark._jvm.org.apache.spark.network.util.JavaUtils
    disagree = []
    for text in TIME_STRINGS:
        expected = _spark(java.timeStringAsMs, text)
        if expected is not None and expected < 0:
            expected = None
        got = _ours(spark_time_string_ms, text)
        if got != expected:
            disagree.append((text, expected, got))
    assert not disagree
    assert java.timeStringAsMs("15m") == 900_000


def test_sizes_as_spark_reads_them(spark):
    """JavaUtils.byteStringAsBytes (spark.driver.memory and the like)."""
    java = spark._jvm.org.apache.spark.network.util.JavaUtils
    disagree = []
    for text in SIZES:
        expected = _spark(java.byteStringAsBytes, text)
        if expected is not None and expected < 0:
            expected = None
        got = _ours(spark_bytes, text)
        if got != expected:
            disagree.append((text, expected, got))
    assert not disagree
    assert java.byteStringAsBytes("2g") == 2 << 30
