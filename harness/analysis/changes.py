"""What each change rolled out on the live checkpoint (harness.faults.change) did, read from the run directory: did
the query restart, with which Spark, and which of the changed settings are in force afterwards.

Where a setting in force is read:
- a Spark conf the checkpoint pins (the offset log's metadata line holds them: shuffle partitions, the state store
  provider, its encoding format, the state format versions): the value logged for the batches planned after the
  change is the one Spark ran them with, whatever the new session was given. This is how a change of
  `spark.sql.shuffle.partitions` is seen not taken;
- RocksDB's changelog checkpointing, which the offset log does not pin: the state store files written after the
  change (`*.changelog` files are the changelog's; `*.zip` snapshots only, without it);
- the state checkpoint format version (`checkpointFormatVersion`): the commit log entries written after the change
  (version 2 records each state store's checkpoint id in them, `stateUniqueIds`; version 1 does not);
- `maxOffsetsPerTrigger` (`maxEventsPerTrigger` on Event Hubs): the rows the batches after the change read (none
  above the new cap; a raised cap is seen only when a batch read more than the old one allowed);
- the Spark version and the query: the driver's own `query_started` mark (harness.spark.query).
A setting none of these covers is reported as not measured (`taken` None), never as taken.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.analysis.progress import epoch_s, kafka_cap_slack
from harness.files.jsonl import read_jsonl
from harness.spark.checkpoint import batch_ids, offset_metadata

CAPS = ("maxoffsetspertrigger", "maxeventspertrigger")  # the batch caps, lower-cased as Spark matches them
CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
FORMAT_VERSION_CONF = "spark.sql.streaming.stateStore.checkpointFormatVersion"


def measure_changes(run_dir: Path, records: list[dict], progress: list[dict], query: dict) -> list[dict]:
    """One entry per change injection (faults.jsonl's `change` records), in order."""
    changes = [f for f in records if f["kind"] == "change" and f["injected_at"] is not None]
    marks = [m for m in read_jsonl(run_dir / "spark" / "marks.jsonl") if m.get("mark") == "query_started"]
    out = []
    for i, record in enumerate(changes):
        until = changes[i + 1]["injected_at"] if i + 1 < len(changes) else float("inf")
        out.append(measure_change(run_dir, record, progress, marks, query, until))
    return out


def measure_change(run_dir: Path, record: dict, progress: list[dict], marks: list[dict], query: dict,
                   until: float) -> dict[str, Any]:
    detail, at = record["detail"], float(record["injected_at"])
    last_before = (detail.get("inject_at_stop") or {}).get("offset_log_last")
    first_new = -1 if last_before is None else int(last_before) + 1  # batches phase B planned itself
    after = [p for p in progress if at <= epoch_s(p["timestamp"]) < until] if progress else []
    before_marks = [m for m in marks if m["at"] < at]
    after_marks = [m for m in marks if at <= m["at"] < until]
    restarted = bool(after)
    changed, was = detail.get("inject_changed") or {}, detail.get("inject_was") or {}
    return {
        "n": record["n"], "fault": record["fault"], "name": detail.get("inject_name") or "",
        "rule": detail.get("inject_rule"), "stop": detail.get("inject_stop"), "at": at,
        "refused_with": detail.get("inject_refused_with"), "in_force_expected": detail.get("inject_in_force", True),
        "changed": changed, "restarted": restarted,
        "refused": query.get("state") == "failed" and not restarted and until == float("inf"),
        "first_batch_after_s": round(epoch_s(after[0]["timestamp"]) - at, 3) if after else None,
        "batches_after": len(after),
        "spark": [before_marks[-1].get("spark") if before_marks else None,
                  after_marks[-1].get("spark") if after_marks else None],
        "settings": settings_in_force(run_dir, changed, was, first_new, after, record),
        "state_read_at": detail.get("inject_state_read_at"),  # the batch whose state was read at the change
    }


def settings_in_force(run_dir: Path, changed: dict, was: dict, first_new: int, after: list[dict],
                      record: dict) -> list[dict]:
    """Per changed setting: requested, in force, taken (True/False/None: not measured) and where it was read."""
    checkpoint = run_dir / "checkpoint"
    planned = [b for b in batch_ids(checkpoint / "offsets") if b >= first_new] if first_new >= 0 else []
    pinned = offset_metadata(checkpoint, planned[0]).get("conf", {}) if planned else {}
    rows = []
    for key, value in (changed.get("conf") or {}).items():
        if key == CHANGELOG_CONF and key not in pinned:
            rows.append(changelog_in_force(checkpoint, value, record))
        elif key == FORMAT_VERSION_CONF and key not in pinned:
            rows.append(format_version_in_force(checkpoint, value, record))
        elif key in pinned:
            taken = pinned[key] == value
            rows.append(_row(key, value, pinned[key], taken, f"the offset log of batch {planned[0]} (the checkpoint "
                                                             f"pins it{'' if taken else ': the old value kept'})"))
        elif not planned:
            rows.append(_row(key, value, None, None, "no batch was planned after the change"))
        else:
            rows.append(_row(key, value, None, None, "not recorded where it could be read (the checkpoint does "
                                                     "not pin it)"))
    for key, value in (changed.get("source_options") or {}).items():
        if value is None and "protocol" in changed:
            continue  # the old source's option, gone with it
        if key.lower() in CAPS:
            rows.append(cap_in_force(key, value, (was.get("source_options") or {}).get(key), after))
        else:
            rows.append(_row(f"source_options.{key}", value, None, None, "a source option Spark does not record"))
    return rows


def _row(setting: str, requested: Any, in_force: Any, taken: bool | None, how: str) -> dict:
    return {"setting": setting, "requested": requested, "in_force": in_force, "taken": taken, "how": how}


def cap_in_force(key: str, value: Any, old: Any, after: list[dict]) -> dict:
    """A batch cap is in force when no batch after the change read more than it, and (a raised or removed cap)
    some batch read more than the old one allowed; with no batch above the old cap there is no telling them
    apart."""
    cap = float("inf") if value is None else int(value)
    rows = [int(p.get("numInputRows", 0)) for p in after]
    if not any(rows):
        return _row(f"source_options.{key}", value, None, None, "no batch read data after the change")
    most = max(rows)
    over = [r for r, p in zip(rows, after) if r > cap + kafka_cap_slack(p)]
    if over:
        return _row(f"source_options.{key}", value, most, False, f"a batch after the change read {max(over):,} "
                                                                 "rows")
    if old is not None and cap > int(old) and most <= int(old):
        return _row(f"source_options.{key}", value, None, None,
                    f"no batch after the change read more than the old cap ({int(old):,}): not told apart")
    if value is None and old is None:
        return _row(f"source_options.{key}", value, None, None, "set neither before nor after")
    return _row(f"source_options.{key}", value, most, True, f"the batches after the change read at most {most:,} "
                                                            "rows")


def changelog_in_force(checkpoint: Path, value: Any, record: dict) -> dict:
    """RocksDB's changelog checkpointing, from the state store files written after the change: a batch commits
    a `<version>.changelog` per partition with it, a `<version>.zip` snapshot without it."""
    at = float(record["injected_at"])
    files = [f for f in (checkpoint / "state").rglob("*") if f.is_file() and f.stat().st_mtime >= at] \
        if (checkpoint / "state").is_dir() else []
    changelogs = sum(f.suffix == ".changelog" for f in files)
    snapshots = sum(f.suffix == ".zip" for f in files)
    if not changelogs and not snapshots:
        return _row(CHANGELOG_CONF, value, None, None, "no state store file written after the change")
    in_force = "true" if changelogs else "false"
    return _row(CHANGELOG_CONF, value, in_force, in_force == str(value).lower(),
                f"state files written after the change: {changelogs} changelogs, {snapshots} snapshots")


def format_version_in_force(checkpoint: Path, value: Any, record: dict) -> dict:
    """The state checkpoint format version, from the commit log entries written after the change: version 2
    commits name each state store's checkpoint (`stateUniqueIds`), version 1 only the watermark."""
    at = float(record["injected_at"])
    commits = [f for f in (checkpoint / "commits").iterdir() if f.name.isdigit() and f.stat().st_mtime >= at] \
        if (checkpoint / "commits").is_dir() else []
    if not commits:
        return _row(FORMAT_VERSION_CONF, value, None, None, "no batch was committed after the change")
    v2 = sum("stateUniqueIds" in f.read_text(encoding="utf-8", errors="replace") for f in commits)
    in_force = "2" if v2 else "1"
    return _row(FORMAT_VERSION_CONF, value, in_force, in_force == str(value),
                f"{len(commits)} commits written after the change, {v2} with state checkpoint ids")
