"""A long run's report stays small (its series drawn binned, each bin by its extremes) and still shows every
extreme of the run where it was; a short run's report draws every sample, as before. The run is made by hand
(tests/unit/long_run.py) with one planted extreme of each kind, so the expected values come from the input."""
import re

import numpy as np
import pytest

import long_run
from harness.reports import html as report
from harness.reports.binning import bin_columns, bin_size, extreme_rows

BIG = 20_000


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    d = tmp_path_factory.mktemp("long")
    return d, long_run.make(d, BIG)


def _charts(d):
    return {c.id: c for c in report.figures(report.load_run(d))}


def _line(c, label, ax=0):
    line = next(ln for ln in c.axes[ax].get_lines() if ln.get_label() == label)
    return np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)


def test_extreme_rows_keeps_each_bins_lowest_and_highest_in_order():
    # bins [5, 1, 9] [2, 2, 7] [3]: by hand, rows 1 and 2, 3 (first of equals) and 5, 6
    assert extreme_rows([5, 1, 9, 2, 2, 7, 3], 3).tolist() == [1, 2, 3, 5, 6]
    assert extreme_rows([4, float("nan"), 1, 8], 2).tolist() == [0, 2, 3]  # NaN is no extreme
    assert extreme_rows([3, 1, 2], 1).tolist() == [0, 1, 2]
    assert (bin_size(1000), bin_size(1001), bin_size(20_000), bin_size(20_000, 600, per_bin=1)) == (1, 3, 40, 34)
    assert bin_columns(np.array([[1, 5, 2, 0, 9], [7, 0, 0, 3, 1]]), 2).tolist() == [[5, 2, 9], [7, 3, 1]]


def test_a_long_runs_report_is_under_2_mb_and_says_it_is_binned(big):
    d, _ = big
    page = report.build_html(d)
    assert len(page.encode()) < 2_000_000
    binned = dict(re.findall(r'<figure class="chart" id="([^"]+)" data-points="\d+" data-binned="(\d+)"', page))
    assert set(binned) == {"fig-throughput", "fig-latency-time", "fig-lag", "fig-phases", "fig-tasks",
                           "fig-placement", "fig-clients", "fig-resources", "fig-disk"}
    assert binned["fig-phases"] == "40"  # 20,000 batches, at most 1,000 points, two a bin
    assert "Batches binned 40 to a point, each bin&#x27;s fastest and slowest batch drawn." in page
    # what the page states in words is the full data's: the lag's maximum, the disk at the end
    assert f"(max {long_run.LAG_SPIKE:,};" in page
    assert f"at the end {(BIG // 5 - 1) * 1000 / 1e6:,.0f} MB" in page


def test_the_binned_figures_still_draw_every_planted_extreme(big):
    d, planted = big
    charts = _charts(d)
    lat = charts["fig-latency-time"]
    assert len(_line(lat, "max")[0]) <= 1000
    assert _line(lat, "max")[1].max() == long_run.LATENCY_SPIKE_MS
    assert _line(lat, "max")[0][_line(lat, "max")[1].argmax()] == BIG // 2  # at its own second
    assert _line(lat, "p50")[1].min() == long_run.LATENCY_DIP_MS

    top = charts["fig-phases"].ax.collections[-1].get_paths()[0].vertices  # the stack's top layer
    for batch, ms in ((planted["slow_batch"], long_run.SLOW_BATCH_MS), (planted["fast_batch"],
                                                                        long_run.FAST_BATCH_MS)):
        assert any(x == pytest.approx(batch) and y == ms for x, y in top), (batch, ms)

    lag = charts["fig-lag"].ax.images[0].get_array()
    assert lag.shape[1] <= 600 and lag.max() == long_run.LAG_SPIKE

    assert _line(charts["fig-tasks"], "slowest")[1].max() == long_run.SLOW_TASK_MS
    assert _line(charts["fig-resources"], "driver")[1].max() == long_run.RSS_SPIKE_BYTES / 1e6
    assert _line(charts["fig-resources"], "driver")[0][_line(charts["fig-resources"], "driver")[1].argmax()] == \
        planted["spike_sample"]

    bars = [p.get_height() for p in charts["fig-clients"].ax.patches]
    assert len(bars) <= 1000 and max(bars) == long_run.PARTITIONS and min(bars) == 0


def test_a_short_run_is_drawn_whole_as_before(tmp_path):
    n = 300
    planted = long_run.make(tmp_path, n)
    page = report.build_html(tmp_path)
    assert "data-binned" not in page and "binned" not in page
    charts = _charts(tmp_path)
    assert len(_line(charts["fig-latency-time"], "max")[0]) == n
    assert charts["fig-lag"].ax.images[0].get_array().shape == (long_run.PARTITIONS, n)
    assert len(charts["fig-clients"].ax.patches) == n
    top = charts["fig-phases"].ax.collections[-1].get_paths()[0].vertices
    assert sorted({round(x) for x, _ in top}) == list(range(n + 1))  # every batch's start, the last one's end
    assert _line(charts["fig-tasks"], "slowest")[0].size == n + 1
    assert _line(charts["fig-latency-time"], "max")[1].max() == long_run.LATENCY_SPIKE_MS
    assert planted["slow_batch"] == 200
