"""Open-loop pacing: which events are due, and exactly when they were due.

The n-th event (n = 1, 2, ...) of a process with ``share`` s is due at
``start + rate.inverse_cumulative(n / s)``, so the number due by ``now`` is
``floor(s * rate.cumulative(now - start))`` (evaluated 1 us late and with a
1e-9 event slack, against clock and float rounding: an event may be handed out
up to 1 us before its intended time, which is still reported exactly).  Intended times are exact whatever the polling cadence, so
sub-second bursts come out right and latency can be measured from the intended
time (no coordinated omission).

Backlog cap: events that were due more than ``max_backlog_s`` before ``now``
and not yet handed out are skipped (counted in ``skipped``) instead of being
produced in a catch-up storm.
"""

from __future__ import annotations

import math

import numpy as np

from harness.producers.rates import RateFunction

__all__ = ["TokenPacer"]

_SLACK = 1e-9
_CLOCK_SLACK_S = 1e-6
# Intended times are computed ahead, this far at the current rate (between the bounds), in one call: a batch of a
# moderate rate (ten events every 10 ms) then takes a slice of them instead of a dozen numpy calls of its own,
# whose fixed cost (on caches the system under test keeps cold between wake-ups) was most of its pacing.
_AHEAD_S, _AHEAD_MIN, _AHEAD_MAX = 0.25, 64, 16384


