"""harness bench checker's memory rows: peak RSS judged against 1.5 GB at every size, and its growth from 10M events
to the largest size judged flat (ratio <= 1.2); a quick run (one size) has no slope to show."""
from harness.bench import check_rows
from harness.bench.checker import _rows


def _sizes(rss: dict[int, float]) -> dict:
    return {str(n): {"new": {"seconds": n / 2e6, "peak_rss_mb": mb}} for n, mb in rss.items()}


def test_growth_from_10m_to_the_largest_size_is_judged_against_1_2():
    rows = {r["name"]: r for r in check_rows({"rows": _rows(_sizes({1_000_000: 300.0, 10_000_000: 800.0,
                                                                    100_000_000: 920.0}))})}
    grown = rows["checker peak RSS growth (10M -> 100M events)"]
    assert (grown["value"], grown["reference"]) == (920.0, 800.0)
    assert abs(grown["ratio"] - 1.15) < 1e-12 and grown["ok"] is True  # 920 / 800, by hand
    assert rows["checker peak RSS (100M events)"]["ok"] is True  # 920 <= 1536

    steep = {r["name"]: r for r in _rows(_sizes({10_000_000: 800.0, 100_000_000: 1_000.0}))}
    assert steep["checker peak RSS growth (10M -> 100M events)"]["ok"] is False  # 1.25 > 1.2
    over = {r["name"]: r for r in _rows(_sizes({10_000_000: 1_500.0, 100_000_000: 1_600.0}))}
    assert over["checker peak RSS (100M events)"]["ok"] is False and over["checker peak RSS (10M events)"]["ok"]


def test_a_quick_run_has_no_growth_row():
    names = [r["name"] for r in _rows(_sizes({1_000_000: 300.0}))]
    assert names == ["checker events/s (1M events)", "checker peak RSS (1M events)"]


def test_a_childs_peak_rss_is_its_own_not_the_parents_high_water_mark():
    """Linux carries a parent's RSS high-water mark over the vfork and exec of subprocess into the child's
    ru_maxrss: the bench once reported its own 2 GB (generating 100M events) as the checker's. The child here
    touches 100 MB after its parent touched 800 MB; the kernel's ru_maxrss shows the trap, peak_rss_mb does not."""
    import json
    import subprocess
    import sys

    import numpy as np

    big = np.ones(800 * 2**20, dtype=np.uint8)  # 800 MB touched by the parent
    del big
    code = ("import json, resource, numpy as np; from harness.bench.checker import peak_rss_mb; "
            "a = np.ones(100 * 2**20, dtype=np.uint8); "
            "print(json.dumps([peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))")
    own, kernel = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                            check=True).stdout)
    assert kernel >= 800  # the parent's mark, inherited
    assert 100 <= own < 800  # the child's 100 MB and its imports, not the parent's 800
