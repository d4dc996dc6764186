"""Keeping up judged as what it means, and the batches' room apart from it.

A query whose lag is flat and that processes what is offered keeps up whatever its batches' length (`sustained`);
batches longer than a processingTime trigger mean no headroom (`headroom`: listed, not required unless the
scenario sets `checks.min_headroom`). Synthetic runs come from test_sustained's construction (a broker filled at
the offered rate, batches that read what it holds); the headroom figures are set by hand and their expected
details and limits worked out here from the rule (the longest p50 that leaves the fraction idle is
(1 - min_headroom) x interval; the fraction left idle is 1 - p50 / interval).
"""
from types import SimpleNamespace

import pytest

from harness.check import verdict_of
from harness.checkers.catalogue import check_names
from harness.checkers.sustained import Thresholds, criteria, headroom, headroom_check, sustained_check
from harness.cli import main
from harness.config import ConfigError, load_scenario
from test_sustained import figures, synthetic_run

TH = Thresholds(trigger_interval_ms=1000.0)
NOT_REQUIRED = "; not required without checks.min_headroom"


# ---------------------------------------------------------------------------------------------- the rule
def test_a_flat_lag_with_batches_over_the_trigger_keeps_up_and_says_it_has_no_headroom():
    """3,000 events/s, batches of 1,082 ms on a 1 s trigger: Spark starts each at the end of the last (every
    1.082 s), and each reads all there is. Starts at 10.82 s ... 38.95 s fall in the 10-40 s window: 27 batches."""
    f = figures(*synthetic_run(rate=3000.0, batch_s=1.082))
    check = sustained_check(f, TH, None)
    assert check.ok is True and check.detail.startswith("kept up: lag_growth: lag fell")
    assert [c["name"] for c in check.figures["criteria"]] == ["lag_growth", "processed_rate"]
    room = headroom_check(f, TH, None)
    assert room.detail == ("no headroom: batch p50 1,082 ms > the 1,000 ms trigger: a burst will fall behind "
                           f"(27 batches{NOT_REQUIRED})")
    assert (room.ok, room.status, room.value, room.limit) == (False, "not required", 1082.0, 1000.0)
    assert room.figures["idle_fraction"] == pytest.approx(1 - 1082 / 1000)  # -0.082: overrun by 8.2%
    assert verdict_of([check, room]) == "pass"


def test_a_growing_lag_fails_sustained_whatever_the_headroom_says():
    """3,000 offered, at most 2,400 processed: the lag grows by about 600 events/s and more (each batch's fixed
    0.4 s on top), which fails `sustained`; its long batches are no headroom as well."""
    f = figures(*synthetic_run(rate=3000.0, capacity=2400.0))
    check = sustained_check(f, TH, None)
    assert check.ok is False and check.detail.startswith("lag_growth: lag grew")
    parts = {c["name"]: c for c in check.figures["criteria"]}
    assert parts["lag_growth"]["value"] > 600 and parts["processed_rate"]["status"] == "fail"
    assert headroom_check(f, TH, None).detail.startswith("no headroom: batch p50 ")
    assert verdict_of([check, headroom_check(f, TH, None)]) == "fail"


@pytest.mark.parametrize("min_headroom,status,limit,detail", [
    (None, "not required", 1000.0,
     f"batch p50 750 ms <= the 1,000 ms trigger: 25% of it idle at the median (30 batches{NOT_REQUIRED})"),
    (0.0, "pass", 1000.0, "batch p50 750 ms <= the 1,000 ms trigger: 25% of it idle at the median (30 batches)"),
    (0.2, "pass", 800.0, "batch p50 750 ms <= the 1,000 ms trigger: 25% of it idle at the median, need 20% idle "
                         "(p50 <= 800 ms) (30 batches)"),
    (0.25, "pass", 750.0, "batch p50 750 ms <= the 1,000 ms trigger: 25% of it idle at the median, need 25% idle "
                          "(p50 <= 750 ms) (30 batches)"),
    (0.3, "fail", 700.0, "too little headroom: batch p50 750 ms leaves 25% of the 1,000 ms trigger idle, need 30% "
                         "idle (p50 <= 700 ms) (30 batches)"),
])
def test_min_headroom_makes_the_check_required_and_judges_the_idle_fraction(min_headroom, status, limit, detail):
    room = headroom_check({"batch_p50_ms": 750.0, "batches": 30}, TH, min_headroom)
    assert (room.status, room.value, room.limit, room.detail) == (status, 750.0, limit, detail)
    assert room.figures["idle_fraction"] == pytest.approx(0.25) and room.figures["min_headroom"] == min_headroom


