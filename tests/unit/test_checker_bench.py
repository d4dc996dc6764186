"""harness bench checker: its synthetic history holds exactly the defects it plants, the engine finds them from
the real files (Arrow history, Parquet sink and its log), and its rows have the bench table's shape."""
from harness.bench import check_rows
from harness.bench.checker import GOAL_EPS, _rows, check_new, generate, planted


def test_the_engine_finds_what_the_generator_planted(tmp_path):
    n = 210_000
    generate(tmp_path, n)
    want = planted(n)
    assert (want["lost"], want["duplicates"], want["failed"]) == (2, 4, 1)  # hand-counted from the periods
    got = check_new(str(tmp_path))["counts"]
    assert {k: got[k] for k in want} == want
    assert got["misplaced"] == got["order_violations"] == got["delivered_unacked"] == 0


def test_rows_have_the_table_shape_and_judge_the_goals():
    sizes = {"1000000": {"new": {"seconds": 0.5, "peak_rss_mb": 400.0},
                         "old": {"seconds": 10.0, "peak_rss_mb": 900.0}},
             "10000000": {"new": {"seconds": 20.0, "peak_rss_mb": 1700.0}}}
    rows = {r["name"]: r for r in check_rows({"rows": _rows(sizes)})}
    fast, slow = rows["checker events/s (1M events)"], rows["checker events/s (10M events)"]
    assert fast["value"] == 2_000_000 and fast["reference"] == 100_000 and fast["ratio"] == 20 and fast["ok"]
    assert slow["value"] == 500_000 and slow["ok"] is False and GOAL_EPS == 1_000_000
    assert rows["checker peak RSS (1M events)"]["ok"] and rows["checker peak RSS (10M events)"]["ok"] is False


def test_the_live_evaluation_bench_checks_the_engines_counts_at_every_step():
    from harness.bench.checker import LIVE_EPS, LIVE_STEP_S, measure_live

    live = measure_live(3)
    assert live["events"] == 3 * int(LIVE_EPS * LIVE_STEP_S) and len(live["seconds"]) == 3
    assert live["worst_s"] == max(live["seconds"]) > 0
