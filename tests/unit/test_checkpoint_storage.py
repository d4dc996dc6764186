"""A checkpoint on the S3 store (harness.objstore) and its storage faults (harness.faults.checkpoint_storage),
judged by harness.checkers.checkpoint on literal progress records and fault records: the figures expected are
written out by hand from the literal durationMs values, never computed by the function under test."""
from __future__ import annotations

import io
import json
from datetime import datetime, timezone

import pytest
from pydantic import ValidationError

from harness.analysis import checkpoint as ckpt
from harness.analysis.runview import FaultFacts
from harness.checkers.checkpoint import checkpoint_cost, checkpoint_storage, storage_check
from harness.config import ConfigError, load_scenario
from harness.faults import fault_for
from harness.faults.checkpoint_storage import CheckpointStorageOptions
from harness.objstore import spark_conf
from harness.objstore.server import SLOW_DOWN, Store
from tests.unit.test_checkers_literal import by_name, view

T0 = 1_800_000_000.0  # epoch s of the first batch


def stamp(s: float) -> str:
    return datetime.fromtimestamp(s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def batch(n: int, at: float, wal: float, commit: float, total: float = 900.0) -> dict:
    """A progress record of batch `n` starting `at` s after T0, its offset log and commit log writes in ms."""
    return {"batchId": n, "timestamp": stamp(T0 + at), "numInputRows": 100,
            "durationMs": {"walCommit": wal, "commitOffsets": commit, "addBatch": 300, "triggerExecution": total}}


def record(fault: int, n: int, on: float, off: float, **since) -> dict:
    counts = {"requests": 40, "throttled": 0, "server_errors": 0, "connections": 2, "refused": 0, "reset": 0,
              "bytes": {"up": 1000, "down": 2000}}
    return {"kind": "checkpoint_storage", "fault": fault, "n": n, "inject_started_at": T0 + on,
            "injected_at": T0 + on, "healed_at": T0 + off, "effect": {}, "errors": [],
            "detail": {"heal_since_inject": {**counts, **since}}}


def facts(*records) -> FaultFacts:
    return FaultFacts(records=list(records), effects=[], expected_failures=[], failed_as_expected=False)


# batches 0-2 before the fault (40+30 ms), 3-5 inside the latency window [10, 20) (450+400 ms), 6-7 after it
PROGRESS = ([batch(i, i * 1.0, 40, 30) for i in range(3)] + [batch(3 + i, 10.0 + 3 * i, 450, 400, 2000)
                                                             for i in range(3)]
            + [batch(6, 25.0, 50, 30), batch(7, 26.0, 60, 40)])


def test_batch_costs_read_walcommit_and_commitoffsets_and_split_by_the_fault_window():
    costs = ckpt.batch_costs(PROGRESS)
    assert [(c.batch, c.wal_ms, c.commit_ms, c.total_ms) for c in costs][:4] == \
        [(0, 40, 30, 70), (1, 40, 30, 70), (2, 40, 30, 70), (3, 450, 400, 850)]
    (window,) = ckpt.fault_windows([record(0, 1, 10.0, 20.0)], None)
    assert [c.batch for c in ckpt.inside(costs, window)] == [3, 4, 5]
    assert [c.batch for c in ckpt.outside(costs, [window], None)] == [0, 1, 2, 6, 7]
    assert [c.batch for c in ckpt.outside(costs, [window], T0 + 1.5)] == [2, 6, 7]  # the measured window only
    # no-data triggers write no offset log: no walCommit, not a batch of the checkpoint's
    assert ckpt.batch_costs([{"batchId": 9, "timestamp": stamp(T0), "durationMs": {"triggerExecution": 3}}]) == []


def test_checkpoint_cost_is_the_median_outside_the_faults_against_the_declared_bound():
    run = view("checkpoint-s3", progress=PROGRESS, fault_facts=facts(record(0, 1, 10.0, 20.0)))
    (check,) = checkpoint_cost(run)
    # outside: 70, 70, 70, 80 (50+30), 100 (60+40): median 70; walCommit median 40, commitOffsets median 30
    assert (check.name, check.status, check.value, check.limit) == ("checkpoint_cost", "pass", 70, 2500)
    assert "walCommit 40, commitOffsets 30" in check.detail and "over 5 measured batches outside" in check.detail
    run.scenario.checks.max_checkpoint_ms = 60  # the same batches against a bound they exceed
    (check,) = checkpoint_cost(run)
    assert check.status == "fail" and check.value == 70
    run.scenario.checks.max_checkpoint_ms = None
    (check,) = checkpoint_cost(run)
    assert check.status == "not required"
    (check,) = checkpoint_cost(view("checkpoint-s3", progress=[]))
    assert check.status == "unknown"
    assert checkpoint_cost(view("steady", progress=PROGRESS)) == []  # a local checkpoint and no bound


def test_a_latency_the_batches_paid_passes_and_one_they_did_not_fails():
    """The declared effect: the slowest batch that ran during a latency spent at least its latency_ms (here the
    scenario's first fault's) more on its log writes than the batches no fault touched do at the median. Batches
    that did not (the store's traffic never crossed the faulted proxy) fail the check."""
    latency = load_scenario("checkpoint-s3")[0].faults[0].latency_ms
    run = view("checkpoint-s3", progress=PROGRESS, fault_facts=facts(record(0, 1, 10.0, 20.0)))
    (check,) = checkpoint_storage(run)
    assert check.status == "pass", check.detail
    # inside: 850 ms each; outside: 70, 70, 70, 80, 100 -> median 70; 850 - 70 = +780 ms
    assert "the 3 batches that ran while it was on spent 850 ms at the median (slowest 850 ms)" in check.detail
    assert "against 70 ms at the median of the 5 batches no fault touched: the slowest +780 ms" in check.detail
    unslowed = [batch(i, i * 1.0, 40, 30) for i in range(30)]
    (check,) = checkpoint_storage(view("checkpoint-s3", progress=unslowed, fault_facts=facts(record(0, 1, 10.0, 20.0))))
    assert check.status == "fail"
    assert "the slowest +0 ms, less than its" in check.detail and f"{latency:g} ms latency" in check.detail
    barely = [batch(i, i * 1.0, 40, 30) if not 10 <= i < 20 else batch(i, i * 1.0, 40, 30 + latency - 1, 500)
              for i in range(30)]  # the slowest one ms short of the latency
    (check,) = checkpoint_storage(view("checkpoint-s3", progress=barely, fault_facts=facts(record(0, 1, 10.0, 20.0))))
    assert check.status == "fail"


def test_with_async_progress_tracking_the_batches_must_not_wait_for_the_latency():
    options = CheckpointStorageOptions(mode="latency", latency_ms=100, window=(10, 20))
    (window,) = ckpt.fault_windows([record(0, 1, 10.0, 20.0)], None)
    fast = ckpt.summary([ckpt.BatchCost(i, 0, 1, 1, 0, 900) for i in range(3)])  # 1 ms per batch
    slow = ckpt.summary([ckpt.BatchCost(i, 0, 1, 300, 250, 900) for i in range(3)])  # 550 ms per batch
    base = ckpt.summary([ckpt.BatchCost(i, 0, 1, 2, 1, 900) for i in range(5)])  # 3 ms per batch outside
    assert storage_check([(window, options, fast)], base, asynchronous=True).status == "pass"
    check = storage_check([(window, options, slow)], base, asynchronous=True)
    assert check.status == "fail" and "+547 ms at the median: NOT less than its 100 ms latency" in check.detail
    assert storage_check([(window, options, fast)], base, asynchronous=False).status == "fail"
    assert storage_check([(window, options, slow)], base, asynchronous=False).status == "pass"
    assert storage_check([(window, options, {})], base, asynchronous=False).status == "unknown"  # no batch inside
    assert storage_check([(window, options, slow)], {}, asynchronous=False).status == "unknown"  # none outside


def test_a_throttle_that_answered_no_503_or_a_fault_no_request_met_fails():
    throttle = CheckpointStorageOptions(mode="throttle", share=0.5, window=(10, 20))
    reset = CheckpointStorageOptions(mode="reset", window=(10, 20))

    def judged(options, **since):
        (w,) = ckpt.fault_windows([record(0, 1, 10.0, 20.0, **since)], None)
        return storage_check([(w, options, {})], {}, asynchronous=False)

    assert judged(throttle, throttled=12).status == "pass"
    assert judged(throttle, throttled=0).status == "fail"
    assert judged(throttle, requests=0, throttled=0).status == "fail"
    assert judged(reset, reset=3).status == "pass"
    assert judged(reset, reset=0, refused=0).status == "unknown"  # nothing open at its instant: nothing shown
    kept = CheckpointStorageOptions(mode="reset", keep_resetting=True, window=(10, 20))
    assert judged(kept, requests=0, refused=9).status == "pass"
    assert judged(kept, requests=30, refused=0).status == "fail"  # the requests went through: it reset nothing
    (w,) = ckpt.fault_windows([{**record(0, 1, 10.0, 20.0), "detail": {}}], None)
    assert storage_check([(w, throttle, {})], {}, asynchronous=False).status == "unknown"  # never counted


def test_the_fault_needs_the_checkpoint_on_the_store_and_a_window():
    steady = load_scenario("steady")[0]
    fault = fault_for(CheckpointStorageOptions(mode="latency", latency_ms=50, window=(1, 2)))
    assert "spark.checkpoint_store = \"s3\"" in fault.check(steady)
    s3 = load_scenario("checkpoint-s3")[0]
    assert fault.check(s3) is None
    assert "duration_s or window" in fault_for(CheckpointStorageOptions(mode="reset", at_s=3)).check(s3)
    with pytest.raises(ValidationError, match="needs latency_ms"):
        CheckpointStorageOptions(mode="latency", window=(1, 2))
    with pytest.raises(ValidationError, match="share belongs to mode = 'throttle'"):
        CheckpointStorageOptions(mode="latency", latency_ms=5, share=0.5, window=(1, 2))
    with pytest.raises(ValidationError):
        CheckpointStorageOptions(mode="throttle", share=1.5, window=(1, 2))


def test_the_store_is_refused_where_its_connector_cannot_run():
    with pytest.raises(ConfigError, match="checkpoint_store"):
        load_scenario("checkpoint-s3", ["spark.pyspark=3.5"])
    with pytest.raises(ConfigError, match="needs a local\\[N\\] master"):
        load_scenario("checkpoint-s3", ["spark.cluster=standalone"])
    with pytest.raises(ConfigError, match="needs a local\\[N\\] master"):
        load_scenario("checkpoint-s3", ["spark.master=spark://10.0.0.1:7077"])
    with pytest.raises(ConfigError, match="checkpoint_store"):
        load_scenario("checkpoint-s3", ["spark.checkpoint_store=gcs"])


def test_s3a_is_pointed_at_the_proxy_with_path_style_access():
    conf = spark_conf("http://127.0.0.1:4567")
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:4567"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"


def test_the_store_answers_503_slowdown_to_the_share_it_is_told_and_logs_every_request(tmp_path):
    calls = []

    def moto(environ, start_response):  # stands in for moto's application
        calls.append(environ["PATH_INFO"])
        start_response("200 OK", [])
        return [b"ok"]

    store = Store(moto, "harness", tmp_path, seed=1)

    def request(path: str, body: dict | None = None, method: str = "GET"):
        data = json.dumps(body).encode() if body is not None else b""
        got = {}
        out = store({"PATH_INFO": path, "REQUEST_METHOD": method, "CONTENT_LENGTH": str(len(data)),
                     "wsgi.input": io.BytesIO(data)}, lambda status, headers, exc=None: got.update(status=status))
        return got["status"], b"".join(out)

    assert request("/harness/checkpoint/offsets/0", method="PUT") == ("200 OK", b"ok")
    assert request("/_harness/throttle", {"share": 1.0}, "POST")[0] == "200 OK"
    assert request("/harness/checkpoint/commits/0", method="PUT") == ("503 Slow Down", SLOW_DOWN)
    status, body = request("/_harness/throttle", {"share": 0.0}, "POST")
    assert json.loads(body)["throttled"] == 1 and json.loads(body)["requests"] == 2
    assert request("/_harness/throttle", {"share": 2}, "POST")[0] == "400 Bad Request"
    assert calls == ["/harness/checkpoint/offsets/0"]  # the throttled request never reached the store
    rows = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [(r["method"], r["status"], r.get("throttled", False)) for r in rows] == \
        [("PUT", 200, False), ("PUT", 503, True)]


def test_a_sink_written_to_the_store_is_read_from_the_run_directory_copy(tmp_path):
    """The file sink's log names s3a:// paths; the run directory has the bucket's copy: each file is found there."""
    from harness.sinks.parquet.files import inside

    sink = tmp_path / "sink"
    sink.mkdir()
    (sink / "part-00000-a.snappy.parquet").write_bytes(b"PAR1")
    below, local = inside("s3a://harness/sink/part-00000-a.snappy.parquet", sink)
    assert below == "part-00000-a.snappy.parquet"
    assert local == (sink / "part-00000-a.snappy.parquet").absolute().as_uri()
    assert inside("s3a://harness/sink/part-00001-b.snappy.parquet", sink) == ("part-00001-b.snappy.parquet", None)
    assert inside("hdfs://nn/sink/x.parquet", sink) == ("hdfs://nn/sink/x.parquet", "hdfs://nn/sink/x.parquet")


def test_a_fault_that_reads_the_checkpoint_while_the_run_goes_is_refused_beside_a_remote_one():
    """The run copies the store's checkpoint only at its end: a kill waiting for a batch in flight would read an
    empty local checkpoint there and declare a wrong effect."""
    with pytest.raises(ConfigError, match="faults.0: driver_kill reads the checkpoint while the run goes"):
        load_scenario("checkpoint-s3", ['faults=[{kind="driver_kill", at_s=5}]'])
    scenario, _, _ = load_scenario("checkpoint-s3", ['faults=[{kind="resend", at_s=5, records=10}]'])
    assert [f.kind for f in scenario.faults] == ["resend"]
