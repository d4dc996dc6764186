"""The sessions oracle and the state comparison on hand-built histories whose sessions are known by construction
(written out below, not computed by the code under test), the keys rebuilt from a producer's seed held to the
key chooser the producers draw from, and the state check's statuses."""
import json

import numpy as np
import pandas as pd
import pytest
from pydantic import TypeAdapter

from harness.analysis.state import session_state, window_state
from harness.oracles import expected_sessions, sessions, with_keys
from harness.queries import resolve
from harness.producers.keys import make_key_chooser
from harness.producers.spec import KeysSpec

T0 = 1_795_000_000_000
GAP = 3_000

# key -> event instants (offsets from T0, ms) and, by hand, the sessions they form with a 3 s gap
EVENTS = {"a": [0, 1_000, 3_999, 7_000, 7_500], "b": [500, 10_000], "c": [20_000, 22_999.7]}
# a: 0..3999 (diffs 1000, 2999 < 3000), then 7000 - 3999 = 3001 >= gap -> new session 7000..7500
# b: 500 alone, 10000 alone; c: 20000 and 22999 (22999.7 truncated; diff 2999 < gap) together
SESSIONS = [("a", 0, 3_999, 3), ("a", 7_000, 7_500, 2), ("b", 500, 500, 1), ("b", 10_000, 10_000, 1),
            ("c", 20_000, 22_999, 2)]


def acks() -> pd.DataFrame:
    rows = [(k, T0 + t) for k, ts in EVENTS.items() for t in ts]
    return pd.DataFrame({"key": [k for k, _ in rows], "intended_ms": [t for _, t in rows],
                         "producer": np.zeros(len(rows), dtype="int32"), "seq": np.arange(len(rows))})


def out(rows) -> pd.DataFrame:
    return pd.DataFrame({"key": [r[0] for r in rows], "session_start_ms": [float(T0 + r[1]) for r in rows],
                         "session_end_ms": [float(T0 + r[2]) for r in rows],
                         "count": np.array([r[3] for r in rows], dtype="int64"),
                         "listed": np.array([r[3] for r in rows], dtype="int64"),
                         "producers": np.ones(len(rows), dtype="int64")})


def test_sessions_split_at_the_gap_as_written_by_hand():
    got = expected_sessions(acks(), GAP)
    rows = sorted((k, int(s) - T0, int(e) - T0, int(c)) for k, s, e, c in
                  zip(got["key"], got["start_ms"], got["end_ms"], got["count"]))
    assert rows == sorted(SESSIONS)


# watermark T0 + 14 s: a's two sessions and b's first are closed (a's first by a's next event, a's second by its
# timer 10500 <= 14000), b's second (timer 13000 <= 14000) too; c's (timer 25999) is still open
MARK = T0 + 14_000
CLOSED = [s for s in SESSIONS if s[0] != "c"]


def test_the_closed_sessions_emitted_once_pass():
    res = sessions(acks(), out(CLOSED), GAP, MARK)
    assert res["ok"], res["detail"]
    assert (res["sessions_expected_closed"], res["sessions_open"], res["events_in_open_sessions"]) == (4, 1, 2)


def test_a_session_closed_by_the_next_event_is_expected_even_before_its_timer():
    # watermark T0 + 5 s: a's first session's timer (6999) has not fired, but a's event at 7000 closed it
    res = sessions(acks(), out([SESSIONS[0], SESSIONS[2]]), GAP, T0 + 5_000)
    assert res["ok"], res["detail"]


def test_a_timer_at_exactly_the_watermark_has_fired():
    # b's second session: timer at 13000. PySpark 4.3 fired a timer equal to the batch's watermark (a real
    # sessions run emitted such a session in its last batch), so at T0 + 13 s it is closed, at 12.999 s open
    assert sessions(acks(), out(CLOSED), GAP, T0 + 13_000)["ok"]
    res = sessions(acks(), out(CLOSED), GAP, T0 + 12_999)
    assert not res["ok"] and res["sessions_unexpected"] == 1


@pytest.mark.parametrize("mutate, field", [
    (lambda rows: rows[:-1], "sessions_missing"),
    (lambda rows: rows + [rows[0]], "sessions_twice"),
    (lambda rows: [(rows[0][0], rows[0][1], rows[0][2], rows[0][3] + 1)] + rows[1:], "sessions_wrong"),
    (lambda rows: rows + [("c", 20_000, 22_999, 2)], "sessions_unexpected"),
])
def test_a_mutated_output_fails(mutate, field):
    res = sessions(acks(), out(mutate(list(CLOSED))), GAP, MARK)
    assert not res["ok"] and res[field] == 1, res["detail"]


