"""Oracles: the output a query under test should have produced, computed from the producers' history alone.

`events` is the checker itself (every acked event exactly once). `sessions` judges sessions per key closed after
a gap of inactivity (harness.queries.sessions), each event's key rebuilt from its producer's seed (below).
`window_counts` judges an event-time tumbling
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
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from harness.text.durations import spark_interval_ms
from harness.files.jsonl import read_jsonl
from harness.sinks.parquet.files import read_sink
from harness.producers.keys import make_key_chooser
from harness.producers.spec import KeysSpec
from harness.queries import WINDOW_DEFAULT
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
        return window_counts(acks, sink, window_ms(params), final_watermark_ms(progress))
    if oracle == "sessions":
        keyed = with_keys(acks, producer_job(run_dir))
        return sessions(keyed, sink, session_gap_ms(params), final_watermark_ms(progress))
    module, _, attr = oracle.partition(":")
    function = getattr(importlib.import_module(module), attr)
    if _wants_run(function):
        return dict(function(acks, sink, params, RunFacts(run_dir, progress, final_watermark_ms(progress))))
    return dict(function(acks, sink, params))


def window_ms(params: dict) -> int:
    window = spark_interval_ms(params.get("window", WINDOW_DEFAULT))
    if window != int(window) or window < 1:
        raise ValueError(f"query_params.window = {params.get('window')!r}: not a whole number of milliseconds")
    return int(window)


# -- sessions per key ----------------------------------------------------------------------------------------------
SESSION_GAP_DEFAULT = "5 seconds"  # a sessions query's `gap` param when the scenario gives none


def session_gap_ms(params: dict) -> int:
    gap = spark_interval_ms(params.get("gap", SESSION_GAP_DEFAULT))
    if gap != int(gap) or gap < 1:
        raise ValueError(f"query_params.gap = {params.get('gap')!r}: not a whole number of milliseconds, at least 1")
    return int(gap)


def producer_job(run_dir: Path) -> dict:
    """The producers' job as the fleet recorded it (producers/job.json): the keys spec, seed and partitions the
    keys are rebuilt from."""
    path = Path(run_dir) / "producers" / "job.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read the producers' job (the keys are rebuilt from it): {exc}") from None


def with_keys(acks: pd.DataFrame, job: dict) -> pd.DataFrame:
    """`acks` with each event's `key` (text; None for keys `none`), rebuilt as the producer process drew it: the
    process with index i draws its keys from make_key_chooser(keys, partitions, seed * 1009 + i) one per
    sequence number, in sequence order (producers/process.py; the chooser's stream does not depend on how the
    draws are batched). Why rebuilt: the ack history records no key, and the query reads the real record's key
    from the broker, so the two sides meet only if the producers sent what the seed says. Events a fault wrote
    itself (producer >= harness.effects.FAULT_PRODUCER_BASE) have no process seed: refused."""
    from pydantic import TypeAdapter

    spec = TypeAdapter(KeysSpec).validate_python(job["keys"])
    backend = job.get("placement") or job["backend"]
    keys = np.full(len(acks), None, dtype=object)
    producers = acks["producer"].to_numpy()
    seqs = acks["seq"].to_numpy(dtype="int64")
    for p in np.unique(producers):
        if int(p) >= int(job.get("processes", 1)) or int(p) < 0:
            raise ValueError(f"producer {int(p)} is not one of the job's {job.get('processes', 1)} processes: its "
                             "keys cannot be rebuilt from a seed")
        rows = np.flatnonzero(producers == p)
        drawn, _ = make_key_chooser(spec, int(job["partitions"]), int(job["seed"]) * 1009 + int(p),
                                    backend=backend).next_columns(int(seqs[rows].max()) + 1)
        if drawn is None:
            continue
        table = np.array([k.decode("ascii") if isinstance(k, bytes) else k for k in drawn] + [None],
                         dtype=object)[:-1]
        keys[rows] = table[seqs[rows]]
    return acks.assign(key=keys)


def expected_sessions(acks: pd.DataFrame, gap_ms: int) -> pd.DataFrame:
    """Every session of the keyed history: per key, events ordered by instant (the intended time truncated to the
    millisecond) split wherever two consecutive instants are `gap_ms` or more apart. Columns key, start_ms,
    end_ms, count, producers (distinct producers in it). Events without a key are not in any session (Spark
    groups them under a null key; the query's output shows them as such and the oracle counts them apart)."""
    frame = pd.DataFrame({"key": acks["key"].to_numpy(dtype=object),
                          "t": np.floor(acks["intended_ms"].to_numpy(dtype="float64")).astype("int64"),
                          "producer": acks["producer"].to_numpy()})
    frame = frame[frame["key"].notna()].sort_values(["key", "t"], kind="stable")
    if frame.empty:
        return pd.DataFrame({"key": pd.Series(dtype=object), "start_ms": pd.Series(dtype="int64"),
                             "end_ms": pd.Series(dtype="int64"), "count": pd.Series(dtype="int64"),
                             "producers": pd.Series(dtype="int64")})
    new_key = frame["key"].ne(frame["key"].shift())
    gap = frame["t"].diff().fillna(0).to_numpy() >= gap_ms
    frame["session"] = np.cumsum(new_key.to_numpy() | gap)
    out = frame.groupby("session", sort=False).agg(key=("key", "first"), start_ms=("t", "min"), end_ms=("t", "max"),
                                                    count=("t", "size"), producers=("producer", "nunique"))
    return out.reset_index(drop=True)


def split_sessions(expected: pd.DataFrame, gap_ms: int, watermark_ms: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(closed, open) once every event was processed and the watermark reached `watermark_ms`: a session is closed
    by its key's next event (one `gap` or more after its end) or by its timer (end + gap), which fires once the
    watermark reaches it: PySpark 4.3's transformWithStateInPandas fired a timer whose expiry equalled the batch's
    watermark to the millisecond (seen in a `sessions` run: a session ending 6 s before the last event, gap and
    watermark delay 3 s each, was emitted by the last batch). So only a key's last session can still be open."""
    fired = (expected["end_ms"].to_numpy() + int(gap_ms)) <= watermark_ms
    last = ~expected["key"].duplicated(keep="last").to_numpy()
    closed = fired | ~last
    return expected[closed], expected[~closed]


def sessions(acks: pd.DataFrame, sink: pd.DataFrame, gap_ms: int, watermark_ms: float) -> dict:
    """Judge a sessions output (`key`, `session_start_ms`, `session_end_ms`, `count`; `listed` and `producers`
    when present) against the keyed history (`acks` with `key`, harness.oracles.with_keys): every session the
    final watermark closed emitted exactly once, with its start, end and count (and its list and map state's
    sizes: the events and the producers it holds); nothing else emitted. Open sessions are not judged here
    (the state check reads them where they live, harness.checkers.state)."""
    expected = expected_sessions(acks, gap_ms)
    closed, open_ = split_sessions(expected, gap_ms, watermark_ms)
    need = ("key", "session_start_ms", "session_end_ms", "count")
    if any(c not in sink for c in need):
        if len(sink):
            raise ValueError(f"the sink has no {'/'.join(need)} columns (it has {list(sink.columns)})")
        sink = pd.DataFrame({c: pd.Series(dtype=object if c == "key" else "float64") for c in need})
    got = pd.DataFrame({"key": sink["key"].to_numpy(dtype=object),
                        "start_ms": np.rint(sink["session_start_ms"].to_numpy(dtype="float64")).astype("int64"),
                        "end_ms": np.rint(sink["session_end_ms"].to_numpy(dtype="float64")).astype("int64"),
                        "count": sink["count"].to_numpy(dtype="int64")})
    for extra, like in (("listed", "count"), ("producers", "producers")):
        got[extra] = sink[extra].to_numpy(dtype="int64") if extra in sink else None
    ident = ["key", "start_ms"]
    twice = got[got.duplicated(ident, keep=False)]
    emitted_twice = int(got.duplicated(ident).sum())
    got_once = got.drop_duplicates(ident, keep="first")
    merged = closed.merge(got_once, on=ident, how="outer", suffixes=("", "_got"), indicator=True)
    missing = merged[merged["_merge"] == "left_only"]
    unexpected = merged[merged["_merge"] == "right_only"]
    both = merged[merged["_merge"] == "both"]
    wrong_mask = (both["end_ms"] != both["end_ms_got"]) | (both["count"] != both["count_got"])
    if got["listed"].notna().all():
        wrong_mask |= both["count"] != both["listed"].astype("int64")
    if got["producers"].notna().all():
        wrong_mask |= both["producers"] != both["producers_got"].astype("int64")
    wrong = both[wrong_mask]
    ok = not len(missing) and not len(unexpected) and not len(wrong) and not emitted_twice and len(got) > 0

    def examples(frame: pd.DataFrame, cols: list[str]) -> list[dict]:
        return [{c: (v.item() if hasattr(v, "item") else v) for c, v in row.items()}
                for row in frame[cols].head(5).to_dict("records")]

    mark = _iso(watermark_ms)
    if ok:
        detail = (f"{len(got)} closed session(s) emitted once each, start, end and count equal to the history's "
                  f"({int(got['count'].sum())} events)")
    elif len(got) == 0 and not len(missing):
        detail = "no session emitted: the final watermark closed none (too little traffic for gap + watermark?)"
    else:
        detail = (f"{len(wrong)} sessions with a wrong end/count/state size, {len(missing)} closed sessions never "
                  f"emitted, {len(unexpected)} emitted sessions the history does not have, {emitted_twice} "
                  f"emitted twice; {len(got)} emitted")
    detail += (f"; {len(open_)} session(s) ({int(open_['count'].sum())} events) still open at the final watermark "
               f"{mark}, not judged here")
    return {"ok": ok, "detail": detail, "gap_ms": int(gap_ms), "final_watermark_ms": int(watermark_ms),
            "final_watermark": mark, "sessions_expected_closed": int(len(closed)), "sessions_emitted": int(len(got)),
            "sessions_wrong": int(len(wrong)), "sessions_missing": int(len(missing)),
            "sessions_unexpected": int(len(unexpected)), "sessions_twice": emitted_twice,
            "sessions_open": int(len(open_)), "events_acked": int(len(acks)),
            "events_keyless": int(acks["key"].isna().sum()),
            "events_in_closed_sessions": int(closed["count"].sum()), "events_in_open_sessions": int(open_["count"].sum()),
            "wrong_examples": examples(wrong, ["key", "start_ms", "end_ms", "end_ms_got", "count", "count_got"]),
            "missing_examples": examples(missing, ["key", "start_ms", "end_ms", "count"]),
            "unexpected_examples": examples(unexpected, ["key", "start_ms", "end_ms_got", "count_got"]),
            "twice_examples": examples(twice, ["key", "start_ms", "end_ms", "count"])}
