"""Oracles: the output a query under test should have produced, computed from the producers' history alone.

`events` is the checker itself (every acked event exactly once). `window_counts` judges an event-time tumbling
window count (harness.queries.windowed_count, or a user's query with the same output): every window the query
emitted must hold exactly the number of acked events whose intended time falls in it, no window may be emitted
twice, and every window the final watermark closed must have been emitted. A user's oracle is
`package.module:function(acks, sink, params) -> {"ok": bool, "detail": str, ...}`.
"""
from __future__ import annotations

import importlib
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from harness.jsonl import read_jsonl
from harness.sink import read_sink


def interval_ms(text: str) -> float:
    """'10 seconds' / '1 minute' / '500 milliseconds' (Spark's interval words) in milliseconds."""
    number, unit = str(text).split()
    unit = unit.lower().rstrip("s")
    scale = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000}.get(unit)
    if scale is None:
        raise ValueError(f"interval {text!r}: unit must be milliseconds, seconds, minutes or hours")
    return float(number) * scale


def final_watermark_ms(progress: list[dict]) -> float:
    """The last event-time watermark the query reported (0 before any)."""
    marks = [p.get("eventTime", {}).get("watermark") for p in progress]
    marks = [datetime.fromisoformat(m.replace("Z", "+00:00")).timestamp() * 1000.0 for m in marks if m]
    return max(marks, default=0.0)


def window_counts(acks: pd.DataFrame, sink: pd.DataFrame, window_ms: float, watermark_ms: float) -> dict:
    expected = (np.floor(acks["intended_ms"].to_numpy() / window_ms) * window_ms).astype("int64")
    truth = pd.Series(expected).value_counts().sort_index()
    got = sink.assign(start=sink["window_start_ms"].round().astype("int64"))
    emitted_twice = int(got["start"].duplicated().sum())
    got = got.drop_duplicates("start", keep="first").set_index("start")["count"].astype("int64")
    wrong = {int(w): (int(c), int(truth.get(w, 0))) for w, c in got.items() if int(truth.get(w, 0)) != int(c)}
    closed = [int(w) for w in truth.index if w + window_ms <= watermark_ms]
    missing = [w for w in closed if w not in got.index]
    open_windows = int(sum(1 for w in truth.index if w + window_ms > watermark_ms))
    ok = not wrong and not missing and not emitted_twice and len(got) > 0
    detail = (f"{len(got)} windows emitted, counts equal the history's" if ok else
              f"{len(wrong)} windows with wrong counts (window start ms: (got, expected)) "
              f"{dict(list(wrong.items())[:5])}; {len(missing)} closed windows never emitted; "
              f"{emitted_twice} windows emitted twice; {len(got)} emitted")
    return {"ok": ok, "detail": detail + f"; {open_windows} windows still open at the final watermark",
            "windows_emitted": int(len(got)), "windows_wrong": len(wrong), "windows_missing": len(missing),
            "windows_twice": emitted_twice, "windows_open": open_windows,
            "events_in_emitted_windows": int(got.sum()), "final_watermark_ms": watermark_ms}


def run_oracle(oracle: str, acks: pd.DataFrame, run_dir: Path, params: dict) -> dict:
    sink = read_sink(run_dir / "sink", columns=None)
    if oracle == "window_counts":
        return window_counts(acks, sink, interval_ms(params.get("window", "10 seconds")),
                             final_watermark_ms(read_jsonl(run_dir / "progress.jsonl")))
    module, _, attr = oracle.partition(":")
    return dict(getattr(importlib.import_module(module), attr)(acks, sink, params))
