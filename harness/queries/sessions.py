"""A custom-state query (Spark 4's transformWithStateInPandas): sessions per key, closed by an event-time timer
after `gap` of inactivity, one row per closed session.

Why this one: it is the shape users move to on Spark 4 (a StatefulProcessor with value, list and map state and
event-time timers) and the one whose failure modes (a timer lost or fired twice after a restart, state
restored from the wrong version) a driver kill exposes. Its oracle (`sessions`, harness.oracles) rebuilds the
sessions from the producers' history alone.

Params (Spark's interval words, parsed by harness.text.durations as the oracle parses them): `gap` (default
"5 seconds") and `watermark` (default "10 seconds": the event-time watermark delay; an event later than it is
dropped by Spark and the oracle then finds its session's count short, which is the query's real behaviour).

No TTL: Spark refuses TTL on the state of a processor whose time mode is EventTime
([STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL], found by running it on PySpark 4.3), and sessions
closed by event time are what the oracle can rebuild from the history (processing-time TTL is not). The timer is
what clears a session's state here.

Semantics (the oracle's, exactly): per key (the record's key, the events' `key` column), events sorted by their
instant (intended time truncated to the millisecond) split into sessions wherever two consecutive instants are
`gap` or more apart. A session is kept in state (ValueState `session`: start, end, count; ListState `events`:
each event's id; MapState `producers`: events per producer) with a timer at end + gap; the timer fires once the
watermark reaches it (an expiry equal to the batch's watermark fires) and the session is written then: `key`, `session_start_ms`, `session_end_ms` (double, epoch ms), `count`, `listed` (the list
state's length) and `producers` (the map state's size). An event arriving `gap` or more after the open session's
end closes that session first (the same split whether the timer or the event comes first).

`last_seq = true` adds a field to the session's ValueState (`last_seq`, the sequence number of the latest event
a batch added to it): the state schema evolution a change rehearsal (harness.faults.change) rolls out on a running
checkpoint, which Spark 4 allows for transformWithState with the Avro state encoding
(`spark.sql.streaming.stateStore.encodingFormat = "avro"`): a session phase A stored reads back with the new field
null. The output and the oracle are the same either way.

Output mode append (the Parquet sink's): a session is written once, when it closes. The state store must be
RocksDB (Spark refuses transformWithState on another provider): the query sets it on its session whatever the
scenario says (a restarted query keeps the provider its checkpoint recorded).
"""
from __future__ import annotations

from harness.text.durations import spark_interval_ms

DEFAULTS = {"gap": "5 seconds", "watermark": "10 seconds", "last_seq": False}
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
OUTPUT = ("key STRING, session_start_ms DOUBLE, session_end_ms DOUBLE, count LONG, listed LONG, producers INT")
SESSION_STATE = "start_ms LONG, end_ms LONG, count LONG"
LAST_SEQ = ", last_seq LONG"  # the field `last_seq = true` adds
EVENT_STATE = "producer INT, seq LONG"


def durations_ms(params: dict) -> dict[str, int]:
    """gap and watermark in whole milliseconds; ValueError naming the param otherwise."""
    out = {}
    for name, least in (("gap", 1), ("watermark", 0)):
        text = params.get(name, DEFAULTS[name])
        try:
            ms = spark_interval_ms(text)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        if ms != int(ms) or ms < least:
            raise ValueError(f"{name} = {text!r}: must be a whole number of milliseconds, at least {least}")
        out[name] = int(ms)
    return out


def check(params: dict) -> str | None:
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        return f"{unknown} not known to sessions; allowed: {', '.join(DEFAULTS)}"
    if not isinstance(params.get("last_seq", False), bool):
        return f"last_seq = {params['last_seq']!r}: true or false"
    try:
        durations_ms(params)
    except ValueError as exc:
        return str(exc)
    return None


def processor(gap_ms: int, last_seq: bool = False):
    """The StatefulProcessor, made here so that pyspark is imported only in the query process."""
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    columns = ["key", "session_start_ms", "session_end_ms", "count", "listed", "producers"]

    class Sessions(StatefulProcessor):
        def init(self, handle) -> None:
            self.handle = handle
            self.session = handle.getValueState("session", SESSION_STATE + (LAST_SEQ if last_seq else ""))
            self.events = handle.getListState("events", EVENT_STATE)
            self.producers = handle.getMapState("producers", "producer INT", "count LONG")

        def _close(self, key: str, start: int, end: int, count: int) -> list:
            """The closed session's row; its state cleared."""
            listed = sum(1 for _ in self.events.get())
            producers = sum(1 for _ in self.producers.keys())
            self.session.clear()
            self.events.clear()
            self.producers.clear()
            return [key, float(start), float(end), int(count), int(listed), int(producers)]

        def handleInputRows(self, key, rows, timerValues):
            frame = pd.concat(list(rows), ignore_index=True)
            instants = (frame["intended_ms"].to_numpy(dtype="float64") // 1).astype("int64")
            order = instants.argsort(kind="stable")
            producers, seqs = frame["producer"].to_numpy(), frame["seq"].to_numpy()
            state = self.session.get() if self.session.exists() else None
            start, end, count = (int(v) for v in state[:3]) if state else (None, None, 0)
            if end is not None:
                self.handle.deleteTimer(end + gap_ms)
            out, added, per_producer = [], [], {}
            for i in order:
                t = int(instants[i])
                if end is not None and t >= end + gap_ms:  # this event opens the next session
                    self._flush(added, per_producer)
                    added, per_producer = [], {}
                    out.append(self._close(key[0], start, end, count))
                    start, end, count = None, None, 0
                start = t if start is None else min(start, t)
                end = t if end is None else max(end, t)
                count += 1
                added.append((int(producers[i]), int(seqs[i])))
                per_producer[int(producers[i])] = per_producer.get(int(producers[i]), 0) + 1
            self._flush(added, per_producer)
            latest = int(seqs[order[-1]])  # the latest instant's event (the stable sort keeps ties in arrival order)
            self.session.update((start, end, count, latest) if last_seq else (start, end, count))
            self.handle.registerTimer(end + gap_ms)
            if out:
                yield pd.DataFrame(out, columns=columns)

        def _flush(self, added: list, per_producer: dict) -> None:
            if added:
                self.events.appendList(added)
            for p, n in per_producer.items():
                before = self.producers.getValue((p,))
                self.producers.updateValue((p,), ((before[0] if before else 0) + n,))

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            state = self.session.get() if self.session.exists() else None
            if state is None or int(state[1]) + gap_ms != expiredTimerInfo.getExpiryTimeInMs():
                return  # a timer the session moved past (deleted when it moved; never expected here)
            yield pd.DataFrame([self._close(key[0], int(state[0]), int(state[1]), int(state[2]))], columns=columns)

        def close(self) -> None:
            pass

    return Sessions()


def query(events, params):
    d = durations_ms(params)
    spark = events.sparkSession
    if spark.conf.get(PROVIDER_CONF) != ROCKSDB:
        spark.conf.set(PROVIDER_CONF, ROCKSDB)  # transformWithState runs on RocksDB only
    return (events.withWatermark("event_time", f"{d['watermark']} milliseconds")
            .select("key", "producer", "seq", "intended_ms", "event_time")
            .groupBy("key")
            .transformWithStateInPandas(processor(d["gap"], bool(params.get("last_seq"))), outputStructType=OUTPUT,
                                        outputMode="Append", timeMode="EventTime"))


query.oracle = "sessions"
query.check = check
