"""Process and checkpoint faults end to end: the driver killed mid-batch, the checkpoint tampered with, a broker
killed and frozen, an executor killed. Each scenario runs as a user runs it; besides the verdict, every test checks
from the run's own records (progress.jsonl, the checkpoint, the sink's log) that the fault really did what it
claims, so a fault that silently did nothing fails here."""
import json
import subprocess
import sys
from datetime import datetime

import pytest

from harness.config import ConfigError, load_scenario
from harness.files.paths import SCENARIOS_DIR
from report_pages import open_page, svg_text
from harness.analysis.series import LEVELS

pytestmark = pytest.mark.integration


def run_scenario(name, out, harness_env, *overrides, timeout=900):
    argv = [sys.executable, "-m", "harness", "run", name, "--out", str(out)]
    for o in overrides:
        argv += ["--set", o]
    proc = subprocess.run(argv, env=harness_env, capture_output=True, text=True, timeout=timeout)
    result_path = out / "result.json"
    assert result_path.exists(), proc.stdout[-5000:] + proc.stderr[-5000:]
    result = json.loads(result_path.read_text())
    assert proc.returncode == 0 and result["verdict"] == "pass", (
        json.dumps([c for c in result.get("checks", []) if not c["ok"]], indent=1) + proc.stdout[-3000:])
    c = result["counts"]
    assert c["lost"] == 0 and c["duplicates"] == 0 and c["delivered_unique"] == c["acked"] > 0
    assert c["expected_lost"] == 0 and c["delivered_unacked"] == 0
    checks = {ch["name"]: ch for ch in result["checks"]}
    assert checks["faults_applied"]["ok"], checks["faults_applied"]["detail"]
    return result


def progress(out):
    return [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines() if line.strip()]


def started_at(p):
    return datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()


def source_end(p):
    return {k: int(v) for k, v in p["sources"][0]["endOffset"]["events"].items()}


def source_start(p):
    return {k: int(v) for k, v in (p["sources"][0]["startOffset"] or {}).get("events", {}).items()}


def faults_of(result, kind):
    found = [f for f in result["faults"] if f["kind"] == kind]
    assert found and all(not f["errors"] and f["injected_at"] for f in found), result["faults"]
    return found


# -- scenario validation: bad input is refused before anything starts ------------------------------------------
@pytest.mark.parametrize("name, override, words", [
    ("broker-kill", "backend.nodes=1", "needs backend.nodes >= 3"),
    ("broker-kill", 'producers.client.acks="1"', "use acks = \"all\""),
    ("broker-kill", 'backend.mode="container"', "embedded Kafka backend"),
    ("executor-kill", 'spark.master="local[2]"', "local-cluster"),
    ("crash-recovery", ('spark.trigger.kind="availableNow"', 'spark.trigger.interval="0 seconds"'),
     "only starts after the traffic"),
])
def test_bad_fault_settings_are_refused_with_a_reason(name, override, words):
    with pytest.raises(ConfigError) as err:
        load_scenario(name, list(override) if isinstance(override, tuple) else [override])
    assert words in str(err.value) and "faults.0" in str(err.value)


@pytest.mark.parametrize("name, old, new, words", [
    ("broker-kill", 'mode = "kill"', 'mode = "kill"\nnode = 4', "node = 4 but the cluster has 3 nodes"),
    ("checkpoint-replay", 'mode = "orphan_offsets"', 'mode = "drop_everything"', "drop_last_commit"),
])
def test_bad_fault_options_name_the_field(tmp_path, name, old, new, words):
    path = scenario_copy(tmp_path, name, old, new)
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    msg = str(err.value)
    assert words in msg and path in msg and ("faults.0" in msg or "faults[0]" in msg), msg


# -- default suite: two scenario runs ---------------------------------------------------------------------------
def scenario_copy(tmp_path, name, old, new):
    """The shipped scenario with one edit (a list entry `--set` cannot reach), run by path."""
    text = (SCENARIOS_DIR / f"{name}.toml").read_text()
    assert old in text
    path = tmp_path / f"{name}.toml"
    path.write_text(text.replace(old, new, 1))
    return str(path)