class TokenPacer:
    """Paces one producer process's share of a :class:`RateFunction`.

    ``start``/``now`` are absolute clock readings (e.g. ``time.time()``); the
    rate's t = 0 is ``start``.  ``share`` in (0, 1] is this process's fraction
    of the rate.  ``max_backlog_s`` None or inf disables skipping.
    """

    def __init__(self, rate: RateFunction, start: float, share: float = 1.0, max_backlog_s: float | None = 1.0):
        if not (0.0 < share <= 1.0):
            raise ValueError(f"share must be in (0, 1], got {share}")
        if max_backlog_s is not None and not max_backlog_s > 0:
            raise ValueError(f"max_backlog_s must be > 0 (or None), got {max_backlog_s}")
        self.rate = rate
        self.start = float(start)
        self.share = float(share)
        self.max_backlog_s = math.inf if max_backlog_s is None else float(max_backlog_s)
        self.issued = 0  #: events handed out by due()
        self.skipped = 0  #: events dropped by the backlog cap
        self._last_rel = 0.0  # relative due time of the last taken (issued or skipped) event
        self._next_cache: tuple[int, float | None] | None = None
        self._wake_cache: tuple[tuple, float | None] | None = None
        # times computed ahead (_block): (events taken before the first of them, relative times, absolute times)
        self._ahead: tuple[int, list[float], list[float]] | None = None
        self._total_events = math.floor(rate.total * self.share + _SLACK) if math.isfinite(rate.total) else math.inf

    def set_rate(self, rate: RateFunction) -> None:
        """Go on with `rate` from now: it must equal the old one up to now (a caught_up warm-up's end, set ahead of
        time, only moves where the warm-up's constant phase stops), so the events taken so far stay taken."""
        self.rate = rate
        self._next_cache = self._wake_cache = self._ahead = None
        self._total_events = math.floor(rate.total * self.share + _SLACK) if math.isfinite(rate.total) else math.inf

    # ------------------------------------------------------------------
    def _count_by(self, rel: float) -> int:
        # _CLOCK_SLACK_S absorbs the rounding of absolute clocks (an epoch time has
        # ~0.24 us resolution), so due(next_due()) always yields that event.
        rel += _CLOCK_SLACK_S
        if rel <= 0:
            return 0
        return int(math.floor(self.rate.cumulative(rel) * self.share + _SLACK))

    @property
    def taken(self) -> int:
        """Events issued or skipped so far (the index of the last one handled)."""
        return self.issued + self.skipped

    @property
    def exhausted(self) -> bool:
        """True once every event the (finite) shape will ever produce was handled."""
        return self.taken >= self._total_events

    def expected_by(self, now: float) -> int:
        """Total events due by ``now`` (issued + skipped + pending)."""
        return self._count_by(now - self.start)

    def pending(self, now: float) -> int:
        """Events due by ``now`` not yet issued or skipped (before any skipping)."""
        return max(0, self._count_by(now - self.start) - self.taken)

    def take(self, now: float, limit: int) -> tuple[int, list[float]]:
        """Up to ``limit`` events due by ``now``, handed out: (how many events were taken before them, their
        intended absolute send times). The times are a slice of those computed ahead (``ahead``): a batch of a
        moderate rate touches no numpy here."""
        rel = float(now) - self.start
        taken = self.taken
        n_due = self._count_by(rel)
        if n_due <= taken or limit <= 0:
            return taken, []
        skipping = False
        if math.isfinite(self.max_backlog_s):
            stale_rel = rel - self.max_backlog_s
            n_stale = self._count_by(stale_rel)
            if n_stale > taken:
                self.skipped += n_stale - taken
                taken = n_stale
                self._last_rel = max(self._last_rel, stale_rel)
                self._ahead, skipping = None, True  # what follows the skipped events counts from the stale time
        k = min(n_due - taken, int(limit))
        if k <= 0:
            return taken, []
        # a producer that keeps falling behind skips again at its next batch: times computed ahead would be lost
        first, rels, times = self._block(taken, k, rel, ahead=not skipping)
        i = taken - first
        last, hi = rels[i + k - 1], rel + _CLOCK_SLACK_S
        if last > hi:  # guard rounding: never later than now (+slack); the times only grow, so the tail
            times, last = [self.start + min(r, hi) for r in rels[i : i + k]], hi
        else:
            times = times[i : i + k]
        self.issued += k
        self._last_rel = last
        return taken, times

    def due_array(self, now: float, limit: int) -> np.ndarray:
        """Intended absolute send times of up to ``limit`` events due by ``now`` (``take``'s, as an array)."""
        return np.array(self.take(now, limit)[1], dtype=np.float64)

    def due(self, now: float, limit: int) -> list[float]:
        """Like :meth:`due_array`, as a list of floats."""
        return self.take(now, limit)[1]

    def ahead(self) -> tuple[int, list[float]] | None:
        """The times computed ahead: (how many events were taken before the first of them, their absolute
        times), or None. A sender may prepare those events in bulk (producers.ahead)."""
        return None if self._ahead is None else (self._ahead[0], self._ahead[2])

    def _block(self, taken: int, k: int, rel: float, ahead: bool = True) -> tuple[int, list[float], list[float]]:
        """The times computed ahead, covering events taken+1 .. taken+k: (events taken before the first, relative
        times, absolute times), computed again (_AHEAD_S of them, or just these k when not `ahead`) when they run
        out. Never before the last event taken, never decreasing (rounding)."""
        if self._ahead is not None:
            first, rels, _ = self._ahead
            if first <= taken and taken + k - first <= len(rels):
                return self._ahead
        size = k if not ahead else max(k, min(_AHEAD_MAX, max(_AHEAD_MIN, int(self.rate.rate(rel) * self.share
                                                                                    * _AHEAD_S))))
        if math.isfinite(self._total_events):
            size = max(k, min(size, self._total_events - taken))
        lo = self._last_rel
        ns = (taken + np.arange(1, size + 1, dtype=np.float64)) / self.share
        rels = self.rate.inverse_cumulative_array(ns, lo, None)
        np.maximum(rels, lo, out=rels)
        np.maximum.accumulate(rels, out=rels)
        self._ahead = (taken, rels.tolist(), (rels + self.start).tolist())
        return self._ahead

    def wake_at(self, batch: int, max_wait_s: float) -> float | None:
        """When a sender should next look (absolute; None once the shape is exhausted): when `batch` more events
        are due, or `max_wait_s` after the next one is due, whichever comes first. Sending per batch rather than
        per event is what keeps a producer's CPU per event at a moderate rate near its cost flat out (a wake-up,
        a lock and a client call per event cost ~40x the event itself); the events' intended times stay exact,
        and each waits at most `max_wait_s` (counted in its measured latency, never hidden)."""
        key = (self.taken, int(batch), float(max_wait_s))
        if self._wake_cache is not None and self._wake_cache[0] == key:  # every user asks after each batch
            return self._wake_cache[1]
        first = self.next_due()
        if first is None:
            result = None
        else:
            k = min(int(batch), self._total_events - self.taken) if math.isfinite(self._total_events) else int(batch)
            result = first
            if k > 1:
                full = self._ahead_time(self.taken + k - 1)
                if full is None:
                    full = self.rate.inverse_cumulative((self.taken + k) / self.share, self._last_rel)
                    full = self.start + max(full, self._last_rel) if math.isfinite(full) else math.inf
                result = min(full, first + max(0.0, float(max_wait_s)))
        self._wake_cache = (key, result)
        return result

    def next_due(self) -> float | None:
        """Absolute intended time of the next event not yet handed out (None if the
        shape is exhausted).  May be in the past when the producer is behind."""
        taken = self.taken
        if self._next_cache is not None and self._next_cache[0] == taken:
            return self._next_cache[1]
        if taken + 1 > self._total_events:
            result = None
        elif (result := self._ahead_time(taken)) is None:
            t = self.rate.inverse_cumulative((taken + 1) / self.share, self._last_rel)
            result = None if not math.isfinite(t) else self.start + max(t, self._last_rel)
        self._next_cache = (taken, result)
        return result

    def _ahead_time(self, index: int) -> float | None:
        """The absolute time of the event after `index` taken, when it was computed ahead; else None."""
        if self._ahead is not None:
            first, _, times = self._ahead
            if first <= index < first + len(times):
                return times[index - first]
        return None
