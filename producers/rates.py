"""Rate shapes as functions of time with exact integrals and inverses.

A :class:`RateFunction` gives, for ``t`` in seconds since the start of traffic:

* ``rate(t)``: events per second (right-continuous; 0 for t < 0);
* ``cumulative(t)``: the exact integral of the rate over ``[0, t]``;
* ``inverse_cumulative(n, hint)``: the smallest ``t`` with ``cumulative(t) >= n``
  (``math.inf`` if the shape never reaches ``n`` events), i.e. the time at which
  the n-th event is due;
* ``*_array`` variants of the three, vectorised over numpy arrays;
* ``total``: ``cumulative(inf)`` (``inf`` for shapes that never stop).

Implementation: constant, steps, ramp, spike and replay shapes, and sums of them,
are :class:`PiecewiseLinear` (closed-form integral, exact inverse by solving the
per-segment quadratic).  ``burst`` is a periodic piecewise-constant shape (exact).
``sequence`` composes phases exactly.  ``sine`` has a closed-form integral and a
bracketed bisection inverse (to :data:`INVERSE_TOL_S`); sums that are not all
piecewise linear use the same bisection.
"""

from __future__ import annotations

import bisect
import csv as _csv
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from harness.producers import spec as S

__all__ = [
    "RateFunction",
    "PiecewiseLinear",
    "PeriodicRate",
    "SequenceOfPhases",
    "SineWave",
    "SumOfRates",
    "make_rate",
    "load_replay_csv",
    "INVERSE_TOL_S",
]

#: Accuracy of numeric (bisection) inverses, in seconds.
INVERSE_TOL_S = 1e-7
_HORIZON_S = 1e11  # beyond this a shape is treated as never reaching n