def check_driver_kills(out, result, count):
    kills = faults_of(result, "driver_kill")
    assert len(kills) == count
    assert result["query"]["kills"] == result["query"]["restarts"] == count
    batches = progress(out)
    committed = {int(f.name) for f in (out / "checkpoint" / "commits").iterdir() if f.name.isdigit()}
    for k in kills:
        d = k["detail"]
        assert d["inject_mid_batch"] is True and d["inject_exit_code"] == -9, d
        n = d["inject_batch"]
        # cut mid-way: no progress of that batch from before the kill; re-run and committed after the restart
        assert n in committed
        runs = [p for p in batches if p["batchId"] == n]
        assert all(started_at(p) > k["injected_at"] for p in runs), (n, runs)
    # what each kill cost: the restarted query's first data batch, the time until its lag was back in the band
    # it had before the kill, the backlog the kill left and how fast it drained
    recovery = [r for r in result["recovery"] if r["kind"] == "driver_kill"]
    assert len(recovery) == count
    for k, r in zip(kills, recovery):
        first = next(started_at(p) for p in sorted(batches, key=started_at)
                     if started_at(p) > k["injected_at"] and p["numInputRows"] > 0)
        assert r["first_data_batch_after_s"] > first - k["injected_at"] > 0  # the commit comes after the start
        assert r["recovered"] and r["time_to_recover_s"] >= r["first_data_batch_after_s"] - 1.0, r
        assert r["backlog_peak_events"] > 0 and r["duplicates"] == 0 and r["lost"] == 0
    assert "## Recovery per fault" in (out / "report.md").read_text()


def test_crash_recovery_driver_killed_mid_batch_loses_and_duplicates_nothing(harness_env, tmp_path, steady_run,
                                                                             browser):
    """Two of the scenario's three kills (each restart costs a Spark start-up); the slow suite runs all three."""
    path = scenario_copy(tmp_path, "crash-recovery", "count = 3", "count = 2")
    out = tmp_path / "crash"
    result = run_scenario(path, out, harness_env, "producers.duration_s=25")
    check_driver_kills(out, result, 2)
    check_fault_report_and_comparison(out, result, tmp_path, steady_run, browser)


