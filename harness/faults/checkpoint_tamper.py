"""The query's checkpoint tampered with while the query is down: a batch must re-run, and stay exactly-once.

The driver is killed between batches (offset log, sink log and commit log level at batch N; a query that runs
batches back to back is between them only for the moment it asks Kafka for the next end offsets, so the logs are
polled every few milliseconds and the driver frozen to confirm), then, before the runner restarts it:
- `drop_last_commit`: `commits/N` (and its .crc) is removed, so Spark re-runs batch N with exactly the offsets of
  `offsets/N`; the Parquet sink already has N in its `_spark_metadata` log and must skip it.
- `orphan_offsets`: a new `offsets/N+1` is written in Spark's format (version line, batch metadata with a fresh
  batch timestamp, the broker's current end offsets as the source line) with no commit, so the restarted query
  runs batch N+1 from the write-ahead log instead of planning one itself.
- `drop_state_file`: the state store file of the last committed version is removed from the first state
  partition that has one (`state/<operator>/<partition>/<N+1>.changelog` with RocksDB's changelog checkpointing,
  else its snapshot `<N+1>.zip` (RocksDB) or `<N+1>.delta` (HDFS)): the restarted query cannot load its state
  and must fail with Spark's CANNOT_LOAD_STATE_STORE (declared as the fault's failure, so the run passes only
  when it does: a query that silently started from older or empty state would be the defect).
Nothing may be lost or duplicated. The detail names the batch and its offsets, so the re-run can be found in the
checkpoint, the sink's log and progress.jsonl (a progress line may be missing: listeners are asynchronous and a
kill right after a batch takes its line with it).
"""
from __future__ import annotations

import json
import time
from typing import Literal

from pydantic import Field

from harness.files import atomic
from harness.faults import register
from harness.faults.base import Fault, FaultError, FaultOptions
from harness.faults.driver_kill import act_when, last_progress_batch, needs_running_query, wait_running
from harness.spark import checkpoint as ckpt


STATE_LOAD_FAILURE = "CANNOT_LOAD_STATE_STORE"  # Spark's error class when a state version's file is gone
STATE_FILE_SUFFIXES = ("changelog", "zip", "delta")  # RocksDB changelog, RocksDB snapshot, HDFS delta


class CheckpointTamperOptions(FaultOptions):
    kind: Literal["checkpoint_tamper"] = Field("checkpoint_tamper", description="checkpoint_tamper: the checkpoint "
                                                                                "altered while the query is down")
    mode: Literal["drop_last_commit", "orphan_offsets", "drop_state_file"] = Field(
        description="drop_last_commit (a batch must re-run), orphan_offsets (an offsets entry without its commit) or "
                    "drop_state_file (the last state version's file removed: the restart must refuse)")


