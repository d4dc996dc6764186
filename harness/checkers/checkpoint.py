"""The checkpoint's cost and its storage faults (harness.analysis.checkpoint, harness.faults.checkpoint_storage).

`checkpoint_cost`: the batch time the checkpoint costs (offset log + commit log writes: durationMs walCommit +
commitOffsets) at the median of the measured batches that no checkpoint_storage fault touched, against
`checks.max_checkpoint_ms`; listed with its figures, not required, without that bound.

`checkpoint_storage`: each injection did what it declares: the store saw requests while it was on (else it acted
on nothing and proved nothing), a throttle answered some 503 SlowDown, a reset kept up refused new connections
(one reset that found none open, at its instant, is unknown: moto closes each connection after its request), and a
latency
reached the batches' checkpoint time. With synchronous progress tracking, of the batches that ran while it was
on, the slowest spent at least its latency_ms more in walCommit + commitOffsets than the batches no fault touched
do at the median (each write is some ten S3A requests, each round trip paying the latency twice: the floor is far
under what a write it met costs, and far over the noise; the slowest, since a batch that only brushed the fault may
have written nothing during it). With asynchronous progress tracking the opposite, at the median: less than that
(the writes leave the batch's path: what async progress tracking changes). No batch while it was on, or none
outside any fault to compare with: unknown.
"""
from __future__ import annotations

from harness.analysis import checkpoint as ckpt
from harness.analysis.runview import RunView
from harness.check import Check

ASYNC_OPTION = "asyncprogresstrackingenabled"


def async_progress(scenario) -> bool:
    """Whether the query tracks its progress asynchronously (the Kafka sink's asyncProgressTrackingEnabled)."""
    return any(k.lower() == ASYNC_OPTION and str(v).lower() == "true" for k, v in scenario.spark.sink_options.items())


def checkpoint_cost(run: RunView) -> list[Check]:
    bound = run.scenario.checks.max_checkpoint_ms
    if bound is None and run.scenario.spark.checkpoint_store == "local":
        return []
    windows = ckpt.fault_windows(run.faults.records, run.state.ended_at)
    from_s = run.measured_from_ms / 1000.0 if run.measured_from_ms else None
    figures = ckpt.summary(ckpt.outside(ckpt.batch_costs(run.progress), windows, from_s))
    return [cost_check(figures, bound, run.scenario.spark.checkpoint_store, bool(windows))]


def cost_check(figures: dict, bound: float | None, store: str, faulted: bool) -> Check:
    """The judgement on `summary`'s figures (pure: tested on literal figures)."""
    where = f"checkpoint on {'the S3 store' if store == 's3' else 'local disk'}"
    scope = "measured batches outside the checkpoint_storage faults" if faulted else "measured batches"
    if not figures:
        return Check("checkpoint_cost", None, f"{where}: no {scope} wrote an offset log entry", limit=bound,
                     required=bound is not None)
    detail = (f"{where}: offset + commit log writes {figures['p50_ms']:,.0f} ms per batch at the median (walCommit "
              f"{figures['wal_p50_ms']:,.0f}, commitOffsets {figures['commit_p50_ms']:,.0f}; p90 "
              f"{figures['p90_ms']:,.0f}, max {figures['max_ms']:,.0f}"
              + (f"; {figures['share_p50']:.0%} of the batch" if figures.get("share_p50") is not None else "")
              + f") over {figures['batches']} {scope}")
    if bound is None:
        return Check("checkpoint_cost", None, detail + " (not required without checks.max_checkpoint_ms)",
                     figures["p50_ms"], figures=_figures(figures), required=False)
    ok = figures["p50_ms"] <= bound
    return Check("checkpoint_cost", ok, detail + f"; limit {bound:,.0f} ms", figures["p50_ms"], bound,
                 figures=_figures(figures))


def _figures(figures: dict) -> dict:
    return {"checkpoint": {k: v for k, v in figures.items()}}


def checkpoint_storage(run: RunView) -> list[Check]:
    windows = ckpt.fault_windows(run.faults.records, run.state.ended_at)
    if not windows:
        return []
    costs = ckpt.batch_costs(run.progress)
    found = [(w, run.scenario.faults[w.fault], ckpt.summary(ckpt.inside(costs, w))) for w in windows]
    untouched = ckpt.summary(ckpt.outside(costs, windows, None))
    return [storage_check(found, untouched, async_progress(run.scenario))]


def storage_check(found: list, untouched: dict, asynchronous: bool) -> Check:
    """Each (window, its options, the summary of the batches inside it) against what the fault declares;
    `untouched`: the summary of the batches no fault overlapped, what a latency's cost is measured from."""
    failed, unknown, said = [], [], []
    for w, options, inner in found:
        name = f"checkpoint_storage #{w.n} (faults.{w.fault}, {options.mode})"
        verdict, text = _one(w, options, inner, untouched, asynchronous)
        said.append(f"{name}: {text}")
        (failed if verdict is False else unknown if verdict is None else []).append(name)
    ok = False if failed else None if unknown else True
    return Check("checkpoint_storage", ok, "; ".join(said))


def _one(w, options, inner: dict, untouched: dict, asynchronous: bool) -> tuple[bool | None, str]:
    s = w.since_inject
    if s is None:
        return None, "no counts recorded at its heal"
    seen = (f"{s['requests']} S3 requests while on, {s['throttled']} answered 503, {s['reset']} connections reset, "
            f"{s['refused']} refused")
    if s["requests"] <= 0 and options.mode != "reset":
        return False, f"{seen}: no checkpoint request met it"
    if options.mode == "throttle" and s["throttled"] <= 0:
        return False, f"{seen}: none throttled"
    if options.mode == "reset" and options.keep_resetting and s["refused"] <= 0:
        return False, f"{seen}: no new connection refused while it kept resetting"
    if options.mode == "reset" and s["reset"] + s["refused"] <= 0:  # one reset, at one instant
        return None, f"{seen}: no connection was open to cut at its instant (the store closes each after its request)"
    if options.mode != "latency":
        return True, seen
    if not inner or not untouched:
        return None, (f"{seen}; no batch ran while it was on" if not inner else
                      f"{seen}; no batch outside the faults to compare with") + ", so its cost to a batch is not known"
    base = untouched["p50_ms"]
    cost = (f"{seen}; the {inner['batches']} batches that ran while it was on spent {inner['p50_ms']:,.0f} ms at the "
            f"median (slowest {inner['max_ms']:,.0f} ms) on offset + commit log writes, against {base:,.0f} ms at the "
            f"median of the {untouched['batches']} batches no fault touched")
    if asynchronous:  # the writes are off the batch's path: the batch must not wait for them
        added = inner["p50_ms"] - base
        cost += f": {added:+,.0f} ms at the median"
        ok = added < options.latency_ms
        return ok, cost + f": {'less' if ok else 'NOT less'} than its {options.latency_ms:g} ms latency (progress " \
                          f"is tracked asynchronously)"
    added = inner["max_ms"] - base
    ok = added >= options.latency_ms
    return ok, cost + f": the slowest {added:+,.0f} ms, {'at least' if ok else 'less than'} its " \
                      f"{options.latency_ms:g} ms latency"