def check_fault_report_and_comparison(out, result, tmp_path, steady_run, browser):
    """The faults are shaded and named on the report's time axes; compared against the steady run, the overlaid
    figures hold both runs."""
    figures, page = open_page(browser, out / "report.html", "crash-recovery-report")
    with page:
        for fig in ("fig-throughput", "fig-latency-time", "fig-lag", "fig-phases", "fig-tasks", "fig-resources"):
            text = svg_text(page, fig)
            assert all(f"{f['kind']} #{f['n']}" in text for f in result["faults"]), (fig, text[:300])
    assert len(figures) == 10
    steady_out, steady_proc, _ = steady_run
    assert steady_proc.returncode == 0, steady_proc.stdout[-3000:]
    cmp_dir = tmp_path / "compare"
    proc = subprocess.run([sys.executable, "-m", "harness", "compare", str(steady_out), str(out), "--out",
                           str(cmp_dir)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    figures, page = open_page(browser, cmp_dir / "compare.html", "compare-steady-crash")
    with page:
        table = page.evaluate("document.querySelector('#figures table').textContent")
        settings = page.evaluate("document.querySelector('#settings').textContent")
    assert list(figures) == ["fig-cmp-throughput", "fig-cmp-latency-time", "fig-cmp-latency-dist"]
    assert figures["fig-cmp-latency-dist"]["data_points"] == 2 * len(LEVELS)  # both runs' percentile curves
    assert "p99" in table and ("better" in table or "worse" in table or "same" in table)
    # the page opens with what differs between the two runs' scenarios, and says they are different scenarios
    assert "different scenarios (crash-recovery, steady)" in settings and "faults" in settings


@pytest.mark.slow  # `make test-slow`: keeps `make test` within its time budget
def test_checkpoint_replay_reruns_batches_and_the_sink_stays_exactly_once(harness_env, tmp_path):
    out = tmp_path / "replay"
    result = run_scenario("checkpoint-replay", out, harness_env, "producers.duration_s=30")
    tampers = {f["detail"]["inject_mode"]: f for f in faults_of(result, "checkpoint_tamper")}
    assert sorted(tampers) == ["drop_last_commit", "orphan_offsets"]
    dropped, orphan = tampers["drop_last_commit"], tampers["orphan_offsets"]
    assert result["query"]["kills"] == result["query"]["restarts"] == 2
    batches = progress(out)
    checkpoint, sink_log = out / "checkpoint", out / "sink" / "_spark_metadata"

    # drop_last_commit: after the tamper Spark ran batch N again (only a finished batch N gets commits/N, and the
    # fault removed it) while the sink kept its first record of N (the re-run was skipped, not written twice).
    # Progress is posted asynchronously, so a kill right after a batch may take its progress line with it: the
    # lines that exist must show the same offsets.
    t, n = dropped["injected_at"], dropped["detail"]["inject_rerun_batch"]
    assert dropped["detail"]["inject_removed"][0] == f"commits/{n}"
    assert (checkpoint / "commits" / str(n)).stat().st_mtime > t
    assert (sink_log / str(n)).stat().st_mtime < t
    planned = {k: int(v) for k, v in dropped["detail"]["inject_rerun_offsets"]["events"].items()}
    runs = [p for p in batches if p["batchId"] == n]
    assert len([p for p in runs if started_at(p) < t]) == int(dropped["detail"]["inject_progress_before_kill"])
    assert len([p for p in runs if started_at(p) > t]) <= 1
    assert all(source_end(p) == planned for p in runs), runs

    # orphan_offsets (first, while traffic flows): the sink's batch N+1 holds exactly the records between the
    # entry the fault copied and the one it wrote (the broker's end offsets then): Spark ran it from that entry
    t, m = orphan["injected_at"], orphan["detail"]["inject_rerun_batch"]
    written = {int(k): int(v) for k, v in orphan["detail"]["inject_rerun_offsets"].items()}
    previous = {int(k): int(v) for k, v in orphan["detail"]["inject_previous_offsets"].items()}
    rows = sink_batch_rows(sink_log / str(m))
    assert len(rows) == sum(written[p] - previous[p] for p in written) > 0
    for part, offsets in rows.groupby("partition")["offset"]:
        assert (offsets.min(), offsets.max() + 1, offsets.nunique()) == (
            previous[part], written[part], written[part] - previous[part]), part
    assert (checkpoint / "commits" / str(m)).stat().st_mtime > t
    for p in (p for p in batches if p["batchId"] == m):  # its progress, if the next kill left it on disk
        assert source_start(p) == {str(k): v for k, v in previous.items()}
        assert source_end(p) == {str(k): v for k, v in written.items()}


def sink_batch_rows(log_file):
    """The (partition, offset) rows of the data files one `_spark_metadata/<batch>` entry lists."""
    import pandas as pd
    import pyarrow.parquet as pq

    paths = [json.loads(line)["path"].removeprefix("file://") for line in log_file.read_text().splitlines()[1:]
             if line.strip()]
    frames = [pq.read_table(path, columns=["partition", "offset"]).to_pandas() for path in paths]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({"partition": [], "offset": []})


# -- slow: three brokers, two executor JVMs --------------------------------------------------------------------
@pytest.mark.slow
def test_crash_recovery_as_shipped_three_kills(harness_env, tmp_path):
    out = tmp_path / "crash3"
    result = run_scenario("crash-recovery", out, harness_env, timeout=1500)
    check_driver_kills(out, result, 3)


@pytest.mark.slow
def test_broker_kill_and_pause_lose_nothing_acked(harness_env, tmp_path):
    out = tmp_path / "broker"
    result = run_scenario("broker-kill", out, harness_env, timeout=1500)
    kill, pause = faults_of(result, "broker")
    assert kill["detail"]["inject_mode"] == "kill" and kill["detail"]["inject_exit_code"] == -9
    assert pause["detail"]["inject_mode"] == "pause" and pause["detail"]["heal_resumed"] is True
    for f in (kill, pause):
        assert f["healed_at"] and f["detail"]["heal_serving_after_s"] is not None
        assert f["detail"]["heal_isr_full_after_s"] is not None, f["detail"]
        assert f["detail"]["heal_down_s"] >= 10.0
        assert not f["effect"]["loss"] and not f["effect"]["send_failures"]
    # frozen longer than the broker session timeout: the controller fenced it and took it out of the ISR, as the
    # other brokers reported before it was resumed
    node, isr = pause["detail"]["inject_node"], pause["detail"]["heal_isr_before_heal"]
    assert any(node not in replicas for replicas in isr.values()), isr
    assert result["counts"]["failed"] == 0 and result["backend_info"]["nodes"] == 3


@pytest.mark.slow
def test_executor_kill_tasks_retry_and_a_replacement_executor_comes(harness_env, tmp_path):
    out = tmp_path / "executor"
    result = run_scenario("executor-kill", out, harness_env, timeout=1500)
    kills = faults_of(result, "executor_kill")
    assert len(kills) == 2 and result["query"]["kills"] == 0
    for k in kills:
        d = k["detail"]
        before, after = set(d["inject_executors"]), set(d["heal_executors"])
        assert str(d["inject_pid"]) in before and str(d["inject_pid"]) not in after and len(after) == 2
        assert d["heal_driver_log_lost_executor"] >= 1, d
