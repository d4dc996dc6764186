"""harness bench eh-source's figures from its batches: the fixed cost per batch is the intercept of batch time
against rows, the phase medians say where a small batch's time goes (hand-computed values)."""
import pytest

from harness.bench.eh_source import overhead_fit, phase_medians


def test_overhead_is_the_intercept_of_time_against_rows():
    # time = 300 ms + 0.05 ms per event, exactly, at three sizes
    slope, intercept = overhead_fit([(1000, 350.0), (1000, 350.0), (40000, 2300.0), (5000, 550.0)])
    assert slope * 1000 == pytest.approx(50.0)
    assert intercept == pytest.approx(300.0)


def test_overhead_needs_two_batch_sizes():
    with pytest.raises(ValueError, match="at least two sizes"):
        overhead_fit([(1000, 350.0), (1000, 420.0)])


def test_phase_medians_over_the_batches_that_report_each_phase():
    batches = [{"latestOffset": 5.0, "addBatch": 200.0, "triggerExecution": 300.0, "rows": 1000},
               {"latestOffset": 9.0, "addBatch": 260.0, "triggerExecution": 400.0, "rows": 1000},
               {"latestOffset": 4.0, "addBatch": 900.0, "triggerExecution": 1000.0, "walCommit": 40.0, "rows": 1000}]
    assert phase_medians(batches) == {"latestOffset": 5.0, "walCommit": 40.0, "addBatch": 260.0,
                                      "triggerExecution": 400.0}
