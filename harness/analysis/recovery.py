"""What each injected fault cost: how long until the query was back, how fast it drained the backlog the fault
left, and the batches, duplicates and losses attributed to it.

Per fault (times in seconds from its injection; `t0`-relative times for the charts):
- **first batch after**: the first batch committed after the injection, and the first one with data (after a
  driver kill: the restarted query's first).
- **lag back within the pre-fault band**: the band is the highest lag sampled in the PRE_S seconds before the
  injection and after the steady state began (the start-up's backlog is no band to come back to), at least one
  batch's worth (offered rate x the batch cadence: a sample right after a commit reads
  almost nothing). A fault injected while an earlier one had not yet recovered takes that earlier fault's band
  (`band_from`): the lag just before it is the earlier fault's backlog, and coming back to that is no recovery
  (a second driver kill during the first one's catch-up would otherwise be "back" before its restarted query
  read anything). Recovered at the first lag sample at or after both the heal (when the fault heals on its
  schedule; the injection for a fault that acts at once and is only healed at the drain) and the first batch
  committed after the injection from which the lag stays within the band for
  a batch cadence (peaks against peaks: the trough of a sawtooth that still rises is not a recovery). A run whose traffic ended first says so (`after_traffic`): the backlog then
  drained without new events arriving.
- **backlog drained**: the peak lag between injection and recovery, and the net rate it fell at from the peak to
  the recovery (events/s; the query's processing rate is that plus the offered rate, `drain_gross_eps`).
- **attributed**: the batches that started between the injection and the recovery (a batch id seen twice was
  re-run), the duplicate sink rows committed in that span, the declared losses of the fault's own loss ranges,
  and the undeclared losses whose events were acked in that span. A fault that never recovered keeps the span
  to the end of the run. Faults injected before an earlier one's recovery are named (`overlapped_by`): the
  earlier fault's figures then include theirs.
"""
from __future__ import annotations

from typing import Any

from harness.analysis.progress import commit_s, epoch_s

PRE_S = 10.0


def _sum_in(counts: dict[float, int], lo: float, hi: float) -> int:
    return int(sum(n for t, n in counts.items() if lo <= t <= hi))


def fault_recovery(fault: dict, lag: list[tuple[float, float]], progress: list[dict], *, t0: float,
                   traffic_end: float, run_end: float, offered_eps: float | None, cadence_s: float,
                   steady_from: float = float("-inf"),
                   duplicate_commits_s: dict[float, int] | None = None, lost_acked_s: dict[float, int] | None = None,
                   expected_lost: int | None = None, inherited: dict | None = None) -> dict[str, Any]:
    """One fault's recovery (module docstring). `lag`: (t, lag) samples, epoch s; `duplicate_commits_s`: duplicate
    sink rows per commit time (epoch s); `lost_acked_s`: undeclared lost events per ack second (epoch s);
    `expected_lost`: declared losses counted in the fault's own ranges; `inherited`: the recovery of an earlier
    fault still unrecovered at this one's injection, whose band this one must come back to."""
    # from when the fault took effect: inject returned (a driver kill waits for a batch in flight, seconds after
    # its inject began)
    inj = float(fault["injected_at"])
    healed = fault.get("healed_at")
    # a heal on the fault's schedule ends its disturbance; a heal at the drain (a fault that acts at once: a kill,
    # a resend, a cut) says nothing of when the query was back
    scheduled = healed is not None and fault.get("heal_scheduled_s") is not None
    ref = float(healed) if scheduled else inj
    out: dict[str, Any] = {"fault": fault.get("fault"), "n": fault.get("n"), "kind": fault.get("kind"),
                           "injected_s": round(inj - t0, 3),
                           "healed_s": round(float(healed) - t0, 3) if healed is not None else None}
    commits = sorted((commit_s(p), p.get("numInputRows", 0)) for p in progress if "timestamp" in p)
    first = next((t for t, _ in commits if t > inj), None)
    first_data = next((t for t, rows in commits if t > inj and rows > 0), None)
    out["first_batch_after_s"] = None if first is None else round(first - inj, 3)
    out["first_data_batch_after_s"] = None if first_data is None else round(first_data - inj, 3)

    pre = [v for t, v in lag if max(inj - PRE_S, steady_from) <= t < inj]
    floor = (offered_eps or 0.0) * cadence_s
    if inherited is not None:
        band = max(float(inherited["pre_fault_band_events"]), floor)
        out["band_from"] = f"{inherited['kind']} #{inherited['n']}"
    else:
        band = max(max(pre, default=0.0), floor)
        out["band_from"] = None
    out["pre_fault_band_events"] = round(band, 1)
    out["pre_fault_samples"] = len(pre)
    # back only once the query has committed again since the injection (a lag sample inside the band before
    # that is the backlog not having grown yet, not a recovery)
    ref = max(ref, first if first is not None else float("inf"))
    recovered = next(((t, v) for t, v in lag if t >= ref and v <= band
                      and all(w <= band for u, w in lag if t <= u <= t + cadence_s)), None)
    end = recovered[0] if recovered else run_end
    out.update(_backlog(lag, inj, ref, end, recovered, band, t0=t0, traffic_end=traffic_end, offered_eps=offered_eps))
    out.update(_batches_between(progress, inj, end))
    out["duplicates"] = _sum_in(duplicate_commits_s, inj, end) if duplicate_commits_s is not None else None
    out["lost"] = _sum_in(lost_acked_s, inj, end) if lost_acked_s is not None else None
    out["expected_lost"] = expected_lost
    return out


