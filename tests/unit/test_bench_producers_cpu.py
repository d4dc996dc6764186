"""The producers bench's CPU per event: from a producer's stats rows over the whole seconds of a window."""
import json
import math

from harness.bench.producers import cpu_per_event


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_cpu_per_event_over_the_whole_seconds_of_the_window(tmp_path):
    # rows for seconds 99..104; the window [100.4, 104.4) holds the whole seconds 101, 102, 103
    write_rows(tmp_path / "stats-0.jsonl", [
        {"t": 99, "sent": 5, "cpu_s": 1.0}, {"t": 100, "sent": 700, "cpu_s": 1.5},
        {"t": 101, "sent": 1000, "cpu_s": 2.5}, {"t": 102, "sent": 2000, "cpu_s": 3.0},
        {"t": 103, "sent": 1000, "cpu_s": 4.5}, {"t": 104, "sent": 300, "cpu_s": 5.0}])
    # CPU from the end of second 100 (1.5) to the end of second 103 (4.5): 3.0 s for 4,000 events
    assert cpu_per_event(tmp_path, 100.4, 4.0) == 3.0 / 4000


def test_a_window_without_its_rows_has_no_figure(tmp_path):
    write_rows(tmp_path / "stats-0.jsonl", [{"t": 101, "sent": 10, "cpu_s": 1.0}])
    assert math.isnan(cpu_per_event(tmp_path, 100.4, 4.0))
