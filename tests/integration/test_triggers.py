"""`once` and `availableNow`: the traffic goes first, then the query starts and catches up on the backlog (the
runner's drain phase), and the verdict says whether it read everything. Each is one real run through the CLI,
judged on what the run directory holds (Spark's own progress records, the timeline), and its result.json is
checked against the typed model.

Also here: a run whose judging breaks still leaves a result.json (verdict `unjudged`, with the reason) and the CLI
exits non-zero.
"""
import json
import math
import os
import socket
from datetime import datetime

import pytest

from harness.records.result import SCHEMA_VERSION, RunResult
from harness.files.jsonl import read_jsonl

from scenario_runs import run

pytestmark = pytest.mark.integration


def typed(result: dict) -> RunResult:
    """result.json as written validates against the one typed model, and says which schema it follows."""
    assert result["schema_version"] == SCHEMA_VERSION
    model = RunResult.model_validate(result)
    assert model.as_dict() == result
    return model


def batches_with_rows(out) -> list[dict]:
    return [p for p in read_jsonl(out / "progress.jsonl") if p["numInputRows"] > 0]


def assert_traffic_first(out):
    """The query started only after the traffic ended, and its first batch ran after that."""
    events = read_jsonl(out / "timeline.jsonl")
    names = [e["event"] for e in events]
    assert names.index("traffic_end") < names.index("query_started"), names
    traffic_end = next(e["t"] for e in events if e["event"] == "traffic_end")
    first = read_jsonl(out / "progress.jsonl")[0]
    assert datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00")).timestamp() > traffic_end


@pytest.mark.slow  # `make test-slow`: keeps `make test` within its time budget
def test_available_now_catches_up_in_capped_batches(harness_env, tmp_path):
    """The catch-up scenario, short: 15 s at 4,000 events/s is a backlog of 60,000 events, read by availableNow in
    batches of at most maxOffsetsPerTrigger = 15,000."""
    out = tmp_path / "catch-up"
    proc, result = run(harness_env, out, "catch-up", "producers.duration_s=15")
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    typed(result)
    c = result["counts"]
    assert c["acked"] == c["delivered_unique"] == c["produced"] > 0 and c["lost"] == 0 and c["duplicates"] == 0
    assert result["query"]["trigger"] == "availableNow" and result["query"]["final_state"] == "drained"
    assert_traffic_first(out)
    cap = 15000
    batches = batches_with_rows(out)
    assert sum(b["numInputRows"] for b in batches) == c["acked"]
    assert all(b["numInputRows"] <= cap for b in batches), [b["numInputRows"] for b in batches]
    assert len(batches) >= max(2, math.ceil(c["acked"] / cap))
    check = next(x for x in result["checks"] if x["name"] == "batch_cap")
    assert check["ok"] and f"{len(batches)} batches read rows" in check["detail"]
    assert sum(result["end_offsets"].values()) == c["acked"]
    assert result["lag_events"]["max"] >= c["acked"] * 0.9 and result["lag_events"]["final"] == 0


@pytest.mark.slow  # `make test-slow`: keeps `make test` within its time budget
def test_once_reads_the_whole_backlog_in_one_batch(harness_env, tmp_path):
    """Trigger.Once ignores read limits: with maxOffsetsPerTrigger below the backlog it still reads everything in
    one batch (a query that honoured the cap would stop after 5,000 rows, not drained, and the run would fail)."""
    out = tmp_path / "once"
    proc, result = run(harness_env, out, "steady", "producers.duration_s=15",
                       'spark.trigger={kind="once"}', "spark.source_options.maxOffsetsPerTrigger=5000")
    assert proc.returncode == 0 and result["verdict"] == "pass", proc.stdout[-5000:]
    typed(result)
    c = result["counts"]
    assert c["acked"] == c["delivered_unique"] == 45000 and c["lost"] == 0 and c["duplicates"] == 0
    assert result["query"]["trigger"] == "once" and result["query"]["final_state"] == "drained"
    assert_traffic_first(out)
    batches = batches_with_rows(out)
    assert [b["numInputRows"] for b in batches] == [45000]
    assert "batch_cap" not in {x["name"] for x in result["checks"]}


def test_a_run_that_cannot_be_judged_still_writes_its_result_and_exits_non_zero(harness_env, tmp_path):
    """A query that owns its sink and whose table cannot be read back: judging cannot read the sink. (The run
    itself is cut short without Spark: an external cluster that does not answer. The run directory starts empty:
    an earlier run's files are never read with a new run's, harness.files.outdir.)"""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    (tmp_path / "unreadable_table.py").write_text(
        "def build(events, params):\n    return events\n\n\n"
        "def write(batch_df, batch_id, sink_dir, params):\n    pass\n\n\n"
        "def read(sink_dir, params):\n    raise OSError(f'{sink_dir}/table.db: the table cannot be read back')\n\n\n"
        "build.foreach_batch, build.read_sink = write, read\n")
    out = tmp_path / "unjudged"
    path = os.pathsep.join([str(tmp_path), *([harness_env["PYTHONPATH"]] if harness_env.get("PYTHONPATH") else [])])
    proc, result = run(dict(harness_env, PYTHONPATH=path), out, "steady",
                       'spark.query="unreadable_table:build"', 'backend.mode="external"',
                       f'backend.bootstrap_servers="{dead}"', timeout=300)
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]  # 3: unjudged (docs/ci.md)
    typed(result)
    assert result["verdict"] == "unjudged"
    assert "reading the query's own sink" in result["unjudged_reason"]
    assert "the table cannot be read back" in result["unjudged_reason"]
    assert result["checks"][0]["name"] == "completed" and dead in result["checks"][0]["detail"]
    assert "could not be judged" in (out / "report.md").read_text()
    assert (out / "judge-error.txt").stat().st_size > 0