def test_min_headroom_zero_is_a_median_within_the_trigger():
    assert headroom_check({"batch_p50_ms": 1000.0, "batches": 30}, TH, 0.0).status == "pass"
    over = headroom_check({"batch_p50_ms": 1082.0, "batches": 30}, TH, 0.0)
    assert over.status == "fail" and over.detail == ("no headroom: batch p50 1,082 ms > the 1,000 ms trigger: a burst "
                                                     "will fall behind (30 batches)")
    assert verdict_of([over]) == "fail"


def test_the_largest_min_headroom_keeps_its_exact_bound():
    """0.9 of 1,000 ms idle leaves a 100 ms median (in floating point (1 - 0.9) x 1,000 is 99.99999999999997)."""
    assert headroom_check({"batch_p50_ms": 100.0, "batches": 30}, TH, 0.9).status == "pass"
    tight = headroom_check({"batch_p50_ms": 101.0, "batches": 30}, TH, 0.9)
    assert tight.status == "fail" and "leaves 89.9% of the 1,000 ms trigger idle, need 90% idle" in tight.detail


def test_too_few_batches_cannot_pass_but_an_overrun_fails_on_any_number():
    few = headroom_check({"batch_p50_ms": 500.0, "batches": 2}, TH, 0.2)
    assert few.status == "unknown" and few.detail.startswith("unknown: 2 batches with data in the judged window "
                                                             "(need 3 to pass): batch p50 500 ms")
    assert verdict_of([few]) != "pass"
    one = headroom_check({"batch_p50_ms": 18_081.0, "batches": 1}, TH, 0.2)
    assert one.status == "fail" and one.detail.endswith("(1 batch)")
    none = headroom_check({"batch_p50_ms": None, "batches": 0}, TH, 0.2)
    assert none.status == "unknown" and "no batch with data" in none.detail


def test_real_time_mode_keeps_its_own_batch_criterion_inside_sustained():
    """Real-time batches last their 5 s interval by design: 5,200 ms is the interval + 200 ms between reads,
    within 20% of it: kept up (that is not headroom, and no headroom is listed for realTime)."""
    f = figures(*synthetic_run(rate=1000.0, seconds=60, trigger_s=5.0, batch_s=5.2), start=10.0, end=60.0)
    rtm = {c.name: c for c in criteria(f, Thresholds(5000.0, real_time=True))}
    assert list(rtm) == ["lag_growth", "processed_rate", "batch_duration"] and all(c.ok for c in rtm.values())
    assert rtm["batch_duration"].value == pytest.approx(200.0)


# ---------------------------------------------------------------------------------------------- the checker
def run_view(trigger: dict, min_headroom=None, p50=750.0, detected=True):
    """What `headroom` reads of a run's view (harness.analysis.runview.RunView)."""
    scenario = load_scenario("steady", [f"spark.trigger={{kind=\"{trigger['kind']}\", "
                                        f"interval=\"{trigger['interval']}\"}}"]
                             + ([f"checks.min_headroom={min_headroom}"] if min_headroom is not None else []))[0]
    perf = SimpleNamespace(trigger_interval_ms=1000.0, sustain={"batch_p50_ms": p50, "batches": 30},
                           steady={"detected": detected, "reason": "MSER-5 needs at least 20 s"})
    return SimpleNamespace(scenario=scenario, performance=perf, acked_measured=1000)


