"""Live soak checks on a synthetic run directory built the way the real parts write it: the producers' Arrow
history, Parquet sink files listed by a `_spark_metadata` log whose file time is the commit, faults.jsonl."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from harness.config import load_scenario
from harness.records.history import ACK_SCHEMA
from harness.soak.checks import live_checks
from harness.soak.live import LiveChecker
from harness.soak.plan import resolve

T0 = 1_800_000_000.0  # seconds


class RunDir:
    def __init__(self, root: Path):
        self.root = root
        (root / "producers").mkdir(parents=True)
        (root / "sink" / "_spark_metadata").mkdir(parents=True)
        self.writer = ipc.new_stream(pa.OSFile(str(root / "producers" / "acks-0.arrows"), "wb"), ACK_SCHEMA)
        self.batches = 0

    def ack(self, seqs, ack_s, partition=0, error=""):
        n = len(seqs)
        self.writer.write_batch(pa.record_batch({
            "producer": pa.array([0] * n, pa.int32()), "seq": pa.array(seqs, pa.int64()),
            "partition": pa.array([partition] * n, pa.int32()), "offset": pa.array(seqs, pa.int64()),
            "intended_ms": pa.array([ack_s * 1000.0 - 5] * n), "ack_ms": pa.array([ack_s * 1000.0] * n),
            "latency_us": pa.array([1000] * n, pa.int64()), "error": pa.array([error] * n)}, schema=ACK_SCHEMA))

    def commit(self, seqs, commit_s, intended_s):
        path = self.root / "sink" / f"part-{self.batches}.parquet"
        pq.write_table(pa.table({"producer": pa.array([0] * len(seqs), pa.int32()),
                                 "seq": pa.array(seqs, pa.int64()), "intended_ms": [intended_s * 1000.0] * len(seqs),
                                 "partition": pa.array([0] * len(seqs), pa.int32()),
                                 "offset": pa.array(seqs, pa.int64())}), path)
        log = self.root / "sink" / "_spark_metadata" / str(self.batches)
        log.write_text("v1\n" + json.dumps({"path": path.as_uri(), "size": 1, "isDir": False,
                                             "modificationTime": 0, "blockReplication": 1, "blockSize": 1,
                                             "action": "add"}) + "\n")
        os.utime(log, (commit_s, commit_s))
        self.batches += 1

    def fault(self, kind, inject_s, heal_s=None, loss=None):
        with open(self.root / "faults.jsonl", "a") as f:
            f.write(json.dumps({"t": inject_s, "started": inject_s, "action": "inject", "kind": kind, "fault": 0,
                                "n": 0, "effect": {"loss": loss or []}}) + "\n")
            if heal_s is not None:
                f.write(json.dumps({"t": heal_s, "action": "heal", "kind": kind, "fault": 0, "n": 0,
                                    "effect": {"loss": loss or []}}) + "\n")

    def progress_at(self, t):
        (self.root / "progress.jsonl").write_text("{}\n")
        os.utime(self.root / "progress.jsonl", (t, t))


def checker(tmp_path, **soak) -> tuple[RunDir, LiveChecker]:
    sets = [f"soak.{k}={v}" for k, v in {"settle_s": 30, "window_s": 20, "stall_s": 60,
                                         "min_throughput_ratio": 0.8, "latency_p99_ms": 2000, **soak}.items()]
    scenario = resolve(load_scenario("steady", sets)[0])
    run = RunDir(tmp_path)
    return run, LiveChecker(scenario, tmp_path, store_dir=tmp_path / "store")


def by_name(checks):
    return {c.name: c for c in checks}


def test_overdue_events_fail_no_loss_only_after_settle_and_in_order_of_arrival(tmp_path):
    run, live = checker(tmp_path)
    run.ack(list(range(100)), T0)
    run.commit(list(range(90)), T0 + 1, T0)  # 10 events (90..99) never arrive
    run.progress_at(T0 + 1)
    live.ingest()
    early = by_name(live.evaluate((T0 + 10) * 1000.0))
    assert early["no_loss"].ok and "10 acked more recently" in early["no_loss"].detail
    late = by_name(live.evaluate((T0 + 31) * 1000.0))
    assert late["no_loss"].ok is False and late["no_loss"].detail.startswith("10 acked events not delivered")
    run.commit(list(range(90, 100)), T0 + 32, T0)  # they arrive late: nothing is overdue any more
    live.ingest()
    assert by_name(live.evaluate((T0 + 33) * 1000.0))["no_loss"].ok


def test_declared_loss_and_failed_sends_are_not_overdue(tmp_path):
    run, live = checker(tmp_path)
    run.ack(list(range(50)), T0)
    run.ack([50, 51], T0, error="KafkaError")
    run.commit(list(range(40)), T0 + 1, T0)
    run.fault("delete_records", T0 + 0.5, T0 + 1, loss=[{"partition": 0, "start": 40, "end": 50}])
    run.progress_at(T0 + 40)
    live.ingest()
    c = by_name(live.evaluate((T0 + 40) * 1000.0))["no_loss"]
    assert c.ok and "10 more in the faults' declared loss" in c.detail


def test_duplicates_across_evaluations_and_within_one_lot(tmp_path):
    run, live = checker(tmp_path)
    run.ack(list(range(10)), T0)
    run.commit(list(range(10)), T0 + 1, T0)
    live.ingest()
    assert by_name(live.evaluate((T0 + 2) * 1000.0))["no_duplicates"].ok
    run.commit([3, 4, 4], T0 + 3, T0)  # 3 and 4 again, and 4 twice in this lot: 3 duplicates
    live.ingest()
    c = by_name(live.evaluate((T0 + 4) * 1000.0))["no_duplicates"]
    assert c.ok is False and c.detail.startswith("3 duplicate deliveries")


def test_reads_only_what_is_new_each_time(tmp_path):
    run, live = checker(tmp_path)
    run.ack(list(range(5)), T0)
    run.commit(list(range(5)), T0 + 1, T0)
    live.ingest()
    run.ack(list(range(5, 8)), T0 + 2)  # appended to the same stream file
    live.ingest()
    assert live.history.rows_read[tmp_path / "producers" / "acks-0.arrows"] == 8
    assert live.sink.batches_read == {0}
    live.evaluate((T0 + 3) * 1000.0)
    assert live.last.pending == 3 and live.last.delivered_unique == 5


def test_latency_and_throughput_judge_the_window_unless_a_fault_was_in_it(tmp_path):
    run, live = checker(tmp_path)
    run.ack(list(range(100)), T0 + 5)
    run.commit(list(range(50)), T0 + 8, T0 + 5 - 0.005)  # latency ~3 s: over the 2 s limit
    run.progress_at(T0 + 8)
    live.ingest()
    c = by_name(live.evaluate((T0 + 10) * 1000.0))
    assert c["latency_p99"].ok is False and "p99 3,005 ms" in c["latency_p99"].detail
    assert not c["throughput"].ok and "50 delivered / 100 acked" in c["throughput"].detail
    run.fault("network", T0 + 9, T0 + 9.5)
    d = by_name(live.evaluate((T0 + 10) * 1000.0))
    assert d["latency_p99"].ok is None and "fault network" in d["latency_p99"].detail
    assert d["throughput"].ok is None
    live.traffic_start = T0 + 5 - 30 + 1  # the window reaches back into the traffic's first recovery_s
    e = by_name(live.evaluate((T0 + 8) * 1000.0))
    assert e["throughput"].ok is None and "the traffic's start" in e["throughput"].detail


def test_query_alive_fails_on_a_stall(tmp_path):
    run, live = checker(tmp_path)
    assert by_name(live.evaluate(T0 * 1000.0))["query_alive"].ok is None  # no batch yet: cannot say
    run.progress_at(T0)
    assert by_name(live.evaluate((T0 + 59) * 1000.0))["query_alive"].ok
    assert by_name(live.evaluate((T0 + 61) * 1000.0))["query_alive"].ok is False
    assert by_name(live.evaluate((T0 + 61) * 1000.0, "restarting"))["query_alive"].ok is None


def test_final_checks_hold_every_evaluation_against_the_soak(tmp_path):
    rows = [{"t": 100.0, "checks": [{"name": "no_loss", "ok": True, "judged": True, "detail": "0 acked"},
                                    {"name": "throughput", "ok": True, "judged": False, "detail": "not judged: x"}]},
            {"t": 130.0, "checks": [{"name": "no_loss", "ok": False, "judged": True, "detail": "7 acked"},
                                    {"name": "throughput", "ok": True, "judged": False, "detail": "not judged: x"}]},
            {"t": 160.0, "checks": [{"name": "no_loss", "ok": True, "judged": True, "detail": "0 acked"},
                                    {"name": "throughput", "ok": True, "judged": False, "detail": "not judged: x"}]}]
    checks = {c.name: c for c in live_checks(rows, started_at=70.0)}
    assert checks["live_checks"].ok and checks["live_checks"].detail.startswith("3 evaluations")
    assert not checks["live_no_loss"].ok
    assert checks["live_no_loss"].detail == "failed in 1 of 3 evaluations; first at +60 s: 7 acked"
    assert checks["live_throughput"].ok and checks["live_throughput"].detail.startswith("never judged")


def test_a_soak_whose_live_checks_never_ran_does_not_pass_by_silence():
    (checks,) = live_checks([], started_at=None)
    assert checks.name == "live_checks" and not checks.ok
    assert not live_checks([{"t": 1.0, "error": "OSError: gone"}], None)[0].ok


def test_leaks_and_disk_are_judged_and_a_long_soak_must_have_judged_a_process():
    from harness.config import SoakSpec
    from harness.soak.checks import resource_checks

    soak = SoakSpec(disk_budget_mb=100, leak_after_s=120)
    leaks = {"ok": True, "judged": 0, "min_span_s": 300.0, "detail": "no process watched long enough"}
    disk = {"peak_bytes": 150e6}
    short = {c.name: c for c in resource_checks(soak, {"leaks": leaks, "disk": disk}, traffic_s=60)}
    assert short["no_leak"].ok and "too short to judge" in short["no_leak"].detail
    assert not short["disk_budget"].ok and "peaked at 150 MB (budget 100 MB)" in short["disk_budget"].detail
    long = {c.name: c for c in resource_checks(soak, {"leaks": leaks, "disk": {"peak_bytes": 1e6}}, traffic_s=3600)}
    assert not long["no_leak"].ok and long["disk_budget"].ok
    leaking = {**leaks, "ok": False, "judged": 3, "detail": "driver pid 7 +900.0 MB/h"}
    assert not resource_checks(soak, {"leaks": leaking, "disk": disk}, 3600)[0].ok
    assert [c.ok for c in resource_checks(soak, {}, 3600)] == [None, None]  # never sampled: unknown, not passed