def test_a_wrong_list_state_size_fails():
    frame = out(CLOSED)
    frame.loc[0, "listed"] = frame.loc[0, "count"] + 1
    assert not sessions(acks(), frame, GAP, MARK)["ok"]


def test_nothing_emitted_is_not_a_pass():
    assert not sessions(acks(), out([]), GAP, T0)["ok"]


def test_keys_rebuilt_from_the_seed_are_the_producers_draws():
    job = {"keys": {"kind": "uniform", "count": 50}, "partitions": 4, "seed": 7, "processes": 2,
           "backend": "kafka"}
    spec = TypeAdapter(KeysSpec).validate_python(job["keys"])
    # what each producer process sent, drawn in batches of different sizes (the chooser's stream is the same)
    sent = {}
    for p in (0, 1):
        chooser = make_key_chooser(spec, 4, 7 * 1009 + p)
        drawn = chooser.next_columns(3)[0] + chooser.next_columns(17)[0]
        sent.update({(p, s): k.decode() for s, k in enumerate(drawn)})
    frame = pd.DataFrame({"producer": [0, 1, 0, 1], "seq": [19, 0, 4, 11], "intended_ms": [0.0] * 4})
    assert list(with_keys(frame, job)["key"]) == [sent[(0, 19)], sent[(1, 0)], sent[(0, 4)], sent[(1, 11)]]
    with pytest.raises(ValueError, match="producer 10000"):
        with_keys(pd.DataFrame({"producer": [10_000], "seq": [0], "intended_ms": [0.0]}), job)


def test_sessions_query_params_are_checked():
    q = resolve("sessions")
    assert q.oracle == "sessions"
    assert q.check_params({"gap": "2 seconds", "watermark": "0 seconds"}) is None
    assert "gap" in q.check_params({"gap": "soon"})
    assert "ttl" in q.check_params({"ttl": "1 hour"})  # refused: Spark has no TTL with event-time timers


# -- the state read back (state/, as harness.spark.state_dump writes it) ------------------------------------------
def write_state(tmp_path, stores: dict[str, pd.DataFrame], watermark: int, batch: int = 9):
    d = tmp_path / "state"
    d.mkdir()
    entries = []
    for label, frame in stores.items():
        frame = frame.copy()
        for col in frame.columns:
            if col != "partition_id":
                frame[col] = [json.dumps({col: v}) for v in frame[col]]
        frame.to_parquet(d / f"0-{label}.parquet", index=False)
        entries.append({"operator": 0, "store": label, "file": f"0-{label}.parquet", "rows": len(frame)})
    meta = {"batch_id": batch, "batch_watermark_ms": watermark, "stores": entries, "took_s": 4.0}
    (d / "meta.json").write_text(json.dumps(meta))
    return meta


def session_stores(open_sessions, ids, timers):
    return {
        "session": pd.DataFrame({"key": [{"key": k} for k, *_ in open_sessions],
                                 "value": [{"start_ms": T0 + s, "end_ms": T0 + e, "count": c}
                                           for _, s, e, c in open_sessions], "partition_id": 0}),
        "events": pd.DataFrame({"key": [{"key": k} for k, _ in ids],
                                "list_element": [{"producer": 0, "seq": s} for _, s in ids], "partition_id": 0}),
        "producers": pd.DataFrame({"key": [{"key": k} for k, *_ in open_sessions],
                                   "user_map_key": [{"producer": 0}] * len(open_sessions),
                                   "user_map_value": [{"count": c} for *_, c in open_sessions], "partition_id": 0}),
        "timers": pd.DataFrame({"key": [{"key": k} for k, _ in timers],
                                "expiration_timestamp_ms": [T0 + t for _, t in timers], "partition_id": 0}),
    }


# at MARK only c's session is open: its events are seq 7 and 8 (acks() numbers a's 0-4, b's 5-6, c's 7-8), its
# timer at 22999 + 3000
OPEN = [("c", 20_000, 22_999, 2)]