@register
class CheckpointTamper(Fault):
    kind = "checkpoint_tamper"
    Options = CheckpointTamperOptions
    requires = "a query running during the traffic"
    takes_query_down = True
    settle_timeout_s = 60.0  # how long to wait for a moment between batches

    def check(self, scenario) -> str | None:
        if self.options.mode == "drop_state_file" and scenario.spark.query == "passthrough":
            return ("mode = \"drop_state_file\" needs a stateful query (spark.query = \"passthrough\" keeps no "
                    "state in the checkpoint)")
        return needs_running_query(scenario)

    def inject(self, ctx) -> dict:
        wait_running(ctx, ctx.scenario.spark.start_timeout_s)
        detail: dict = {"mode": self.options.mode}

        def between_batches():
            """N when batch N is done (offsets, sink log, commit) and N+1 not yet planned."""
            offsets, commits = ctx.offset_log(), ctx.commit_log()
            if not offsets or not commits or offsets[-1] != commits[-1]:
                return None
            n = commits[-1]
            sink_log = ckpt.batch_ids(ctx.run_dir / "sink" / "_spark_metadata")
            return n if sink_log and sink_log[-1] == n else None

        def tamper(n: int) -> None:
            # progress is posted asynchronously: batch N's may not have reached progress.jsonl before the kill
            detail.update(batch=n, sink_metadata_last=n, progress_before_kill=last_progress_batch(ctx) >= n)
            act = {"drop_last_commit": self._drop_commit, "orphan_offsets": self._orphan_offsets,
                   "drop_state_file": self._drop_state_file}[self.options.mode]
            ctx.query.kill(then=lambda: detail.update(act(ctx, n)))

        if self.options.mode == "drop_state_file":  # declared before the restart can fail with it
            self.effect.failure = STATE_LOAD_FAILURE

        if act_when(ctx, between_batches, self.settle_timeout_s, tamper, poll_s=0.005) is None:
            raise FaultError(f"the query was never between batches within {self.settle_timeout_s:g}s; "
                             "the checkpoint was not touched")
        return detail

    @staticmethod
    def _drop_commit(ctx, n: int) -> dict:
        commits = ctx.checkpoint / "commits"
        removed = [p for p in (commits / str(n), commits / f".{n}.crc") if p.exists()]
        for p in removed:
            p.unlink()
        if ctx.commit_log() and ctx.commit_log()[-1] >= n:
            raise FaultError(f"commits/{n} still there after removing it")
        return {"removed": [str(p.relative_to(ctx.checkpoint)) for p in removed], "rerun_batch": n,
                "rerun_offsets": ckpt.offset_log_entry(ctx.checkpoint / "offsets" / str(n))}

    @staticmethod
    def _drop_state_file(ctx, n: int) -> dict:
        """The file holding state version n + 1 (what batch n committed) in the first partition that has one."""
        version = n + 1
        for operator in sorted((ctx.checkpoint / "state").glob("[0-9]*"), key=lambda p: int(p.name)):
            for part in sorted(operator.glob("[0-9]*"), key=lambda p: int(p.name)):
                for suffix in STATE_FILE_SUFFIXES:
                    path = part / f"{version}.{suffix}"
                    if path.exists():
                        path.unlink()
                        crc = part / f".{version}.{suffix}.crc"
                        if crc.exists():
                            crc.unlink()
                        return {"removed": [str(path.relative_to(ctx.checkpoint))], "state_version": version,
                                "expected_failure": STATE_LOAD_FAILURE}
        raise FaultError(f"no state file of version {version} ({', '.join(STATE_FILE_SUFFIXES)}) under "
                         f"{ctx.checkpoint / 'state'}: is the query stateful?")

    @staticmethod
    def _orphan_offsets(ctx, n: int) -> dict:
        offsets = ctx.checkpoint / "offsets"
        lines = (offsets / str(n)).read_text(encoding="utf-8").splitlines()
        if len(lines) != 3:
            raise FaultError(f"offsets/{n} has {len(lines)} lines; expected one Kafka source (version, metadata, "
                             "source)")
        version, metadata, source = lines[0], json.loads(lines[1]), json.loads(lines[2])
        if ctx.stream not in source:
            raise FaultError(f"offsets/{n} does not name stream {ctx.stream!r}: {lines[2][:200]}")
        if "batchTimestampMs" in metadata:
            metadata["batchTimestampMs"] = int(time.time() * 1000)
        ends = ctx.backend.end_offsets(ctx.stream)
        previous = {int(p): int(o) for p, o in source[ctx.stream].items()}
        if set(ends) != set(previous) or any(ends[p] < previous[p] for p in ends):
            raise FaultError(f"broker end offsets {ends} do not extend offsets/{n} {previous}")
        new_source = {ctx.stream: {str(p): ends[p] for p in sorted(ends)}}
        path = offsets / str(n + 1)
        if path.exists():
            raise FaultError(f"offsets/{n + 1} already exists")
        atomic.write_text(path, "\n".join([version, json.dumps(metadata, separators=(",", ":")),
                                           json.dumps(new_source, separators=(",", ":"))]))
        path.chmod(0o644)  # as Spark writes its own entries
        return {"written": str(path.relative_to(ctx.checkpoint)), "rerun_batch": n + 1,
                "rerun_offsets": {str(p): ends[p] for p in sorted(ends)},
                "previous_offsets": {str(p): previous[p] for p in sorted(previous)},
                "records_in_batch": sum(ends[p] - previous[p] for p in ends)}