def test_the_checker_lists_headroom_for_an_interval_and_requires_it_with_min_headroom():
    one_second = {"kind": "processingTime", "interval": "1 second"}
    [listed] = headroom(run_view(one_second))
    assert listed.status == "not required" and listed.value == 750.0
    [required] = headroom(run_view(one_second, min_headroom=0.3))
    assert required.status == "fail" and required.detail.startswith("too little headroom")
    [cold] = headroom(run_view(one_second, min_headroom=0.2, detected=False))
    assert cold.status == "unknown" and cold.detail.startswith("unknown: MSER-5 needs at least 20 s")
    assert cold.value == 750.0  # the figures are kept
    assert headroom(run_view({"kind": "processingTime", "interval": "0 seconds"})) == []


def test_the_catalogue_lists_headroom_after_sustained_only_for_a_processing_time_interval():
    names = check_names(load_scenario("steady")[0])
    assert names[names.index("sustained") + 1] == "headroom"
    assert "headroom" not in check_names(load_scenario("rtm-steady")[0])
    assert "headroom" not in check_names(load_scenario("catch-up")[0])  # availableNow
    zero = load_scenario("steady", ['spark.trigger={kind="processingTime", interval="0 seconds"}'])[0]
    assert "headroom" not in check_names(zero)


# ---------------------------------------------------------------------------------------------- the setting
def test_min_headroom_is_read_from_the_scenario():
    assert load_scenario("steady", ["checks.min_headroom=0.2"])[0].checks.min_headroom == 0.2
    assert load_scenario("steady")[0].checks.min_headroom is None


@pytest.mark.parametrize("sets,expected", [
    (["checks.min_headroom=1.5"], "checks.min_headroom: the fraction of the trigger interval the median batch must "
                                  "leave idle, from 0 (batch p50 within the trigger) to 0.9, e.g. 0.2 (got 1.5)"),
    (["checks.min_headroom=-0.1"], "from 0 (batch p50 within the trigger) to 0.9, e.g. 0.2 (got -0.1)"),
    (["checks.min_headroom=nan"], "checks.min_headroom: Input should be a finite number (got nan)"),
    (["checks.min_headroom=0.2", 'spark.trigger={kind="processingTime", interval="0 seconds"}'],
     "checks.min_headroom = 0.2 needs a processingTime trigger with an interval (spark.trigger is kind = "
     "'processingTime', interval = '0 seconds')"),
    (["checks.min_headroom=0.2", 'spark.trigger={kind="availableNow"}'], "kind = 'availableNow'"),
])
def test_a_bad_min_headroom_exits_2_naming_the_field(capsys, sets, expected):
    argv = ["validate", "steady"]
    for s in sets:
        argv += ["--set", s]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_real_time_mode_takes_no_min_headroom():
    with pytest.raises(ConfigError, match="checks.min_headroom = 0.2 needs a processingTime trigger with an "
                                          "interval \\(spark.trigger is kind = 'realTime'"):
        load_scenario("rtm-steady", ["checks.min_headroom=0.2"])


# ---------------------------------------------------------------------------------------------- shown
def test_the_reports_show_the_headroom_under_keeping_up_and_the_checks_table_lists_it():
    from harness.reports.html import performance_html
    from harness.reports.report import performance_section

    f = figures(*synthetic_run(rate=3000.0, batch_s=1.082))
    checks = [sustained_check(f, TH, None).as_dict(), headroom_check(f, TH, None).as_dict()]
    result = {"checks": checks}
    line = ("Headroom (not required; how much of the trigger the median batch leaves idle, not a criterion of keeping "
            "up): no headroom: batch p50 1,082 ms > the 1,000 ms trigger: a burst will fall behind (27 batches"
            f"{NOT_REQUIRED})")
    md = "\n".join(performance_section(result))
    assert "## Keeping up: pass" in md and line in md
    assert '<p id="headroom">' + line.replace(">", "&gt;") + "</p>" in performance_html(result)
