"""report.html and compare.html from what a run directory holds, without a browser (the browser test opens real
runs' pages)."""
import json
import re

from harness.reports.compare_html import swept_charts
from harness.reports.html import build_html, fault_spans

UNJUDGED = {"scenario": "steady", "backend": "kafka", "verdict": "unjudged",
            "unjudged_reason": "reading the sink failed", "checks": [], "counts": {"produced": 10}}


def test_a_run_that_could_not_be_judged_says_so_and_draws_nothing_it_lacks(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps(UNJUDGED))
    page = build_html(tmp_path)
    assert "UNJUDGED" in page and "The run could not be judged: reading the sink failed." in page
    assert 'class="chart"' not in page and "0 figures" in page
    assert "http://" not in page and "https://" not in page and "<script" not in page


def test_faults_become_spans_on_the_run_time_axis():
    result = {"faults": [{"kind": "broker", "n": 1, "inject_started_at": 110.0, "injected_at": 111.0,
                          "healed_at": 120.0},
                         {"kind": "topic", "n": 2, "injected_at": 130.0, "healed_at": None},
                         {"kind": "network", "n": 3, "injected_at": None}]}
    assert fault_spans(result, 100.0) == [(10.0, 20.0, "broker #1"), (30.0, None, "topic #2")]


def test_a_sweep_draws_each_figure_against_the_swept_setting():
    runs = [{"values": {"spark.source_options.maxOffsetsPerTrigger": m, "spark.source_options.minPartitions": p},
             "verdict": "pass" if m < 20000 else "fail", "process_rps": 1000.0 + m / 10, "latency_p99_ms": 900.0,
             "max_lag": None} for p in (8, 32) for m in (2000, 20000, 200000)]
    sweep = {"scenario": "skew-tuning", "verdict": "fail", "keys": ["spark.source_options.maxOffsetsPerTrigger",
                                                                    "spark.source_options.minPartitions"],
             "runs": runs}
    charts = {c.id: c for c in swept_charts(sweep)}
    assert set(charts) == {"fig-swept-process-rps", "fig-swept-latency-p99-ms"}  # max_lag has no value anywhere
    c = charts["fig-swept-process-rps"]
    assert c.points == 6 and c.ax.get_xscale() == "log"  # 2,000 .. 200,000
    assert [t.get_text() for t in c.ax.get_xticklabels()] == ["2000", "20000", "200000"]
    assert sorted(line.get_label() for line in c.ax.get_legend().get_lines()) == ["minPartitions=32",
                                                                                  "minPartitions=8"]
    svg = c.html()
    assert svg.startswith('<figure class="chart" id="fig-swept-process-rps" data-points="6">')
    assert len(re.findall(r'<g id="data-fig-swept-process-rps-\d+"', svg)) == 2


def test_clients_created_per_batch_come_from_the_proxy_on_kafka_and_the_source_on_event_hubs():
    from harness.reports.html import clients_chart

    kafka = {"result": {"consumers": {"per_batch": {"0": {"created": 0}, "1": {"created": 8}, "2": {"created": 0}}}}}
    c = clients_chart(kafka)
    assert c.title == "Kafka consumers per batch" and c.points == 3 and "created 8." in c.caption
    eh = {"result": {"source": {"per_batch": {"1": {"created": 4, "reused": 0}, "2": {"created": 1, "reused": 3,
                                                                                       "mismatch": 1}}}}}
    c = clients_chart(eh)
    assert c.title == "Event Hubs receivers per batch" and c.points == 6  # created, reused, mismatch x 2 batches
    assert "created 5, reused 3, mismatch 1" in c.caption
    assert clients_chart({"result": {}}) is None
