"""The window_counts oracle on synthetic histories whose right answer is known by construction, interval parsing,
the final watermark, and the query contract's name/param checks."""
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from harness.oracles import final_watermark_ms, window_counts, window_starts
from harness.queries import QueryError, resolve

W = 10_000  # 10 s windows
T0 = 1_795_000_000_000  # a window boundary (multiple of W), epoch ms


def history(per_window: dict[int, int]) -> pd.DataFrame:
    """Acked events: per_window[k] events spread inside window k (starting at T0 + k*W)."""
    rows = [T0 + k * W + (i * 997.123) % W for k, n in per_window.items() for i in range(n)]
    return pd.DataFrame({"intended_ms": np.round(np.array(rows, dtype="float64"), 3)})


def sink(rows: list[tuple[int, int]], batch_ids: list[int] | None = None) -> pd.DataFrame:
    """Output rows (window index, count), as the query would write them."""
    return pd.DataFrame({"window_start_ms": [float(T0 + k * W) for k, _ in rows],
                         "window_end_ms": [float(T0 + (k + 1) * W) for k, _ in rows],
                         "count": np.array([c for _, c in rows], dtype="int64"),
                         "batch_id": batch_ids if batch_ids is not None else list(range(len(rows)))})


def watermark_after(k: int) -> int:
    """A final watermark that has closed windows 0..k-1 and no later one."""
    return T0 + k * W + 1234


def test_counts_equal_to_the_history_pass():
    out = window_counts(history({0: 5, 1: 7, 2: 3, 3: 4}), sink([(0, 5), (1, 7), (2, 3)]), W, watermark_after(3))
    assert out["ok"], out["detail"]
    assert (out["windows_emitted"], out["windows_expected_closed"], out["windows_open"]) == (3, 3, 1)
    assert (out["events_acked"], out["events_in_emitted_windows"], out["events_in_open_windows"]) == (19, 15, 4)


def test_a_wrong_count_fails_naming_the_window():
    out = window_counts(history({0: 5, 1: 7}), sink([(0, 5), (1, 6)]), W, watermark_after(2))
    assert not out["ok"] and out["windows_wrong"] == 1
    assert out["wrong_examples"] == {str(T0 + W): {"got": 6, "expected": 7}}


def test_a_window_with_no_acked_event_emitted_fails():
    out = window_counts(history({0: 5}), sink([(0, 5), (1, 2)]), W, watermark_after(2))
    assert not out["ok"] and out["windows_wrong"] == 1


def test_a_closed_window_never_emitted_fails():
    out = window_counts(history({0: 5, 1: 7, 2: 1}), sink([(0, 5), (2, 1)]), W, watermark_after(3))
    assert not out["ok"] and out["windows_missing"] == 1 and str(T0 + W) in out["detail"]


def test_a_window_emitted_twice_fails_even_with_the_right_count():
    out = window_counts(history({0: 5, 1: 7}), sink([(0, 5), (1, 7), (1, 7)]), W, watermark_after(2))
    assert not out["ok"] and out["windows_twice"] == 1


def test_the_first_emission_is_the_one_judged():
    # written twice: first (batch 3) wrong, then (batch 5) right; append mode allows neither, the first is judged
    out = window_counts(history({0: 5}), sink([(0, 5), (0, 4)], batch_ids=[5, 3]), W, watermark_after(1))
    assert not out["ok"] and out["windows_twice"] == 1 and out["windows_wrong"] == 1


def test_open_windows_are_not_judged_when_absent():
    out = window_counts(history({0: 5, 1: 7, 2: 9}), sink([(0, 5)]), W, watermark_after(1))
    assert out["ok"], out["detail"]
    assert out["windows_open"] == 2 and out["events_in_open_windows"] == 16


def test_a_window_ending_exactly_at_the_watermark_is_closed():
    out = window_counts(history({0: 5, 1: 7}), sink([(0, 5)]), W, T0 + 2 * W)
    assert not out["ok"] and out["windows_missing"] == 1


def test_nothing_emitted_is_not_a_pass():
    out = window_counts(history({0: 5}), sink([]), W, T0)  # watermark closed nothing
    assert not out["ok"] and "no window emitted" in out["detail"]


def test_an_empty_sink_without_columns_is_judged_not_crashed():
    empty = pd.DataFrame({"batch_id": pd.Series(dtype="int64"), "commit_ms": pd.Series(dtype="float64")})
    out = window_counts(history({0: 5}), empty, W, watermark_after(1))
    assert not out["ok"] and out["windows_missing"] == 1


