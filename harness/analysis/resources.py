"""Figures and leak verdicts from resources.jsonl (harness.samplers.resources): pure functions of the samples.

The machine (`machine`): how much CPU processes outside the run took while it measured, from /proc/stat's
counters in the same samples: the machine's busy time minus what the run's own processes used, and steal apart.
A run starved by its neighbours measured them, not its query (harness.checkers.busy sets its performance checks
aside).

Per role (broker, driver, executor, producer, …): how many processes, peak and mean RSS (the role's processes
summed at each sample), CPU as cores used (cumulative CPU-time deltas between samples over wall time), most open
files and threads; the run directory's disk over time. Leaks: the growth of each process's anonymous RSS (heap
and stacks; file pages it maps, such as a history file read through mmap, are the kernel's to take back) per hour, the
least-squares slope over its samples after its warm-up, against a threshold; a process watched too briefly is
not judged and says so, rather than passing or failing on two points of noise.

MB here is 10^6 bytes.
"""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from harness.files.jsonl import read_jsonl

MB = 1e6
ROLE_ORDER = ("broker", "emulator", "netproxy", "spark-master", "spark-worker", "driver", "driver-jvm", "executor",
              "python-worker", "producer", "runner", "launcher", "other")
# defaults for a run that says nothing else (a soak states its own): the first minutes of a JVM are heap growth,
# not a leak, and a slope over less than five minutes of samples is mostly noise
AFTER_S, MIN_SPAN_S, MAX_GROWTH_MB_PER_H = 120.0, 300.0, 100.0
# Whose CPU is whose (harness.samplers.resources.ROLES names the roles): the harness's own processes (its producers, the
# runner with its samplers, the TCP proxy) and the system under test (the broker or the emulator standing in for
# Event Hubs, Spark's JVMs and the query's Python driver and workers, spark-submit's launchers). "other" (a shell,
# a tool) is in neither: counted apart and named, never silently added to one side.
HARNESS_ROLES = ("producer", "runner", "netproxy")
SUT_ROLES = ("broker", "emulator", "spark-master", "spark-worker", "driver", "driver-jvm", "executor",
             "python-worker", "launcher")
FOOTPRINT_GOAL = 0.05  # the harness's CPU under 5% of the system under test's: more distorts what it measures
# /proc/stat's columns that are a CPU at work for some process (harness.samplers.resources.STAT_FIELDS; guest time is
# already inside user and nice); steal, time the hypervisor gave another guest, is counted apart
BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq")


def load(run_dir: Path) -> list[dict]:
    return read_jsonl(Path(run_dir) / "resources.jsonl")


def _role_key(role: str) -> tuple:
    return (ROLE_ORDER.index(role) if role in ROLE_ORDER else len(ROLE_ORDER), role)


def processes(samples: list[dict]) -> dict[tuple[int, float], dict]:
    """Each process (pid, create_time) with its role (the last one seen: a fork that execs changes role) and its
    records in time order as (t, record)."""
    out: dict[tuple[int, float], dict] = {}
    for s in sorted(samples, key=lambda x: x["t"]):
        for r in s.get("procs") or []:
            p = out.setdefault((r["pid"], r["create_time"]), {"points": []})
            p["role"] = r["role"]
            p["points"].append((s["t"], r))
    return out


