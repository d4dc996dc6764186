"""The final state the checkpoint holds (state/, written by harness.spark.state_dump) against the state the oracle
implies from the producers' history: pure functions of frames, no Spark.

- `window_counts` (a windowed count): after its last batch, whose eviction watermark is W, the aggregation's
  store holds exactly the windows whose end is above W (the ones not yet emitted), each with the count of the
  acked events in it; the windows at or below W were evicted (and written) and must be gone.
- `sessions` (harness.queries.sessions): the store holds exactly the sessions still open (a key's last session
  whose timer, end + gap, W has not passed), each as its ValueState (start, end, count), its ListState (one event
  id per event of the session, the ids the history has) and its MapState (events per producer); and one
  registered timer per open session, at end + gap.
The watermark is the one the read batch ran with (its offset log's batchWatermarkMs), so state and expectation
refer to the same batch.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from harness.files.jsonl import read_jsonl
from harness.oracles import (expected_sessions, producer_job, session_gap_ms, split_sessions, window_ms,
                             window_starts, with_keys)

STATE_DIR = "state"


def read_meta(run_dir: Path, state_dir: str = STATE_DIR) -> dict:
    """state/meta.json (or another state read's, `state_dir`: the state at a change, harness.faults.change);
    ValueError saying why the state cannot be judged when it is missing or records an error. The meta keeps the
    directory it came from, where its stores are read."""
    path = Path(run_dir) / state_dir / "meta.json"
    if not path.exists():
        raise ValueError(f"{path} not written (the state reader did not run or did not finish: see "
                         "spark/state-reader.log)")
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta["dir"] = state_dir
    if meta.get("error"):
        raise ValueError(f"the state reader failed: {meta['error'][:500]}")
    return meta


def store(run_dir: Path, meta: dict, label: str) -> pd.DataFrame:
    """One store's rows with each JSON column parsed (a dict per cell, the column's own value)."""
    entry = next((s for s in meta.get("stores", []) if s["store"] == label), None)
    if entry is None:
        raise ValueError(f"no store {label!r} in {meta.get('dir', STATE_DIR)}/meta.json (stores: "
                         f"{[s['store'] for s in meta.get('stores', [])]})")
    frame = pd.read_parquet(Path(run_dir) / meta.get("dir", STATE_DIR) / entry["file"])
    for col in frame.columns:
        if col != "partition_id":
            frame[col] = [json.loads(v)[col] if isinstance(v, str) else None for v in frame[col]]
    return frame


def _compare(name: str, expected: dict, got: dict, what: str) -> tuple[list[str], int]:
    """Problems (a few examples in words) and their number, between {id: value} maps."""
    missing = [k for k in expected if k not in got]
    extra = [k for k in got if k not in expected]
    wrong = [k for k in expected if k in got and got[k] != expected[k]]
    problems = []
    if missing:
        problems.append(f"{len(missing)} {what} missing from {name} (e.g. {missing[:3]})")
    if extra:
        problems.append(f"{len(extra)} {what} in {name} the history does not imply (e.g. {extra[:3]})")
    if wrong:
        problems.append(f"{len(wrong)} {what} different in {name} (e.g. "
                        + ", ".join(f"{k}: {got[k]} != expected {expected[k]}" for k in wrong[:3]) + ")")
    return problems, len(missing) + len(extra) + len(wrong)


def window_state(run_dir: Path, meta: dict, acks: pd.DataFrame, window_ms: int) -> dict:
    mark = int(meta["batch_watermark_ms"] or 0)
    starts = window_starts(acks["intended_ms"].to_numpy(), window_ms)
    truth = pd.Series(starts).value_counts()
    expected = {int(s): int(n) for s, n in truth.items() if s + window_ms > mark}
    rows = store(run_dir, meta, "default")
    got: dict[int, int] = {}
    for key, value in zip(rows["key"], rows["value"]):
        # the grouping key is the window struct (whatever the query named it); the value its count buffer
        window = next(v for v in key.values() if isinstance(v, dict) and "start" in v)
        got[int(pd.Timestamp(window["start"]).value // 1_000_000)] = int(next(iter(value.values())))
    problems, n = _compare("the aggregation's store", expected, got, "window(s)")
    return {"ok": n == 0, "problems": problems, "watermark_ms": mark, "expected": len(expected),
            "found": len(got), "events_expected": int(sum(expected.values())), "events_found": int(sum(got.values())),
            "summary": f"{len(got)} open window(s) in the store at batch {meta['batch_id']} "
                       f"({sum(got.values())} events), {len(expected)} expected"}


def session_state(run_dir: Path, meta: dict, acks: pd.DataFrame, gap_ms: int) -> dict:
    """`acks` with their `key` (harness.oracles.with_keys)."""
    mark = int(meta["batch_watermark_ms"] or 0)
    all_sessions = expected_sessions(acks, gap_ms)
    _, open_ = split_sessions(all_sessions, gap_ms, mark)
    expected = {k: (int(s), int(e), int(c)) for k, s, e, c in
                zip(open_["key"], open_["start_ms"], open_["end_ms"], open_["count"])}
    value = store(run_dir, meta, "session")
    got = {k["key"]: (int(v["start_ms"]), int(v["end_ms"]), int(v["count"]))
           for k, v in zip(value["key"], value["value"])}
    problems, n = _compare("the session ValueState", expected, got, "session(s)")
    # the ListState: exactly the ids of each open session's events
    keyed = acks[acks["key"].notna()]
    t = np.floor(keyed["intended_ms"].to_numpy(dtype="float64")).astype("int64")
    ids_expected: dict = {}
    lookup = pd.DataFrame({"key": keyed["key"].to_numpy(dtype=object), "t": t,
                           "id": list(zip(keyed["producer"].astype(int), keyed["seq"].astype(int)))})
    bounds = pd.DataFrame([(k, s, e) for k, (s, e, _) in expected.items()], columns=["key", "start", "end"])
    inside = lookup.merge(bounds, on="key")
    inside = inside[(inside["t"] >= inside["start"]) & (inside["t"] <= inside["end"])]
    for key, group in inside.groupby("key"):
        ids_expected[key] = sorted(group["id"])
    listed = store(run_dir, meta, "events")
    ids_got: dict = {}
    for k, e in zip(listed["key"], listed["list_element"]):
        ids_got.setdefault(k["key"], []).append((int(e["producer"]), int(e["seq"])))
    ids_got = {k: sorted(v) for k, v in ids_got.items()}
    p, m = _compare("the events ListState", ids_expected, ids_got, "key(s)' event ids")
    problems += p
    n += m
    per_producer = inside.assign(producer=[i[0] for i in inside["id"]]).groupby(["key", "producer"]).size()
    map_expected = {(k, int(pr)): int(c) for (k, pr), c in per_producer.items()}
    mapped = store(run_dir, meta, "producers")
    map_got = {(k["key"], int(mk["producer"])): int(mv["count"])
               for k, mk, mv in zip(mapped["key"], mapped["user_map_key"], mapped["user_map_value"])}
    p, m = _compare("the producers MapState", map_expected, map_got, "(key, producer) count(s)")
    problems += p
    n += m
    timers_found = None
    if any(s["store"] == "timers" for s in meta.get("stores", [])):
        timers = store(run_dir, meta, "timers")
        expiry_col = next((c for c in timers.columns if c not in ("key", "partition_id")), None)
        timer_got = {}
        for k, v in zip(timers["key"], timers[expiry_col]):
            timer_got.setdefault(k["key"], []).append(int(v))
        timer_expected = {k: [e + gap_ms] for k, (_, e, _) in expected.items()}
        p, m = _compare("the registered timers", timer_expected, {k: sorted(v) for k, v in timer_got.items()},
                        "key(s)' timers")
        problems += p
        n += m
        timers_found = sum(len(v) for v in timer_got.values())
    return {"ok": n == 0, "problems": problems, "watermark_ms": mark, "expected": len(expected), "found": len(got),
            "events_expected": int(sum(c for _, _, c in expected.values())),
            "events_found": int(sum(len(v) for v in ids_got.values())), "timers_found": timers_found,
            "summary": f"{len(got)} open session(s) in the store at batch {meta['batch_id']} "
                       f"({sum(c for _, _, c in got.values())} events; list, map"
                       + (" and timers" if timers_found is not None else "") + f" checked), {len(expected)} expected"}


def read_state(run_dir: Path, oracle: str, params: dict, acked, state_dir: str = STATE_DIR) -> dict:
    """The query's final state against the one its oracle implies, for the `state_matches` check: `{"status":
    "compared", "outcome": ..., "meta": ...}`, or `{"status": "not_required" | "unknown", "detail": why}`.
    `acked`: a function returning the acked events (read only when the state is there to compare); with
    `state_dir`, another state read (the state at a change: the acked events it is compared with are then the
    ones its batch had read)."""
    if state_dir != STATE_DIR and not (Path(run_dir) / state_dir).exists():
        return {"status": "unknown", "detail": f"unknown: {state_dir}/ was not written (the state reader did not "
                                               "run: see spark/state-reader-*.log)"}
    if state_dir == STATE_DIR and not (Path(run_dir) / STATE_DIR).exists() and not any(
            e.get("event", "").startswith("state_read") for e in read_jsonl(Path(run_dir) / "timeline.jsonl")):
        return {"status": "not_required", "detail": "not required: the run was recorded by a harness without the "
                "state reader (no state_read on its timeline, no state/): its state was never read"}
    try:
        meta = read_meta(run_dir, state_dir)
    except (OSError, ValueError) as exc:
        return {"status": "unknown", "detail": f"unknown: {exc}"}
    try:
        acks = acked(meta)
        if oracle == "window_counts":
            outcome = window_state(run_dir, meta, acks, window_ms(params))
        else:
            outcome = session_state(run_dir, meta, with_keys(acks, producer_job(run_dir)), session_gap_ms(params))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return {"status": "unknown",
                "detail": f"unknown: the state read could not be compared: {type(exc).__name__}: {exc}"}
    return {"status": "compared", "outcome": outcome, "meta": meta}