def test_window_assignment_at_boundaries_matches_exact_decimal_arithmetic():
    texts = [str(Decimal(T0) + Decimal(d)) for d in ("0.000", "-0.001", "0.001", "9999.999", "10000.000",
                                                     "10000.001", "-0.0005", "4999.5", "19999.9995")]
    got = window_starts(np.array([float(t) for t in texts]), W)
    for text, start in zip(texts, got):
        instant = int(Decimal(text).to_integral_value(rounding="ROUND_FLOOR"))  # truncated to the millisecond
        assert start == instant - instant % W, text
    assert list(got[:3]) == [T0, T0 - W, T0]  # on the boundary: the next window; 1 us before it: the previous


@pytest.mark.parametrize("window", [7_000, 60_000, 1])
def test_window_starts_agree_with_integer_floor_on_random_times(window):
    rng = np.random.default_rng(window)
    ms_int = rng.integers(T0, T0 + 3_600_000, 5000)
    micros = rng.integers(0, 1000, 5000)
    values = np.array([float(f"{m}.{u:03d}") for m, u in zip(ms_int, micros)])
    assert (window_starts(values, window) == ms_int - ms_int % window).all()


def test_final_watermark_is_the_last_reported_in_exact_milliseconds():
    progress = [{"batchId": 0}, {"batchId": 1, "eventTime": {"watermark": "1970-01-01T00:00:00.000Z"}},
                {"batchId": 2, "eventTime": {"watermark": "2026-11-22T15:05:45.971Z"}},
                {"batchId": 3, "eventTime": {"watermark": "2026-11-22T15:05:40.000Z"}}]
    assert final_watermark_ms(progress) == 1_795_359_945_971
    assert final_watermark_ms([{"batchId": 0}]) == 0


def test_query_names_and_params_are_checked():
    with pytest.raises(QueryError, match="allowed: passthrough, windowed_count, dedup"):
        resolve("windowd_count")
    with pytest.raises(QueryError, match="cannot import"):
        resolve("no_such_module_here:fn")
    assert resolve("windowed_count").oracle == "window_counts" and resolve("dedup").oracle == "events"
    wc = resolve("windowed_count")
    assert wc.check_params({}) is None and wc.check_params({"window": "1 minute", "watermark": "0 seconds"}) is None
    assert "window" in wc.check_params({"window": "10s"})
    assert "whole number of milliseconds" in wc.check_params({"window": "250 microseconds"})
    assert "not known" in wc.check_params({"size": 3})
    assert "watermark" in resolve("dedup").check_params({"watermark": "soon"})
    assert resolve("passthrough").check_params({}) is None


def write_run(run_dir, frame: pd.DataFrame, watermarks: list[str]):
    """A run directory as the query leaves it: one Parquet file listed in the sink's own log, and progress."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    data = run_dir / "sink" / "part-0.parquet"
    (run_dir / "sink" / "_spark_metadata").mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), data)
    (run_dir / "sink" / "_spark_metadata" / "0").write_text(
        "v1\n" + json.dumps({"path": f"file://{data}", "action": "add"}) + "\n")
    (run_dir / "progress.jsonl").write_text("".join(
        json.dumps({"batchId": i, "eventTime": {"watermark": w}}) + "\n" for i, w in enumerate(watermarks)))


def test_run_oracle_reads_the_sink_and_the_reported_watermark(tmp_path):
    from harness.oracles import run_oracle

    out = sink([(0, 5), (1, 7)]).drop(columns="batch_id")
    write_run(tmp_path, out, ["1970-01-01T00:00:00.000Z", "2026-11-18T11:07:01.234Z"])  # T0 + 2W + 1234 ms
    result = run_oracle("window_counts", history({0: 5, 1: 7, 2: 4}), tmp_path, {"window": "10 seconds"})
    assert result["ok"], result["detail"]
    assert result["final_watermark_ms"] == watermark_after(2) and result["windows_open"] == 1
    wrong = run_oracle("window_counts", history({0: 5, 1: 8, 2: 4}), tmp_path, {"window": "10 seconds"})
    assert not wrong["ok"] and wrong["windows_wrong"] == 1


def test_run_oracle_calls_a_users_oracle_next_to_its_scenario(tmp_path):
    from pathlib import Path

    from harness.oracles import run_oracle
    from harness.queries import importable

    importable(Path(__file__).resolve().parent.parent / "fixtures" / "user_queries")
    acks = pd.DataFrame({"producer": [0] * 6, "seq": range(6), "intended_ms": [1.0] * 6})
    write_run(tmp_path, pd.DataFrame({"producer": [0, 0], "seq": [0, 3], "tag": ["r0", "r3"]}), [])
    assert resolve("my_job:build").oracle == "my_job:sampled_exactly"
    assert run_oracle("my_job:sampled_exactly", acks, tmp_path, {"every": 3})["ok"]
    assert not run_oracle("my_job:sampled_exactly", acks, tmp_path, {"every": 2})["ok"]