def test_the_open_sessions_in_the_store_pass(tmp_path):
    meta = write_state(tmp_path, session_stores(OPEN, [("c", 7), ("c", 8)], [("c", 25_999)]), MARK)
    res = session_state(tmp_path, meta, acks(), GAP)
    assert res["ok"], res["problems"]
    assert (res["expected"], res["found"], res["events_found"], res["timers_found"]) == (1, 1, 2, 1)


@pytest.mark.parametrize("stores, what", [
    (session_stores([("c", 20_000, 22_999, 3)], [("c", 7), ("c", 8)], [("c", 25_999)]), "ValueState"),
    (session_stores(OPEN, [("c", 7)], [("c", 25_999)]), "ListState"),
    (session_stores(OPEN, [("c", 7), ("c", 8)], []), "timers"),
    (session_stores(OPEN + [("b", 10_000, 10_000, 1)], [("c", 7), ("c", 8)], [("c", 25_999)]), "ValueState"),
])
def test_a_wrong_store_fails_naming_it(tmp_path, stores, what):
    meta = write_state(tmp_path, stores, MARK)
    res = session_state(tmp_path, meta, acks(), GAP)
    assert not res["ok"] and any(what in p for p in res["problems"]), res["problems"]


def window_store(windows: dict[int, int]) -> dict:
    iso = lambda ms: pd.Timestamp(ms, unit="ms", tz="UTC").isoformat().replace("+00:00", "Z")  # noqa: E731
    return {"default": pd.DataFrame({"key": [{"w": {"start": iso(T0 + s), "end": iso(T0 + s + 5_000)}}
                                             for s in windows],
                                     "value": [{"count": c} for c in windows.values()], "partition_id": 0})}


def test_window_state_holds_the_windows_not_yet_evicted(tmp_path):
    # 5 s windows; events at 0..22999.7 fall in windows 0 (3), 5000 (2), 10000 (1), 20000 (2: 20000, 22999.7)...
    history = acks()
    # by hand: 0,500,1000,3999 -> [0,5000): 4; 7000,7500 -> [5000,10000): 2; 10000 -> [10000,15000): 1;
    # 20000, 22999.7 -> [20000,25000): 2. Watermark T0 + 15 s evicts the windows ending at or below it.
    meta = write_state(tmp_path, window_store({20_000: 2}), T0 + 15_000)
    res = window_state(tmp_path, meta, history, 5_000)
    assert res["ok"], res["problems"]
    meta2 = window_store({20_000: 2, 10_000: 1})
    (tmp_path / "state").rename(tmp_path / "old")
    meta = write_state(tmp_path, meta2, T0 + 15_000)
    res = window_state(tmp_path, meta, history, 5_000)
    assert not res["ok"] and "does not imply" in " ".join(res["problems"])


# -- the check's statuses when the state is not there to compare ---------------------------------------------------
def view(tmp_path, oracle="sessions", failed=False, timeline=()):
    from types import SimpleNamespace

    from harness.analysis.state import read_state

    def no_acks(meta):
        raise AssertionError("the history is read only when there is a state to compare")

    (tmp_path / "timeline.jsonl").write_text("".join(json.dumps({"event": e}) + "\n" for e in timeline))
    measured = None if failed or oracle == "events" else read_state(tmp_path, oracle, {}, no_acks)
    return SimpleNamespace(query_def=SimpleNamespace(oracle=oracle), run_dir=tmp_path,
                           faults=SimpleNamespace(failed_as_expected=failed), state_read=measured)


def test_state_matches_is_unknown_never_passed_when_the_reader_ran_and_left_nothing(tmp_path):
    from harness.checkers.state import state_matches

    (check,) = state_matches(view(tmp_path, timeline=["state_read_started"]))
    assert check.status == "unknown" and "not written" in check.detail
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "meta.json").write_text(json.dumps({"error": "AnalysisException: boom"}))
    (check,) = state_matches(view(tmp_path, timeline=["state_read_started"]))
    assert check.status == "unknown" and "boom" in check.detail


def test_state_matches_not_required_or_absent_where_no_state_is_implied(tmp_path):
    from harness.checkers.state import state_matches

    assert state_matches(view(tmp_path, oracle="events")) == []
    (check,) = state_matches(view(tmp_path, failed=True))
    assert check.status == "not required" and "declared" in check.detail
    (check,) = state_matches(view(tmp_path))  # a run recorded before the state reader: said, not passed
    assert check.status == "not required" and "without the state reader" in check.detail
