"""Oracles: the output a query under test should have produced, computed from the producers' history alone.

`events` is the checker itself (every acked event exactly once). `window_counts` judges an event-time tumbling
window count (harness.queries.windowed_count, or a user's query with the same output): every window the query
emitted must hold exactly the number of acked events whose intended time falls in it, no window may be emitted
twice, and every window the final watermark closed must have been emitted. Windows still open at the final
watermark are not judged unless emitted (append mode cannot have emitted them); their events are counted and
shown. A user's oracle is `package.module:function(acks, sink, params) -> {"ok": bool, "detail": str, ...}`,
or `function(acks, sink, params, run)` to get the run's facts too (RunFacts: its final watermark, its progress).

Window arithmetic is integer milliseconds: an event's instant is its intended time truncated to the millisecond
(what `event_time` holds, harness.spark.events) and its window starts at that instant minus its remainder modulo
the window (epoch-aligned, as Spark's tumbling windows are), so an event exactly on a boundary opens the next
window on both sides.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from harness.durations import spark_interval_ms
from harness.jsonl import read_jsonl
from harness.sink import read_sink

WINDOW_DEFAULT = "10 seconds"  # a window_counts query's `window` param when the scenario gives none
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def final_watermark_ms(progress: list[dict]) -> int:
    """The last event-time watermark the query reported (0 before any): the one its batch evicted with, so
    every window ending at or before it was written by then. Exact integer milliseconds."""
    marks = []
    for p in progress:
        mark = (p.get("eventTime") or {}).get("watermark")
        if mark:
            when = datetime.fromisoformat(mark.replace("Z", "+00:00"))
            marks.append((when - _EPOCH) // timedelta(milliseconds=1))
    return max(marks, default=0)


def _iso(ms: float) -> str:
    return (_EPOCH + timedelta(milliseconds=int(ms))).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def window_starts(intended_ms: np.ndarray, window_ms: int) -> np.ndarray:
    """Each event's window start (epoch ms, int64) from its intended time, as Spark assigns it."""
    instant = np.floor(np.asarray(intended_ms, dtype="float64")).astype("int64")
    return instant - np.mod(instant, int(window_ms))


def window_counts(acks: pd.DataFrame, sink: pd.DataFrame, window_ms: float, watermark_ms: float) -> dict:
    """Judge a window count's output (`window_start_ms`, `count`) against the acked history; `watermark_ms` is
    the final watermark the query reported."""
    window = int(window_ms)
    if "window_start_ms" not in sink or "count" not in sink:
        if len(sink):
            raise ValueError(f"the sink has no window_start_ms/count columns (it has {list(sink.columns)})")
        sink = pd.DataFrame({"window_start_ms": pd.Series(dtype="float64"), "count": pd.Series(dtype="int64")})
    truth = pd.Series(window_starts(acks["intended_ms"].to_numpy(), window)).value_counts().sort_index()
    got = pd.DataFrame({"start": np.rint(sink["window_start_ms"].to_numpy(dtype="float64")).astype("int64"),
                        "count": sink["count"].to_numpy(dtype="int64")})
    if "batch_id" in sink:
        got = got.assign(batch_id=sink["batch_id"].to_numpy()).sort_values("batch_id", kind="stable")
    emitted_twice = int(got["start"].duplicated().sum())
    got = got.drop_duplicates("start", keep="first").set_index("start")["count"]
    wrong = {int(w): (int(c), int(truth.get(w, 0))) for w, c in got.items() if int(truth.get(w, 0)) != int(c)}
    closed = truth[truth.index.to_numpy() + window <= watermark_ms]
    missing = [int(w) for w in closed.index if w not in got.index]
    open_ = truth[truth.index.to_numpy() + window > watermark_ms]
    ok = not wrong and not missing and not emitted_twice and len(got) > 0
    if ok:
        detail = (f"{len(got)} window(s) emitted, each count equal to the history's "
                  f"({int(got.sum())} of {int(truth.sum())} acked events)")
    elif len(got) == 0 and not missing:
        detail = "no window emitted: the final watermark closed none (too little traffic for window + watermark?)"
    else:
        detail = (f"{len(wrong)} windows with wrong counts (window start ms: (got, expected)) "
                  f"{dict(list(wrong.items())[:5])}; {len(missing)} closed windows never emitted "
                  f"{missing[:5]}; {emitted_twice} windows emitted twice; {len(got)} emitted")
    mark = _iso(watermark_ms)
    detail += (f"; {len(open_)} window(s) ({int(open_.sum())} events) still open at the final watermark {mark}, "
               "not judged")
    return {"ok": ok, "detail": detail, "window_ms": window, "final_watermark_ms": int(watermark_ms),
            "final_watermark": mark,
            "windows_expected_closed": int(len(closed)), "windows_emitted": int(len(got)),
            "windows_wrong": len(wrong), "windows_missing": len(missing), "windows_twice": emitted_twice,
            "windows_open": int(len(open_)), "events_acked": int(truth.sum()),
            "events_in_closed_windows": int(closed.sum()), "events_in_emitted_windows": int(got.sum()),
            "events_in_open_windows": int(open_.sum()),
            "wrong_examples": {str(w): {"got": g, "expected": e} for w, (g, e) in list(wrong.items())[:10]}}


@dataclass(frozen=True)
class RunFacts:
    """What a user's oracle with a fourth parameter gets besides the history and the output: the run directory,
    every StreamingQueryProgress record (progress.jsonl) and the final event-time watermark (epoch ms, 0 before
    any), the one the query's last batch evicted state with."""
    run_dir: Path
    progress: list
    final_watermark_ms: int


def _wants_run(function) -> bool:
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) >= 4


def run_oracle(oracle: str, acks: pd.DataFrame, run_dir: Path, params: dict, sink: pd.DataFrame | None = None) -> dict:
    """The oracle's verdict on the run's output: `sink` when given (what a query that owns its sink read back),
    else every row of the Parquet sink."""
    if sink is None:
        sink = read_sink(run_dir / "sink", columns=None)
    progress = read_jsonl(run_dir / "progress.jsonl")
    if oracle == "window_counts":
        window = spark_interval_ms(params.get("window", WINDOW_DEFAULT))
        if window != int(window) or window < 1:
            raise ValueError(f"query_params.window = {params.get('window')!r}: not a whole number of milliseconds")
        return window_counts(acks, sink, window, final_watermark_ms(progress))
    module, _, attr = oracle.partition(":")
    function = getattr(importlib.import_module(module), attr)
    if _wants_run(function):
        return dict(function(acks, sink, params, RunFacts(run_dir, progress, final_watermark_ms(progress))))
    return dict(function(acks, sink, params))