def _arr(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


class RateFunction:
    """Base class; subclasses implement the ``*_array`` methods and ``total``."""

    total: float = math.inf

    # -- vectorised API (override) -------------------------------------------------
    def rate_array(self, t) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def cumulative_array(self, t) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def inverse_cumulative_array(self, n, lo: float | None = None, hi: float | None = None) -> np.ndarray:
        """Smallest t with cumulative(t) >= n, per element (bisection by default).

        ``lo``/``hi`` are optional bracket hints (seconds); wrong hints are ignored.
        """
        return self._bisect_inverse(_arr(n), lo, hi)

    # -- scalar API -----------------------------------------------------------------
    def rate(self, t: float) -> float:
        return float(self.rate_array(np.array([t], dtype=np.float64))[0])

    def cumulative(self, t: float) -> float:
        return float(self.cumulative_array(np.array([t], dtype=np.float64))[0])

    def inverse_cumulative(self, n: float, hint: float = 0.0) -> float:
        """Time at which the n-th event is due (``inf`` if never)."""
        return float(self.inverse_cumulative_array(np.array([n], dtype=np.float64), lo=hint)[0])

    # -- helpers --------------------------------------------------------------------
    def _prepare(self, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Returns (out, todo-mask, n-clipped); out holds 0 for n<=0 and inf past total."""
        n = np.atleast_1d(n)
        out = np.zeros(n.shape, dtype=np.float64)
        never = n > self.total + 1e-9 * max(1.0, self.total) if math.isfinite(self.total) else np.zeros(n.shape, bool)
        out[never] = math.inf
        todo = (n > 0) & ~never
        nc = np.minimum(n, self.total) if math.isfinite(self.total) else n
        return out, todo, nc

    def _bisect_inverse(self, n: np.ndarray, lo: float | None, hi: float | None,
                        lo_arr: np.ndarray | None = None, hi_arr: np.ndarray | None = None) -> np.ndarray:
        out, todo, nc = self._prepare(n)
        if not todo.any():
            return out
        nn = nc[todo]
        nmin, nmax = float(nn.min()), float(nn.max())
        if lo_arr is not None and hi_arr is not None:
            a = np.maximum(_arr(lo_arr)[todo] if np.ndim(lo_arr) else np.full(nn.shape, float(lo_arr)), 0.0)
            b = _arr(hi_arr)[todo] if np.ndim(hi_arr) else np.full(nn.shape, float(hi_arr))
            # Repair any bracket that is not valid (floating error or bad hint).
            bad_lo = self.cumulative_array(a) > nn
            a[bad_lo] = 0.0
            bad_hi = self.cumulative_array(b) < nn
            if bad_hi.any():
                b[bad_hi] = self._upper_for(float(nn[bad_hi].max()), float(a[bad_hi].min()))
        else:
            lo_v = 0.0 if lo is None or not math.isfinite(lo) else max(0.0, float(lo))
            if lo_v > 0 and self.cumulative(lo_v) > nmin:
                lo_v = 0.0
            hi_v = None
            if hi is not None and math.isfinite(hi) and hi >= lo_v and self.cumulative(hi) >= nmax:
                hi_v = float(hi)
            if hi_v is None:
                hi_v = self._upper_for(nmax, lo_v)
            a = np.full(nn.shape, lo_v)
            b = np.full(nn.shape, hi_v)
        unreachable = ~np.isfinite(b)
        if unreachable.any():
            # Only possible for shapes whose total is infinite but grows too slowly.
            b[unreachable] = _HORIZON_S
        res = self._solve(nn, a, b)
        if unreachable.any():
            res = np.where(unreachable & (self.cumulative_array(res) < nn), math.inf, res)
        out[todo] = res
        return out

    def _solve(self, n: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Safeguarded Newton on C(t) = n inside brackets C(a) < n <= C(b).

        Each Newton estimate is offset by a quarter tolerance towards the far side
        of the bracket so the bracket closes from both sides; every third step
        (and whenever Newton leaves the bracket) bisects.  Returns the upper end
        of a bracket no wider than INVERSE_TOL_S: a time t with C(t) >= n at most
        INVERSE_TOL_S after the exact one.
        """
        a = a.astype(np.float64, copy=True)
        b = b.astype(np.float64, copy=True)
        at_a = self.cumulative_array(a) >= n  # answer is a itself (e.g. a == 0)
        b = np.where(at_a, a, b)
        ca = self.cumulative_array(a)
        cb = self.cumulative_array(b)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(cb > ca, (n - ca) / (cb - ca), 0.5)
        x = a + np.clip(frac, 0.0, 1.0) * (b - a)
        h = INVERSE_TOL_S / 4.0
        for it in range(400):
            cx = self.cumulative_array(x)
            ge = cx >= n
            b = np.where(ge, np.minimum(b, x), b)
            a = np.where(ge, a, np.maximum(a, x))
            if float(np.max(b - a)) <= INVERSE_TOL_S:
                break
            mid = 0.5 * (a + b)
            if it % 3 == 2:
                x = mid
                continue
            rx = self.rate_array(x)
            with np.errstate(divide="ignore", invalid="ignore"):
                xn = x - (cx - n) / rx
            xn = np.where(ge, xn - h, xn + h)
            ok = np.isfinite(xn) & (xn > a) & (xn < b)
            x = np.where(ok, xn, mid)
        return b

    def _upper_for(self, n: float, lo: float) -> float:
        step = 1.0
        while True:
            hi = lo + step
            if self.cumulative(hi) >= n:
                return hi
            if step > _HORIZON_S:
                return math.inf
            step *= 2.0


class PiecewiseLinear(RateFunction):
    """Rate linear on each segment ``[t[i], t[i+1])`` (value ``r[i]`` at its start,
    slope ``s[i]``), constant ``r[-1]`` from ``t[-1]`` on.  ``t[0]`` must be 0."""

    def __init__(self, t: Sequence[float], r: Sequence[float], s: Sequence[float] | None = None):
        self.t = _arr(t).copy()
        self.r = _arr(r).copy()
        self.s = np.zeros_like(self.r) if s is None else _arr(s).copy()
        m = self.t.size
        if m == 0 or self.r.size != m or self.s.size != m:
            raise ValueError("t, r, s must be non-empty and of equal length")
        if self.t[0] != 0.0 or np.any(np.diff(self.t) <= 0):
            raise ValueError("breakpoints must start at 0 and strictly increase")
        if self.s[-1] != 0.0:
            raise ValueError("the last segment (tail) must be constant")
        self.seg = np.diff(self.t)  # length m-1
        if np.any(self.r < 0) or np.any(self.r[:-1] + self.s[:-1] * self.seg < -1e-9 * np.maximum(1, self.r[:-1])):
            raise ValueError("rate must stay >= 0")
        inc = np.maximum(self.r[:-1] * self.seg + 0.5 * self.s[:-1] * self.seg**2, 0.0)
        self.c = np.concatenate([[0.0], np.cumsum(inc)])
        self.total = math.inf if self.r[-1] > 0 else float(self.c[-1])
        self._t_list, self._c_list = self.t.tolist(), self.c.tolist()
        self._r_list, self._s_list, self._r0 = self.r.tolist(), self.s.tolist(), float(self.r[0])
        self._seg_list = self.seg.tolist()

    def _index(self, t: np.ndarray) -> np.ndarray:
        # searchsorted(right) is in [0, m] so the index is <= m - 1; only t < 0 gives -1.
        return np.maximum(np.searchsorted(self.t, t, side="right") - 1, 0)

    def rate_array(self, t) -> np.ndarray:
        t = _arr(t)
        i = self._index(t)
        v = self.r[i] + self.s[i] * (t - self.t[i])
        return np.where(t < 0, 0.0, np.maximum(v, 0.0))

    def cumulative(self, t: float) -> float:
        """The array formula on one float in plain Python (the pacer asks twice a batch; numpy's cost per call
        was most of it): the same IEEE operations in the same order, so the same value."""
        t = float(t)
        if not math.isfinite(t):
            return super().cumulative(t)
        t = max(t, 0.0)
        if self.t.size == 1:
            return self._r0 * t
        i = max(bisect.bisect_right(self._t_list, t) - 1, 0)
        dt = t - self._t_list[i]
        return self._c_list[i] + self._r_list[i] * dt + 0.5 * self._s_list[i] * dt * dt

    def cumulative_array(self, t) -> np.ndarray:
        t = np.maximum(_arr(t), 0.0)
        fin = np.isfinite(t)
        all_fin = bool(fin.all())
        if not all_fin:
            t = np.where(fin, t, 0.0)
        if self.t.size == 1:  # constant
            out = self.r[0] * t
        else:
            i = self._index(t)
            dt = t - self.t[i]
            out = self.c[i] + self.r[i] * dt + 0.5 * self.s[i] * dt * dt
        if not all_fin:
            out = np.where(fin, out, self.total)
        return out

    def inverse_cumulative(self, n: float, hint: float = 0.0) -> float:
        """The array formula (its general path) on one float in plain Python: the pacer asks twice a batch, and
        numpy's fixed cost per call was most of a producer's pacing at moderate rates. The same IEEE operations
        in the same order, so the same value; the hint is not needed (the inverse is closed-form)."""
        n = float(n)
        if n <= 0:
            return 0.0
        if n != n:  # NaN: never reached, as the array formula says
            return math.inf
        m = len(self._t_list)
        i = min(max(bisect.bisect_left(self._c_list, n) - 1, 0), m - 1)
        dm = n - self._c_list[i]
        ri, si = self._r_list[i], self._s_list[i]
        denom = ri + math.sqrt(max(ri * ri + 2.0 * si * dm, 0.0))
        dt = 2.0 * dm / denom if denom > 0 else math.inf
        return self._t_list[i] + min(dt, self._seg_list[i] if i < m - 1 else math.inf)

    def inverse_cumulative_array(self, n, lo=None, hi=None) -> np.ndarray:
        n = np.atleast_1d(_arr(n))
        m = self.t.size
        if n.size > 1 and n.ndim == 1:
            # A pacer's batch lies in one segment nearly always: the same arithmetic with that segment's scalars
            # (elementwise identical results, a fraction of the work).
            lo_n, hi_n = float(n.min()), float(n.max())
            if lo_n > 0:
                i0 = max(int(np.searchsorted(self.c, lo_n, side="left")) - 1, 0)
                if max(int(np.searchsorted(self.c, hi_n, side="left")) - 1, 0) == i0:
                    i0 = min(i0, m - 1)
                    ri, si = float(self.r[i0]), float(self.s[i0])
                    dm = n - self.c[i0]
                    seg = float(self.seg[i0]) if i0 < m - 1 else math.inf
                    if si == 0.0 and ri > 0.0:  # constant: 2dm / (ri + sqrt(ri * ri)) is dm / ri, bit for bit
                        return self.t[i0] + np.minimum(dm / ri, seg)
                    denom = ri + np.sqrt(np.maximum(ri * ri + 2.0 * si * dm, 0.0))
                    with np.errstate(divide="ignore", invalid="ignore"):
                        dt = np.where(denom > 0, 2.0 * dm / denom, math.inf)
                    return self.t[i0] + np.minimum(dt, seg)
        j = np.searchsorted(self.c, n, side="left")
        i = np.clip(j - 1, 0, m - 1)
        dm = n - self.c[i]
        ri, si = self.r[i], self.s[i]
        disc = np.maximum(ri * ri + 2.0 * si * dm, 0.0)
        denom = ri + np.sqrt(disc)
        with np.errstate(divide="ignore", invalid="ignore"):
            dt = np.where(denom > 0, 2.0 * dm / denom, math.inf)
        seg_full = np.concatenate([self.seg, [math.inf]])[i]
        dt = np.minimum(dt, seg_full)
        out = self.t[i] + dt
        return np.where(n <= 0, 0.0, out)

    @staticmethod
    def add(parts: Sequence["PiecewiseLinear"]) -> "PiecewiseLinear":
        """Exact pointwise sum of piecewise-linear rates."""
        t = np.unique(np.concatenate([p.t for p in parts]))
        r = np.zeros_like(t)
        s = np.zeros_like(t)
        for p in parts:
            i = p._index(t)
            r += p.r[i] + p.s[i] * (t - p.t[i])
            s += p.s[i]
        s[-1] = 0.0
        return PiecewiseLinear(t, np.maximum(r, 0.0), s)


class PeriodicRate(RateFunction):
    """``inner`` (defined on ``[0, period)``) repeated forever."""

    def __init__(self, inner: RateFunction, period: float):
        if not period > 0:
            raise ValueError("period must be > 0")
        self.inner = inner
        self.period = float(period)
        self.q = float(inner.cumulative(self.period))
        self.total = math.inf if self.q > 0 else 0.0

    def rate_array(self, t) -> np.ndarray:
        t = _arr(t)
        return np.where(t < 0, 0.0, self.inner.rate_array(np.mod(np.maximum(t, 0.0), self.period)))

    def cumulative_array(self, t) -> np.ndarray:
        t = np.maximum(_arr(t), 0.0)
        fin = np.isfinite(t)
        tf = np.where(fin, t, 0.0)
        k = np.floor(tf / self.period)
        local = np.minimum(np.maximum(tf - k * self.period, 0.0), self.period)
        return np.where(fin, k * self.q + self.inner.cumulative_array(local), self.total)

    def inverse_cumulative_array(self, n, lo=None, hi=None) -> np.ndarray:
        n = np.atleast_1d(_arr(n))
        if self.q <= 0:
            return np.where(n <= 0, 0.0, math.inf)
        k = np.maximum(np.ceil(n / self.q) - 1.0, 0.0)
        rem = n - k * self.q
        # keep rem in (0, q] despite rounding
        over = rem > self.q
        k = np.where(over, k + 1.0, k)
        rem = np.where(over, n - k * self.q, rem)
        under = (rem <= 0) & (k > 0)
        k = np.where(under, k - 1.0, k)
        rem = np.where(under, n - k * self.q, rem)
        local = np.minimum(self.inner.inverse_cumulative_array(rem, 0.0, self.period), self.period)
        return np.where(n <= 0, 0.0, k * self.period + local)


class SequenceOfPhases(RateFunction):
    """Phases one after another, each on its own local clock.  ``duration`` None
    (last phase only) = forever; after a closed last phase the rate is 0."""

    def __init__(self, phases: Sequence[tuple[float | None, RateFunction]]):
        if not phases:
            raise ValueError("need at least one phase")
        self.fns = [fn for _, fn in phases]
        durs = [d for d, _ in phases]
        if any(d is None for d in durs[:-1]):
            raise ValueError("only the last phase may be open-ended")
        self.durs = np.array([math.inf if d is None else float(d) for d in durs])
        self.starts = np.concatenate([[0.0], np.cumsum(self.durs[:-1])])
        self.ends = self.starts + self.durs
        q = [fn.total if not math.isfinite(d) else fn.cumulative(d) for d, fn in zip(self.durs, self.fns)]
        self.q = np.array(q, dtype=np.float64)
        self.cum_start = np.concatenate([[0.0], np.cumsum(self.q[:-1])])
        self.cum_end = self.cum_start + self.q
        self.total = float(self.cum_end[-1])
        # the same figures as floats, for the one-float paths below
        self._starts, self._ends = self.starts.tolist(), self.ends.tolist()
        self._durs, self._cum_start, self._cum_end = self.durs.tolist(), self.cum_start.tolist(), self.cum_end.tolist()

    def rate_array(self, t) -> np.ndarray:
        t = _arr(t)
        out = np.zeros(t.shape, dtype=np.float64)
        for k, fn in enumerate(self.fns):
            mask = (t >= self.starts[k]) & (t < self.ends[k])
            if mask.any():
                out[mask] = fn.rate_array(t[mask] - self.starts[k])
        return out

    def cumulative_array(self, t) -> np.ndarray:
        t = np.maximum(_arr(t), 0.0)
        out = np.full(t.shape, self.total, dtype=np.float64)
        for k, fn in enumerate(self.fns):
            mask = (t >= self.starts[k]) & (t < self.ends[k])
            if mask.any():
                out[mask] = self.cum_start[k] + fn.cumulative_array(t[mask] - self.starts[k])
        return out

    # A warm-up (warmed_up) makes every paced rate a sequence, so the pacer's calls (two one-float inverses and
    # a cumulative per batch, and a batch's inverse) come here: the one-float paths below run in plain Python and
    # a batch within one phase goes straight to its phase, with the same operations as the general path (the
    # same values), instead of numpy's fixed cost per call and per phase.
    def cumulative(self, t: float) -> float:
        t = max(float(t), 0.0)
        for k, fn in enumerate(self.fns):
            if self._starts[k] <= t < self._ends[k]:
                return self._cum_start[k] + fn.cumulative(t - self._starts[k])
        return self.total

    def inverse_cumulative(self, n: float, hint: float = 0.0) -> float:
        n = float(n)
        if not n > 0:
            return 0.0 if n <= 0 else math.inf  # NaN: never reached (the array path's value)
        k = bisect.bisect_left(self._cum_end, n)
        if k >= len(self.fns):
            return math.inf
        return self._starts[k] + min(self._phase_inverse(k, n - self._cum_start[k]), self._durs[k])

    def _phase_inverse(self, k: int, n: float) -> float:
        fn, d = self.fns[k], self._durs[k]
        if type(fn) is PiecewiseLinear:  # closed form: its one-float path is its array's value
            return fn.inverse_cumulative(n)
        return float(fn.inverse_cumulative_array(np.array([n]), 0.0, d if math.isfinite(d) else None)[0])

    def inverse_cumulative_array(self, n, lo=None, hi=None) -> np.ndarray:
        n = np.atleast_1d(_arr(n))
        if n.ndim == 1 and n.size and float(n.min()) > 0:
            k = int(np.searchsorted(self.cum_end, float(n.min()), side="left"))
            if k < len(self.fns) and float(n.max()) <= self._cum_end[k]:  # a pacer's batch: all in phase k
                d = self._durs[k]
                local = self.fns[k].inverse_cumulative_array(n - self._cum_start[k], 0.0, d if math.isfinite(d) else None)
                return self._starts[k] + np.minimum(local, d)
        out = np.where(n <= 0, 0.0, math.inf)
        k_of = np.searchsorted(self.cum_end, n, side="left")
        for k, fn in enumerate(self.fns):
            mask = (k_of == k) & (n > 0)
            if mask.any():
                d = self.durs[k]
                local = fn.inverse_cumulative_array(n[mask] - self.cum_start[k], 0.0, d if math.isfinite(d) else None)
                out[mask] = self.starts[k] + np.minimum(local, d)
        return out


class SineWave(RateFunction):
    """``mean + amp * sin(2*pi*(t + phase)/period)`` with ``amp <= mean``."""

    def __init__(self, mean: float, amp: float, period: float, phase: float = 0.0):
        if mean < 0 or amp < 0 or amp > mean or not period > 0:
            raise ValueError("need 0 <= amp <= mean and period > 0")
        self.mean, self.amp, self.period, self.phase = float(mean), float(amp), float(period), float(phase)
        self.w = 2.0 * math.pi / self.period
        self.total = math.inf if self.mean > 0 else 0.0
        self._c0 = math.cos(self.w * self.phase)

    def rate_array(self, t) -> np.ndarray:
        t = _arr(t)
        v = self.mean + self.amp * np.sin(self.w * (t + self.phase))
        return np.where(t < 0, 0.0, np.maximum(v, 0.0))

    def cumulative_array(self, t) -> np.ndarray:
        t = np.maximum(_arr(t), 0.0)
        fin = np.isfinite(t)
        tf = np.where(fin, t, 0.0)
        out = self.mean * tf - (self.amp / self.w) * (np.cos(self.w * (tf + self.phase)) - self._c0)
        return np.where(fin, out, self.total)

    def inverse_cumulative_array(self, n, lo=None, hi=None) -> np.ndarray:
        n = np.atleast_1d(_arr(n))
        if self.mean <= 0:
            return np.where(n <= 0, 0.0, math.inf)
        # |C(t) - mean*t| <= 2*amp/w bounds t per element.
        slack = 2.0 * self.amp / self.w
        lo_arr = np.maximum((n - slack) / self.mean, 0.0)
        hi_arr = (n + slack) / self.mean + INVERSE_TOL_S
        if lo is not None and math.isfinite(lo):
            lo_arr = np.maximum(lo_arr, float(lo))
            lo_arr = np.minimum(lo_arr, hi_arr)
        if hi is not None and math.isfinite(hi):
            hi_arr = np.maximum(np.minimum(hi_arr, float(hi)), lo_arr)
        return self._bisect_inverse(n, None, None, lo_arr, hi_arr)


class SumOfRates(RateFunction):
    """Pointwise sum of arbitrary rate functions (numeric inverse)."""

    def __init__(self, parts: Sequence[RateFunction]):
        self.parts = list(parts)
        self.total = float(sum(p.total for p in self.parts))

    def rate_array(self, t) -> np.ndarray:
        t = _arr(t)
        return sum((p.rate_array(t) for p in self.parts), np.zeros(t.shape))

    def cumulative_array(self, t) -> np.ndarray:
        t = _arr(t)
        out = sum((p.cumulative_array(t) for p in self.parts), np.zeros(t.shape))
        return np.where(np.isposinf(t), self.total, out)


# ---------------------------------------------------------------------------
# Replay CSV
# ---------------------------------------------------------------------------


def load_replay_csv(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read ``t,rate`` rows.  Header row (non-numeric first row), blank lines and
    ``#`` comments are skipped.  Raises ``ValueError`` naming ``file:line``."""
    path = Path(path)
    ts: list[float] = []
    rs: list[float] = []
    with path.open(newline="") as fh:
        for lineno, row in enumerate(_csv.reader(fh), start=1):
            cells = [c.strip() for c in row]
            if not cells or all(c == "" for c in cells) or cells[0].startswith("#"):
                continue
            if len(cells) < 2:
                raise ValueError(f"{path}:{lineno}: expected two columns t,rate; got {row!r}")
            try:
                t, r = float(cells[0]), float(cells[1])
            except ValueError:
                if not ts:  # header
                    continue
                raise ValueError(f"{path}:{lineno}: not numbers: {row!r}") from None
            if not (math.isfinite(t) and math.isfinite(r)):
                raise ValueError(f"{path}:{lineno}: values must be finite")
            if r < 0:
                raise ValueError(f"{path}:{lineno}: rate must be >= 0, got {r}")
            if ts and not t > ts[-1]:
                raise ValueError(f"{path}:{lineno}: t must strictly increase ({t} after {ts[-1]})")
            ts.append(t)
            rs.append(r)
    if not ts:
        raise ValueError(f"{path}: no data rows")
    return np.array(ts), np.array(rs)


def _replay(spec: S.ReplayRate, base_dir: Path | None) -> RateFunction:
    path = Path(spec.csv)
    if base_dir is not None and not path.is_absolute():
        path = Path(base_dir) / path
    t, r = load_replay_csv(path)
    t = t - t[0]
    r = r * spec.scale
    tail = r[-1] if spec.after == "hold" else 0.0
    if t.size == 1:
        return PiecewiseLinear([0.0], [tail])
    if spec.interpolation == "linear":
        slopes = np.diff(r) / np.diff(t)
        return PiecewiseLinear(t, np.concatenate([r[:-1], [tail]]), np.concatenate([slopes, [0.0]]))
    return PiecewiseLinear(t, np.concatenate([r[:-1], [tail]]))


# ---------------------------------------------------------------------------
# Factory
# ---------------------------------------------------------------------------


def warmed_up(rate: RateFunction, warmup_s: float) -> RateFunction:
    """`warmup_s` seconds at the rate's starting value, then the rate on its own clock (producers.warmup_s: the
    warm-up traffic of OpenMessaging Benchmark, before the measured window)."""
    if warmup_s <= 0:
        return rate
    return SequenceOfPhases([(warmup_s, PiecewiseLinear([0.0], [rate.rate(0.0)])), (None, rate)])


def make_rate(spec: S.RateSpec, base_dir: str | Path | None = None) -> RateFunction:
    """Build the :class:`RateFunction` for a validated rate spec.

    ``base_dir`` resolves relative ``replay.csv`` paths (normally the scenario
    file's directory).
    """
    bd = Path(base_dir) if base_dir is not None else None
    if isinstance(spec, S.ConstantRate):
        return PiecewiseLinear([0.0], [spec.eps])
    if isinstance(spec, S.StepsRate):
        ts = [st.at_s for st in spec.steps]
        rs = [st.eps for st in spec.steps]
        if ts[0] > 0:
            ts, rs = [0.0] + ts, [0.0] + rs
        return PiecewiseLinear(ts, rs)
    if isinstance(spec, S.RampRate):
        slope = (spec.to_eps - spec.from_eps) / spec.duration_s
        return PiecewiseLinear([0.0, spec.duration_s], [spec.from_eps, spec.to_eps], [slope, 0.0])
    if isinstance(spec, S.SpikeRate):
        if spec.at_s > 0:
            return PiecewiseLinear([0.0, spec.at_s, spec.at_s + spec.duration_s], [spec.base_eps, spec.eps, spec.base_eps])
        return PiecewiseLinear([0.0, spec.duration_s], [spec.eps, spec.base_eps])
    if isinstance(spec, S.BurstRate):
        hi = spec.base_eps * spec.factor
        if spec.duration_s >= spec.period_s:
            periodic: RateFunction = PiecewiseLinear([0.0], [hi])
        else:
            periodic = PeriodicRate(PiecewiseLinear([0.0, spec.duration_s], [hi, spec.base_eps]), spec.period_s)
        if spec.offset_s > 0:
            return SequenceOfPhases([(spec.offset_s, PiecewiseLinear([0.0], [spec.base_eps])), (None, periodic)])
        return periodic
    if isinstance(spec, S.SineRate):
        return SineWave(spec.mean_eps, spec.amplitude_eps, spec.period_s, spec.phase_s)
    if isinstance(spec, S.ReplayRate):
        return _replay(spec, bd)
    if isinstance(spec, S.SumRate):
        parts = [make_rate(p, bd) for p in spec.parts]
        if len(parts) == 1:
            return parts[0]
        if all(isinstance(p, PiecewiseLinear) for p in parts):
            return PiecewiseLinear.add(parts)  # type: ignore[arg-type]
        return SumOfRates(parts)
    if isinstance(spec, S.SequenceRate):
        seq = SequenceOfPhases([(ph.duration_s, make_rate(ph.rate, bd)) for ph in spec.phases])
        if spec.repeat:
            return PeriodicRate(seq, float(seq.ends[-1]))
        return seq
    raise TypeError(f"not a rate spec: {spec!r}")