def _backlog(lag: list[tuple[float, float]], inj: float, ref: float, end: float, recovered: tuple | None,
             band: float, *, t0: float, traffic_end: float, offered_eps: float | None) -> dict[str, Any]:
    """When the lag came back within its band, the backlog's peak in between and how fast it drained."""
    during = [(t, v) for t, v in lag if inj <= t <= end]
    peak = max(during, key=lambda x: x[1], default=None)
    out: dict[str, Any] = {
        "recovered": recovered is not None,
        "recovered_s": round(recovered[0] - t0, 3) if recovered else None,
        "time_to_recover_s": round(recovered[0] - inj, 3) if recovered else None,
        "time_to_recover_after_heal_s": round(recovered[0] - ref, 3) if recovered else None,
        "after_traffic": bool(recovered and recovered[0] > traffic_end),
        "backlog_peak_events": peak[1] if peak else None,
        "backlog_peak_s": round(peak[0] - t0, 3) if peak else None}
    if recovered and peak and recovered[0] > peak[0] and peak[1] > band:
        net = (peak[1] - recovered[1]) / (recovered[0] - peak[0])
        out["drain_eps"] = round(net, 1)
        out["drain_gross_eps"] = round(net + (offered_eps or 0.0), 1) if not out["after_traffic"] else round(net, 1)
    else:
        out["drain_eps"] = out["drain_gross_eps"] = None
    return out


def _batches_between(progress: list[dict], inj: float, end: float) -> dict[str, Any]:
    """The batches started between the injection and the recovery, and which of them ran again."""
    started = [(epoch_s(p["timestamp"]), p.get("batchId"), p.get("numInputRows", 0)) for p in progress
               if "timestamp" in p and inj <= epoch_s(p["timestamp"]) <= end]
    ids = [b for _, b, _ in started]
    seen_before = {p.get("batchId") for p in progress if "timestamp" in p and epoch_s(p["timestamp"]) < inj}
    return {"batches": len(started), "batch_ids": [min(ids), max(ids)] if ids else [],
            "rerun_batches": sorted({b for b in ids if b in seen_before or ids.count(b) > 1}),
            "rows_in_batches": int(sum(r for _, _, r in started))}


def recoveries(faults: list[dict], lag: list[dict], progress: list[dict], **kw) -> list[dict]:
    """Every injected fault's recovery, in injection order; kw: fault_recovery's (expected_lost per fault index
    in `expected_lost_by_fault`)."""
    by_fault = kw.pop("expected_lost_by_fault", {}) or {}
    samples = [(float(s["t"]), float(s["lag"])) for s in lag]
    injected = sorted((float(f["injected_at"]), i, f) for i, f in enumerate(faults) if f.get("injected_at") is not None)
    out: list[dict] = []
    for at, i, f in injected:
        # the earliest fault still unrecovered at this injection (its band is the undisturbed one)
        open_ = next((r for r in out if r["recovered_at"] is None or r["recovered_at"] > at), None)
        r = fault_recovery(f, samples, progress, expected_lost=by_fault.get(i, 0), inherited=open_, **kw)
        r["recovered_at"] = None if r["recovered_s"] is None else r["recovered_s"] + kw["t0"]
        out.append(r)
    for r in out:
        del r["recovered_at"]
    for r in out:  # a later fault that came before this one's recovery shares the figures (said, not split)
        r["overlapped_by"] = [f"{o['kind']} #{o['n']}" for o in out if o is not r
                              and r["injected_s"] < o["injected_s"] < (r["recovered_s"] or float("inf"))]
    return out

