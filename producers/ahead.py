"""A producer's events prepared ahead: keys, partitions, sizes and encoded values of the events whose intended times
the pacer has computed ahead (TokenPacer.ahead), built in bulk, handed out a batch at a time.

Why: between two batches of a moderate rate (ten events every 10 ms) the system under test runs, and the caches
it leaves are cold; every numpy call of a batch's own (keys, sizes, an encoding step) then cost tens of
microseconds however few its events, most of a producer's CPU. Built for a quarter of a second of events at once,
the same calls cost their per-event share, and a batch is a few list slices.

What a batch gets is what building it alone would give. Keys, partitions and sizes are drawn in sequence-number
order, so the event with sequence number s has the s-th draw of the key chooser whatever happened (a replay of
the chooser names every event's key). Each value encodes its own sequence number and the pacer's intended time
(producers.payloads, the same bytes): values built for times the batch does not have (the pacer skipped events,
its rate was changed, a time was moved by rounding) are built again for the batch alone, and built ahead again
only once a batch follows on from the one before (a producer that keeps falling behind skips events at every
batch: values it built ahead would be lost each time).
"""
from __future__ import annotations

from itertools import accumulate

from harness.producers.keys import KeyChooser
from harness.producers.payloads import PayloadSource

AHEAD_BYTES = 8 << 20  # at most this much of encoded values prepared at once


class EventsAhead:
    """One producer process's prepared events (`producer` its index in the values' ids)."""

    def __init__(self, producer: int, keys: KeyChooser, payloads: PayloadSource):
        self.producer, self.keys, self.payloads = producer, keys, payloads
        # drawn, from sequence number _seq0 on: keys, partitions (None: the client places keys), sizes
        self._seq0 = 0
        self._keys: list | None = None
        self._partitions: list | None = None
        self._sizes: list[int] = []
        # built, from sequence number _vseq0 and the pacer's index _first on: times, values, cumulative value bytes
        self._vseq0 = self._first = 0
        self._times: list[float] = []
        self._values: list[bytes] = []
        self._ends: list[int] = [0]
        self._next = (0, 0)  # (pacer index, sequence number) a batch following on from the last one starts at

    def batch(self, first: int, seq0: int, times: list[float],
              ahead: tuple[int, list[float]] | None) -> tuple[list[bytes], list | None, list | None, int]:
        """(values, keys, partitions, value bytes) of the events the pacer just handed out: `first` how many it had
        taken before them, `seq0` the sequence number of the first, `times` their intended times; `ahead` the
        pacer's times computed ahead (TokenPacer.ahead), from which the next events are prepared."""
        n = len(times)
        upcoming = self._upcoming(first, times, ahead) if (first, seq0) == self._next else times
        self._next = (first + n, seq0 + n)
        i = seq0 - self._seq0
        if not (0 <= i and i + n <= len(self._sizes)):
            self._draw(seq0, len(upcoming))
            i = 0
        k = seq0 - self._vseq0
        if not (0 <= k and k + n <= len(self._values) and self._first + k == first
                and self._times[k : k + n] == times):
            m = min(len(upcoming), len(self._sizes) - i)
            self._build(first, seq0, upcoming[:m], self._sizes[i : i + m])
            k = 0
        keys = None if self._keys is None else self._keys[i : i + n]
        partitions = None if self._partitions is None else self._partitions[i : i + n]
        return self._values[k : k + n], keys, partitions, self._ends[k + n] - self._ends[k]

    def _upcoming(self, first: int, times: list[float], ahead: tuple[int, list[float]] | None) -> list[float]:
        """`times` and, when the pacer's times ahead go on from them, those that follow (as many as AHEAD_BYTES of
        values allow)."""
        if ahead is not None:
            start, upcoming = ahead
            j = first - start
            if 0 <= j and upcoming[j : j + len(times)] == times:
                return upcoming[j : j + max(len(times), AHEAD_BYTES // max(1, self.payloads.max_bytes))]
        return times

    def _draw(self, seq0: int, count: int) -> None:
        """Keys, partitions and sizes from sequence number `seq0` for at least `count` events: those drawn already
        kept, the rest drawn next."""
        i = max(0, seq0 - self._seq0)
        more = max(0, count - max(0, len(self._sizes) - i))
        keys, partitions = self.keys.next_columns(more) if more else (None, None)
        self._seq0 = seq0
        self._sizes = self._sizes[i:] + self.payloads.next_sizes_array(more).tolist()
        self._keys, self._partitions = _joined(self._keys, i, keys, more), _joined(self._partitions, i, partitions, more)

    def _build(self, first: int, seq0: int, times: list[float], sizes: list[int]) -> None:
        self._values, _ = self.payloads.events(self.producer, seq0, times, sizes)
        self._ends = [0, *accumulate(map(len, self._values))]
        self._vseq0, self._first, self._times = seq0, first, times


def _joined(drawn: list | None, i: int, new: list | None, more: int) -> list | None:
    """A column drawn from its `i`-th entry on, then `more` new ones; None when the chooser gives None for every
    event (no key, or the client placing keys), which it does for every draw alike."""
    if more and new is None:
        return None
    return None if drawn is None and not more else (drawn or [])[i:] + (new or [])
