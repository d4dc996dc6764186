"""The three duration syntaxes (harness.text.durations): Spark's interval words, ISO-8601 as java.time.Duration reads
it, and the command line's; each with what it must refuse."""
import pytest

from harness.text.durations import cli_duration_s, iso_duration_s, spark_interval_ms


@pytest.mark.parametrize("text,ms", [("10 seconds", 10_000), ("1 second", 1000), ("5 minutes", 300_000),
                                     ("1 minute 30 seconds", 90_000), ("interval 2 hours", 7_200_000),
                                     ("500 milliseconds", 500), ("1.5 seconds", 1500), ("1 day", 86_400_000),
                                     ("1 week", 604_800_000), ("250 microseconds", 0.25), ("10 SECONDS", 10_000)])
def test_interval_words(text, ms):
    assert spark_interval_ms(text) == ms


@pytest.mark.parametrize("text", ["10s", "", "ten seconds", "3 months", "10", "10 seconds and more"])
def test_bad_intervals_are_refused(text):
    with pytest.raises(ValueError):
        spark_interval_ms(text)


@pytest.mark.parametrize("text, seconds", [
    ("PT60S", 60), ("PT1M30S", 90), ("PT2H", 7200), ("P1D", 86400), ("P1DT1H", 90000), ("PT0.5S", 0.5),
    ("pt10s", 10), ("PT1.250S", 1.25), ("PT00H03M20S", 200),  # the connector's PySpark docs' strftime form
])
def test_iso8601_durations_as_java_time_duration(text, seconds):
    assert iso_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["60", "60s", "PT", "P", "PT1X", "1 minute", "PTS"])
def test_durations_that_java_rejects(text):
    with pytest.raises(ValueError):
        iso_duration_s(text)


@pytest.mark.parametrize("text,seconds", [("2h", 7200), ("10m", 600), ("90s", 90), ("1h30m", 5400), ("600", 600),
                                          ("1.5h", 5400)])
def test_durations(text, seconds):
    assert cli_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "2 days", "10x", "0", "m"])
def test_bad_durations_are_named(text):
    with pytest.raises(ValueError, match="duration"):
        cli_duration_s(text)