def slope_per_s(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over t (units of y per second)."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (y - my) for t, y in points) / den if den else 0.0


def cpu_intervals(samples: list[dict]) -> list[tuple[float, float, dict[str, float]]]:
    """(start, end, {role: cores}) between consecutive samples: the CPU seconds each role's processes used in the
    interval over its length. A process present at both ends adds its cpu_s delta; one born within the interval
    adds all its cpu_s (it used them since)."""
    ordered = sorted(samples, key=lambda x: x["t"])
    out = []
    for prev, cur in zip(ordered, ordered[1:]):
        dt = cur["t"] - prev["t"]
        if dt <= 0:
            continue
        before = {(r["pid"], r["create_time"]): r["cpu_s"] for r in prev.get("procs") or []}
        used: dict[str, float] = defaultdict(float)
        for r in cur.get("procs") or []:
            key = (r["pid"], r["create_time"])
            if key in before:
                used[r["role"]] += max(0.0, r["cpu_s"] - before[key])
            elif r["create_time"] > prev["t"]:
                used[r["role"]] += r["cpu_s"]
        out.append((prev["t"], cur["t"], {role: v / dt for role, v in used.items()}))
    return out


def role_rss(samples: list[dict]) -> dict[str, list[tuple[float, int]]]:
    """Per role, (t, RSS bytes of its processes summed) at each sample where the role had a process."""
    out: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for s in sorted(samples, key=lambda x: x["t"]):
        sums: dict[str, int] = defaultdict(int)
        for r in s.get("procs") or []:
            sums[r["role"]] += r["rss_bytes"]
        for role, v in sums.items():
            out[role].append((s["t"], v))
    return dict(sorted(out.items(), key=lambda kv: _role_key(kv[0])))


def disk_series(samples: list[dict]) -> list[tuple[float, dict]]:
    """(t, {"bytes", "by_dir"}) for each sample that walked the run directory."""
    return [(s["t"], s["disk"]) for s in sorted(samples, key=lambda x: x["t"]) if s.get("disk")]


def roles_summary(samples: list[dict]) -> dict[str, dict]:
    procs = processes(samples)
    rss = role_rss(samples)
    cpu = cpu_intervals(samples)
    span = sum(end - start for start, end, _ in cpu)
    out: dict[str, dict] = {}
    for role, series in rss.items():
        mine = [p for p in procs.values() if p["role"] == role]
        records = [r for p in mine for _, r in p["points"]]
        cores = [c.get(role, 0.0) for _, _, c in cpu]
        out[role] = {
            "processes": len(mine),
            "rss_peak_bytes": max(v for _, v in series),
            "rss_mean_bytes": round(sum(v for _, v in series) / len(series)),
            "rss_peak_process_bytes": max(r["rss_bytes"] for r in records),
            # everything its processes used up to their last sample (cpu_s is cumulative since each started)
            "cpu_s": round(sum(p["points"][-1][1]["cpu_s"] for p in mine), 3),
            "cores_mean": round(sum(c * (e - s) for (s, e, _), c in zip(cpu, cores)) / span, 4) if span else None,
            "cores_peak": round(max(cores), 4) if cores else None,
            "fds_max": max(r["fds"] for r in records),
            "threads_max": max(r["threads"] for r in records),
        }
    return out


def window_parts(intervals: list[tuple], start: float | None, end: float | None) -> list[tuple]:
    """(from, to, share of the interval, payload) of each (start, end, payload) interval in the window [`start`,
    `end`] (None: unbounded): those lying wholly inside it; only when none does (a window shorter than the
    sampling interval), the overlapping parts, each with the share of its interval it covers."""
    lo_w = -math.inf if start is None else start
    hi_w = math.inf if end is None else end
    inside = [(s, e, 1.0, x) for s, e, x in intervals if s >= lo_w and e <= hi_w]
    if inside:
        return inside
    return [(max(s, lo_w), min(e, hi_w), (min(e, hi_w) - max(s, lo_w)) / (e - s), x) for s, e, x in intervals
            if min(e, hi_w) > max(s, lo_w)]


def cpu_in_window(samples: list[dict], start: float | None = None,
                  end: float | None = None) -> tuple[dict, float, float | None, float | None]:
    """({role: CPU seconds}, seconds covered, covered from, covered to) between `start` and `end` (default: the
    samples' whole span), from the intervals between samples that lie wholly inside the window: an interval that
    straddles an edge holds what happened outside it too (a producer's imports just before its traffic), which
    spreading evenly would wrongly count. Only when no interval fits (a window shorter than the sampling interval)
    are the overlapping parts counted, each by its share of the interval."""
    parts = [(lo, hi, c) for lo, hi, _, c in window_parts(cpu_intervals(samples), start, end)]
    used: dict[str, float] = defaultdict(float)
    for lo, hi, cores in parts:
        for role, c in cores.items():
            used[role] += c * (hi - lo)
    covered = sum(hi - lo for lo, hi, _ in parts)
    return dict(used), covered, (parts[0][0] if parts else None), (parts[-1][1] if parts else None)


def footprint(samples: list[dict], start: float | None = None, end: float | None = None,
              goal: float = FOOTPRINT_GOAL) -> dict:
    """The harness's own CPU (HARNESS_ROLES) against the CPU of the system it measures (SUT_ROLES), over the
    traffic window [`start`, `end`] (default: every sample; see cpu_in_window): on one machine the cores are
    shared, so what the harness spends is taken from the system under test. A role in neither table is listed
    under `unclassified` and in neither sum (and the detail says so). No samples, a window the samples do not
    cover, or no CPU of the system under test: the ratio is unknown (None), never 0. `ok` is None when unknown.
    Over the goal is a statement about the measurement's quality (said in the console and the report), not a
    check: a slower machine's runs do not fail for it."""
    out: dict = {"goal": goal, "harness_roles": list(HARNESS_ROLES), "sut_roles": list(SUT_ROLES),
                 "from_t": start, "to_t": end}
    used, covered, first, last = cpu_in_window(samples, start, end)
    out["window_s"], out["covered_from_t"], out["covered_to_t"] = round(covered, 3), first, last
    out["by_role"] = {role: round(v, 3) for role, v in sorted(used.items(), key=lambda kv: _role_key(kv[0]))}
    unclassified = {r: v for r, v in out["by_role"].items() if r not in HARNESS_ROLES and r not in SUT_ROLES}
    out["unclassified"] = unclassified
    if not covered:
        why = "no resource samples" if not samples else "the resource samples do not cover the traffic window"
        return out | {"harness_cpu_s": None, "sut_cpu_s": None, "ratio": None, "ok": None,
                      "detail": f"the harness's share of the CPU is unknown: {why}"}
    harness = sum(v for r, v in used.items() if r in HARNESS_ROLES)
    sut = sum(v for r, v in used.items() if r in SUT_ROLES)
    out["harness_cpu_s"], out["sut_cpu_s"] = round(harness, 3), round(sut, 3)
    if sut <= 0:
        return out | {"ratio": None, "ok": None, "detail": "the harness's share of the CPU is unknown: no CPU of "
                                                             "the system under test was sampled in the traffic window"}
    ratio = harness / sut
    out["ratio"], out["ok"] = round(ratio, 5), ratio < goal
    detail = (f"the harness used {ratio:.1%} of the CPU of what it measured ({harness:,.1f} CPU s against "
              f"{sut:,.1f} over {covered:,.0f} s of traffic; goal under {goal:.0%})")
    if not out["ok"]:
        detail += ": measurement distorted, the harness took CPU from the system under test"
    if unclassified:
        detail += "; not counted (role unknown to the harness/system-under-test table): " + ", ".join(
            f"{r} {v:,.1f} CPU s" for r, v in unclassified.items())
    return out | {"detail": detail}


def measured_window(run_dir: Path, start: float | None, end: float | None,
                    through: float | None = None) -> tuple[float | None, float | None]:
    """[`start`, `end`] (the producers' start and scheduled end), ended earlier by the timeline's traffic_end when
    the traffic stopped early: the window the footprint and the machine figure are taken over. `through`: a
    query that reads after its traffic (availableNow, once) is measured until then, its last batch's end."""
    ends = [e["t"] for e in read_jsonl(Path(run_dir) / "timeline.jsonl")
            if e.get("event") == "traffic_end" and isinstance(e.get("t"), (int, float))]
    if ends and end is not None and start is not None and start < ends[-1] < end:
        end = ends[-1]
    if through is not None and end is not None and through > end:
        end = through
    return start, end


def run_footprint(run_dir: Path, start: float | None, end: float | None, client: str | None = None,
                  floor: dict | None = None, through: float | None = None, samples: list[dict] | None = None) -> dict:
    """`footprint` of a run directory over its traffic (measured_window), with the producers' CPU per event sent
    over the window the CPU was counted in (their stats rows: events sent each second). `client`: the producers'
    client library when it sets a floor of its own (the azure-eventhub SDK); `floor`: what a plain loop of that
    client costs per event here (harness.records.calibration, as the run recorded it): the footprint then says what the
    same events sent that way would have taken of what was measured. `samples`: resources.jsonl as already read
    (else read here)."""
    out = footprint(load(run_dir) if samples is None else samples, *measured_window(run_dir, start, end, through))
    stats = [read_jsonl(f) for f in sorted((Path(run_dir) / "producers").glob("stats-*.jsonl"))]  # a file a process
    sent = _sent_between(stats, out.get("covered_from_t"), out.get("covered_to_t"))
    producer_s = (out.get("by_role") or {}).get("producer")
    if not sent or producer_s is None or out.get("ratio") is None:
        return out
    out["producer_us_per_event"] = round(1e6 * producer_s / sent, 1)
    if client is None:
        return _client_threads(out, stats, producer_s)
    us = floor.get("us_per_event") if floor else None
    if not isinstance(us, (int, float)) or us <= 0:
        return out | {"detail": out["detail"] + f"; the producers spent {out['producer_us_per_event']:,.0f} us of "
                      f"CPU per event sent, most of it {client}'s own (`harness bench eh-producers` measures a plain "
                      f"{client} loop here, and later runs are read against it)"}
    floor_ratio = us * sent / 1e6 / out["sut_cpu_s"]
    out["client_floor"] = {"client": client, "us_per_event": us, "ratio": round(floor_ratio, 5),
                           "measured_at": floor.get("measured_at"), "by": floor.get("by")}
    return out | {"detail": out["detail"] + (
        f"; the producers spent {out['producer_us_per_event']:,.0f} us of CPU per event sent, a plain {client} "
        f"send loop {us:,.0f} us ({floor.get('by') or 'measured'}, {floor.get('measured_at') or 'date unknown'}): "
        f"those events sent that way would have taken {floor_ratio:.1%}, the floor this client sets")}


SPIN_SHARE = 0.5  # the client's threads used at least this share of the producers' CPU: its own loop, not sending


def _client_threads(out: dict, stats: list[list[dict]], producer_s: float) -> dict:
    """The part of the producers' CPU their client library's own threads used (stats rows' `client_cpu_s`,
    librdkafka's threads), over the window the CPU was counted in; when the footprint is over its goal only because
    of them, the detail says so: librdkafka's broker threads busy-loop while a broker does not answer (an idempotent
    partition waiting for its in-flight requests to drain), which no code of the harness's can avoid. Over the
    goal, the detail says what the harness's share would have been without them, and names the spin when they
    used most of the producers' CPU (SPIN_SHARE)."""
    used = _client_cpu_between(stats, out.get("covered_from_t"), out.get("covered_to_t"))
    if used is None or not producer_s:
        return out
    used = min(used, producer_s)  # two clocks (the sampler's and the stats rows'): never more than the whole
    own = out["harness_cpu_s"] - used
    out["producer_client_cpu_s"] = round(used, 3)
    detail = (f"; of the producers' {producer_s:,.1f} CPU s, librdkafka's own threads used {used:,.1f} "
              f"({used / producer_s:.0%})")
    if not out["ok"]:
        detail += f": without them the harness would have used {own / out['sut_cpu_s']:.1%}"
        if used >= SPIN_SHARE * producer_s:
            detail += ("; librdkafka's broker threads spin while a broker does not answer (an idempotent partition "
                       "waiting for its in-flight requests), taking that CPU from the system under test here")
    return out | {"detail": out["detail"] + detail}


def _client_cpu_between(stats: list[list[dict]], start: float | None, end: float | None) -> float | None:
    """CPU seconds the producers' client threads used between the stats rows inside [start, end] (each process's
    cumulative `client_cpu_s`, last minus first); None when no row has it."""
    if start is None or end is None:
        return None
    total, found = 0.0, False
    for rows in stats:
        values = [r["client_cpu_s"] for r in rows if isinstance(r.get("t"), (int, float))
                  and start <= r["t"] <= end and isinstance(r.get("client_cpu_s"), (int, float))]
        if len(values) >= 2:
            total += values[-1] - values[0]
            found = True
    return total if found else None


def _sent_between(stats: list[list[dict]], start: float | None, end: float | None) -> int:
    """Events the producers sent in the whole seconds inside [start, end] (stats rows: `sent` in [t, t + 1))."""
    if start is None or end is None:
        return 0
    return sum(int(r.get("sent") or 0) for rows in stats
               for r in rows if isinstance(r.get("t"), (int, float)) and start <= r["t"] and r["t"] + 1 <= end)


def machine_intervals(samples: list[dict]) -> list[tuple[float, float, dict]]:
    """(start, end, {"busy_s", "steal_s", "run_s", "sut_cpu_s", "cores", "ended"}) between consecutive samples
    that both read /proc/stat: the CPU seconds the whole machine was busy (BUSY_FIELDS) and stolen, what the run's
    own processes used (every role: cpu_intervals' rule) and the system under test's of it, and how many of the
    run's processes ended in it (their CPU after their last sample is not seen, so it would read as someone
    else's)."""
    ordered = sorted((x for x in samples if x.get("stat")), key=lambda x: x["t"])
    run_cores_by_role = {(start, end): cores for start, end, cores in cpu_intervals(ordered)}
    out = []
    for prev, cur in zip(ordered, ordered[1:]):
        dt = cur["t"] - prev["t"]
        if dt <= 0:
            continue
        a, b = prev["stat"], cur["stat"]
        ended = {(r["pid"], r["create_time"]) for r in prev.get("procs") or []} - \
            {(r["pid"], r["create_time"]) for r in cur.get("procs") or []}
        by_role = run_cores_by_role.get((prev["t"], cur["t"]), {})
        out.append((prev["t"], cur["t"], {
            "busy_s": max(0.0, sum(b.get(f, 0.0) - a.get(f, 0.0) for f in BUSY_FIELDS)),
            "steal_s": max(0.0, b.get("steal", 0.0) - a.get("steal", 0.0)),
            "run_s": sum(by_role.values()) * dt,
            "sut_cpu_s": sum(v for r, v in by_role.items() if r in SUT_ROLES) * dt,
            "cores": b.get("cores") or a.get("cores") or 0, "ended": len(ended)}))
    return out


def machine(samples: list[dict], start: float | None, end: float | None, max_busy_share: float) -> dict:
    """How busy the machine was with other work over [`start`, `end`] (window_parts' rule): the CPU that
    processes outside the run took (the machine's busy CPU time from /proc/stat minus the run's own processes',
    never below 0), in cores and as a share of the machine (cores x seconds), steal apart, and the run's own.
    Intervals in which a process of the run ended are left out (`left_out_s`): its last CPU is not sampled and
    would read as another process's. `busy` is whether other processes and steal together took more than
    `max_busy_share` of the machine (`sut_cores`: the system under test's own share of the run's CPU, for
    harness.checkers.busy's bound on what the others' CPU could have changed); None (unknown) when the samples hold no /proc/stat counters (a run recorded
    before they were sampled, a machine without /proc) or none of their intervals is in the window."""
    out: dict = {"from_t": start, "to_t": end, "max_busy_share": max_busy_share}
    parts = window_parts(machine_intervals(samples), start, end)
    kept = [(lo, hi, share, x) for lo, hi, share, x in parts if not x["ended"]]
    covered = sum(hi - lo for lo, hi, _, _ in kept)
    out["window_s"] = round(covered, 3)
    out["left_out_s"] = round(sum(hi - lo for lo, hi, _, x in parts if x["ended"]), 3)
    cores = max((x["cores"] for _, _, _, x in kept), default=0)
    if not covered or not cores:
        why = ("no resource samples hold the machine's CPU counters (/proc/stat)" if not parts else
               "every sampled interval of the window saw a process of the run end")
        return out | {"cores": cores or None, "busy": None, "detail": f"the machine's other load is unknown: {why}"}
    busy, steal, run, sut = (sum(share * x[key] for _, _, share, x in kept)
                             for key in ("busy_s", "steal_s", "run_s", "sut_cpu_s"))
    other = max(0.0, busy - run)
    capacity = cores * covered
    share = (other + steal) / capacity
    out |= {"cores": cores, "machine_cpu_s": round(busy, 3), "run_cpu_s": round(run, 3),
            "other_cpu_s": round(other, 3), "steal_cpu_s": round(steal, 3),
            "other_cores": round(other / covered, 4), "run_cores": round(run / covered, 4),
            "other_share": round(other / capacity, 5), "steal_share": round(steal / capacity, 5),
            "busy_share": round(share, 5), "sut_cpu_s": round(sut, 3), "sut_cores": round(sut / covered, 4),
            "busy": share > max_busy_share}
    detail = (f"other processes took {other / covered:,.2f} cores ({other / capacity:.1%} of the machine's {cores} "
              f"cores) and steal {steal / capacity:.1%} over {covered:,.0f} s of traffic, beside the run's own "
              f"{run / covered:,.2f} cores")
    if out["left_out_s"]:
        detail += f" ({out['left_out_s']:,.0f} s left out: a process of the run ended in them)"
    detail += (f": the machine was busy ({share:.1%} > {max_busy_share:.0%})" if out["busy"] else
               f"; within the {max_busy_share:.0%} bound")
    return out | {"detail": detail}


def run_machine(run_dir: Path, start: float | None, end: float | None, max_busy_share: float,
                through: float | None = None, samples: list[dict] | None = None) -> dict:
    """`machine` of a run directory over its traffic (measured_window, the footprint's window), against the
    scenario's bound (checks.max_busy_share). `samples`: resources.jsonl as already read (else read here)."""
    return machine(load(run_dir) if samples is None else samples, *measured_window(run_dir, start, end, through),
                   max_busy_share)


def disk_summary(samples: list[dict]) -> dict:
    series = disk_series(samples)
    if not series:
        return {}
    t_peak, peak = max(series, key=lambda x: x[1]["bytes"])
    dirs = sorted({d for _, x in series for d in x.get("by_dir") or {}})
    return {"samples": len(series), "peak_bytes": peak["bytes"], "peak_at": t_peak,
            "final_bytes": series[-1][1]["bytes"],
            "by_dir_peak": {d: max((x.get("by_dir") or {}).get(d, 0) for _, x in series) for d in dirs},
            "by_dir_final": dict(series[-1][1].get("by_dir") or {})}


def leaks(samples: list[dict], after_s: float = AFTER_S, max_growth_mb_per_h: float = MAX_GROWTH_MB_PER_H,
          min_span_s: float = MIN_SPAN_S, t0: float | None = None) -> dict:
    """Anonymous RSS growth per hour (samples without `anon_bytes`: RSS) of each process over its samples from `after_s` after the later of t0 (default: the
    first sample) and its own start (a driver restarted mid-run warms up again), as a least-squares slope; over
    `max_growth_mb_per_h` is a leak. A process with fewer than 3 such samples or spanning less than `min_span_s`
    is not judged. Per role, the same slope of the role's summed RSS after t0 + after_s, as a figure (a restart
    drops and regrows it, so it is not judged)."""
    ordered = sorted(samples, key=lambda x: x["t"])
    if t0 is None:
        t0 = ordered[0]["t"] if ordered else 0.0
    rows = []
    for (pid, created), p in processes(ordered).items():
        start = max(t0, created) + after_s
        pts = [(t, r.get("anon_bytes", r["rss_bytes"])) for t, r in p["points"] if t >= start]
        span = pts[-1][0] - pts[0][0] if pts else 0.0
        row = {"role": p["role"], "pid": pid, "create_time": created, "samples": len(pts), "span_s": round(span, 1),
               "rss_first_mb": round(pts[0][1] / MB, 1) if pts else None,
               "rss_last_mb": round(pts[-1][1] / MB, 1) if pts else None, "growth_mb_per_h": None}
        if len(pts) < 3 or span < min_span_s:
            row["verdict"] = "not judged"
            row["detail"] = (f"{len(pts)} sample(s) over {span:.0f} s after its warm-up; judging needs at least 3 "
                             f"over {min_span_s:g} s")
        else:
            growth = slope_per_s(pts) * 3600 / MB
            row["growth_mb_per_h"] = round(growth, 2)
            row["verdict"] = "leak" if growth > max_growth_mb_per_h else "ok"
            row["detail"] = (f"RSS {'+' if growth >= 0 else ''}{growth:,.1f} MB/h over {span:.0f} s "
                             f"({'over' if growth > max_growth_mb_per_h else 'within'} "
                             f"{max_growth_mb_per_h:g} MB/h)")
        rows.append(row)
    rows.sort(key=lambda r: (_role_key(r["role"]), r["create_time"], r["pid"]))
    roles = {}
    for role, series in role_rss(ordered).items():
        pts = [(t, v) for t, v in series if t >= t0 + after_s]
        span = pts[-1][0] - pts[0][0] if pts else 0.0
        roles[role] = {"samples": len(pts), "span_s": round(span, 1),
                       "growth_mb_per_h": round(slope_per_s(pts) * 3600 / MB, 2) if len(pts) >= 2 and span else None}
    leaking = [r for r in rows if r["verdict"] == "leak"]
    judged = [r for r in rows if r["verdict"] != "not judged"]
    if leaking:
        detail = "; ".join(f"{r['role']} pid {r['pid']} {r['growth_mb_per_h']:+,.1f} MB/h" for r in leaking)
        detail = f"RSS growing over {max_growth_mb_per_h:g} MB/h after warm-up: {detail}"
    elif judged:
        detail = f"{len(judged)} process(es) within {max_growth_mb_per_h:g} MB/h after warm-up"
    else:
        detail = f"no process watched long enough to judge ({min_span_s:g} s after a {after_s:g} s warm-up)"
    return {"ok": not leaking, "judged": len(judged), "leaking": len(leaking), "not_judged": len(rows) - len(judged),
            "after_s": after_s, "max_growth_mb_per_h": max_growth_mb_per_h, "min_span_s": min_span_s,
            "detail": detail, "processes": rows, "roles": roles}


def summarize(samples: list[dict], after_s: float = AFTER_S, max_growth_mb_per_h: float = MAX_GROWTH_MB_PER_H,
              min_span_s: float = MIN_SPAN_S, t0: float | None = None) -> dict:
    """What result.json keeps under `resources`: per role, the disk, the leak verdicts and the sampling cost."""
    if not samples:
        return {}
    ordered = sorted(samples, key=lambda x: x["t"])
    costs = [s["cost_ms"] for s in ordered if "cost_ms" in s]
    walks = [s["disk_ms"] for s in ordered if "disk_ms" in s]
    gaps = sorted(b["t"] - a["t"] for a, b in zip(ordered, ordered[1:]))
    return {"samples": len(ordered), "first_t": ordered[0]["t"], "last_t": ordered[-1]["t"],
            "interval_s": round(gaps[len(gaps) // 2], 3) if gaps else None,
            # what sampling cost the runner: a whole sample, and the disk walk within it (spaced out when slow)
            "cost_ms": {"mean": round(sum(costs) / len(costs), 2), "max": max(costs)} if costs else {},
            "disk_walk_ms": {"count": len(walks), "mean": round(sum(walks) / len(walks), 2), "max": max(walks)}
            if walks else {},
            "transient": sum(s.get("transient", 0) for s in ordered),
            "roles": roles_summary(ordered), "disk": disk_summary(ordered),
            "leaks": leaks(ordered, after_s, max_growth_mb_per_h, min_span_s, t0)}
