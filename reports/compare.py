"""Runs side by side: key figures, their change against a baseline, and whether that change is beyond the noise.

**A run or its repeats.** A directory `harness run --repeat N` wrote (repeat.json), or the runs of one
combination of a sweep with `repeat = N`, stands for one configuration: its figure is the mean of its repeats'.

**Noise.** With at least MIN_SAMPLES repeats on a side, the spread across repeats (their standard deviation over
the square root of their number: the standard error of the mean); otherwise the run's own steady windows:
latency percentiles per tenth of the measured window from where its steady state began
(`latency_windows`, `steady` in result.json), Spark's throughput and batch time per batch of the steady part
(progress.jsonl), the lag averaged over each 5 s of its steady window (harness.analysis.lag.lag_on_grid), each fault's recovery (result.json `recovery`: a
run with three kills has three samples of its time to recover). The band is twice the two sides' combined
standard error plus 1% of the baseline (figures that barely move).

**Verdicts.** `better` or `worse` (in the figure's own direction) when the change is beyond the band; `same`
within it; `cannot tell` when a side has fewer than MIN_SAMPLES samples (unless the change is within the 1% every
band has), or the band is wider than MAX_BAND (half) of the baseline (a change hidden in that much noise is not
"same"); `setting` for a figure a setting decides (the
offered rate when the runs were asked for different rates). Counts (lost, duplicates, consumers and receivers
created) are exact: any change is one. The band is shown beside every change. A pure function of the run
directories.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.lag import lag_on_grid
from harness.analysis.progress import epoch_s
from harness.errors import InputError
from harness.files.jsonl import read_jsonl
from harness.text.wording import PROCESSING_RATE

# figure -> (what, lower is better)
FIGURES: dict[str, tuple[str, bool]] = {
    "process_rps": (f"Spark's {PROCESSING_RATE}, rows/s", False),
    "produce_eps": ("events/s produced (acked)", False),
    "p50": ("end-to-end latency p50, ms", True),
    "p90": ("end-to-end latency p90, ms", True),
    "p99": ("end-to-end latency p99, ms", True),
    "max": ("end-to-end latency max, ms", True),
    "batch_p50_ms": ("batch duration p50, ms", True),
    "mean_lag": ("mean consumer lag in the steady window, events", True),
    "time_to_recover_s": ("seconds until a fault's lag was back in its band (mean over the faults)", True),
    "drain_eps": ("backlog drained per second after a fault (net, mean over the faults)", False),
    "lost": ("events lost", True),
    "duplicates": ("duplicate deliveries", True),
    "consumers_created": ("Kafka consumers the executors created (backend.proxy)", True),
    "receivers_created": ("Event Hubs receivers the source created", True),
}
COUNTS = ("lost", "duplicates", "consumers_created", "receivers_created")  # exact: any change is a change
RELATIVE_FLOOR = 0.01
MIN_SAMPLES = 3
MAX_BAND = 0.5
LAG_WINDOW_S = 5.0


class CompareError(InputError):
    pass


# ------------------------------------------------------------------------------------------------ reading runs
@dataclass
class Run:
    path: Path
    label: str
    result: dict
    samples: dict[str, list[float]]  # figure -> per-window / per-batch values (noise)
    settings: dict[str, Any] = field(default_factory=dict)  # the resolved scenario, dotted keys
    varied: set[str] = field(default_factory=set)  # the keys its `--set` overrides (or its sweep) gave
    repeats: list[Run] = field(default_factory=list)  # the runs it stands for, when repeated

    def figure(self, name: str) -> float | None:
        if self.repeats:
            values = [v for r in self.repeats if (v := r.figure(name)) is not None]
            return float(np.mean(values)) if values else None
        return figure(self.result, name)

    def noise(self, name: str) -> tuple[list[float], str]:
        """The samples its noise is measured from, and what they are."""
        if len(self.repeats) >= MIN_SAMPLES:
            return [v for r in self.repeats if (v := r.figure(name)) is not None], "repeats"
        if self.repeats:  # too few repeats: each one's own windows pooled
            return [v for r in self.repeats for v in r.samples.get(name, [])], "steady windows"
        return self.samples.get(name, []), "steady windows"


def recovery_values(result: dict, key: str) -> list[float]:
    """A recovery figure of each fault that has it (result.json `recovery`)."""
    return [float(r[key]) for r in result.get("recovery") or [] if r.get(key) is not None]


def figure(result: dict, name: str) -> float | None:
    """One of FIGURES from a run's result.json (None when the run has no such figure)."""
    r = result
    if name in ("time_to_recover_s", "drain_eps"):
        values = recovery_values(r, name)
        return float(np.mean(values)) if values else None
    value = {
        "process_rps": (r.get("throughput") or {}).get("process_rps"),
        "produce_eps": (r.get("throughput") or {}).get("produce_eps"),
        "batch_p50_ms": ((((r.get("batch_stats") or {}).get("duration_ms") or {}).get("triggerExecution")
                          or {}).get("p50")),
        "mean_lag": (((r.get("sustain") or {}).get("lag") or {}).get("mean_lag")
                     if r.get("sustain") else (r.get("lag_events") or {}).get("mean")),
        "lost": (r.get("counts") or {}).get("lost"),
        "duplicates": (r.get("counts") or {}).get("duplicates"),
        "consumers_created": (r.get("consumers") or {}).get("created"),
        "receivers_created": ((r.get("source") or {}).get("totals") or {}).get("created"),
    }.get(name, (r.get("latency_ms") or {}).get(name))
    return None if value is None else float(value)


def load_run(path: Path) -> Run:
    """One run directory, or a repeat set (repeat.json) standing for its repeats."""
    repeat = path / "repeat.json"
    if repeat.is_file():
        try:
            members = [load_run(path / r["run_dir"]) for r in json.loads(repeat.read_text())["runs"]]
        except (OSError, ValueError, KeyError) as exc:
            raise CompareError(f"{repeat}: not a repeat summary: {exc}") from None
        if not members:
            raise CompareError(f"{repeat}: no run finished")
        first = members[0]
        return Run(path, path.name, {**first.result, "verdict": _worst(m.result.get("verdict") for m in members)},
                   {}, first.settings, first.varied, members)
    result_path = path / "result.json"
    try:
        result = json.loads(result_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CompareError(f"{path}: no result.json (not a run directory; a sweep's runs are its subdirectories)")
    except (OSError, ValueError) as exc:
        raise CompareError(f"{result_path}: not readable JSON: {exc}") from None
    return Run(path, path.name, result, steady_samples(path, result), resolved_settings(path),
               {o.partition("=")[0].strip() for o in _overrides(path)})


def _worst(verdicts) -> str:
    """A repeat set's verdict from its runs' (harness.commands.repeat's rule): fail beats unjudged beats pass."""
    verdicts = list(verdicts)
    return next((v for v in ("fail", "unjudged") if v in verdicts),
                "pass" if all(v == "pass" for v in verdicts) else "unjudged")


def steady_samples(path: Path, result: dict) -> dict[str, list[float]]:
    """Per figure, the run's own samples of its steady part (the module's noise)."""
    steady = result.get("steady") or {}
    t0 = steady.get("t0")
    start = (t0 + steady.get("from_s", 0.0)) if t0 is not None else None
    samples: dict[str, list[float]] = {}
    windows = [w for w in result.get("latency_windows") or []
               if start is None or w.get("from_ms", 0.0) >= start * 1000.0 - 1.0]
    for key in ("p50", "p90", "p99", "max"):
        values = [w[key] for w in windows if key in w]
        if len(values) > 1:
            samples[key] = values
    progress = read_jsonl(path / "progress.jsonl")
    batches = [p for p in progress if p.get("numInputRows", 0) > 0
               and (p.get("durationMs") or {}).get("triggerExecution")
               and (start is None or ("timestamp" in p and epoch_s(p["timestamp"]) >= start))]
    if len(batches) > 1:
        samples["process_rps"] = [p["numInputRows"] / (p["durationMs"]["triggerExecution"] / 1000.0)
                                  for p in batches]
        samples["batch_p50_ms"] = [float(p["durationMs"]["triggerExecution"]) for p in batches]
    for key in ("time_to_recover_s", "drain_eps"):  # each fault one sample
        if len(recovery_values(result, key)) > 1:
            samples[key] = recovery_values(result, key)
    window = (result.get("sustain") or {}).get("window")
    if window:
        lag = lag_on_grid(read_jsonl(path / "lag.jsonl"), progress, window[0], window[1])
        bins: dict[int, list[float]] = {}
        for t, v in lag:
            bins.setdefault(int((t - window[0]) // LAG_WINDOW_S), []).append(float(v))
        if len(bins) > 1:
            samples["mean_lag"] = [sum(b) / len(b) for b in bins.values()]
    return samples


def _overrides(path: Path) -> list[str]:
    try:
        overrides = json.loads((path / "scenario.json").read_text()).get("overrides") or []
    except (OSError, ValueError):
        overrides = []
    return [o for o in overrides if o != "sweep={}"]  # runs recorded before sweeps stopped passing it


NOT_SETTINGS = ("description", "sweep", "sweep_repeat")  # words, and the sweep table each of its runs had cleared


def resolved_settings(path: Path) -> dict[str, Any]:
    """The run's resolved scenario (scenario.json) as dotted keys, option tables' names whole: what a comparison
    sets side by side before any figure. {} for a run that recorded none."""
    try:
        resolved = json.loads((path / "scenario.json").read_text(encoding="utf-8"))["resolved"]
    except (OSError, ValueError, KeyError):
        return {}
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            out[prefix] = value

    walk("", {k: v for k, v in resolved.items() if k not in NOT_SETTINGS})
    return out


def settings_diff(base: Run, runs: list[Run]) -> dict[str, Any]:
    """Every setting in which a run differs from the baseline, with each run's value; `unintended`: those no run's
    overrides (or its sweep) set, so the comparison is not only of what was meant to vary; `scenarios`: the
    scenario names when they differ."""
    keys = sorted({k for r in [base, *runs] for k in r.settings})
    differ = {k: [r.settings.get(k) for r in [base, *runs]] for k in keys
              if any(r.settings.get(k) != base.settings.get(k) for r in runs)}
    varied = set().union(*(r.varied for r in [base, *runs]))
    unintended = [k for k in differ if k not in ("name", "seed")
                  and not any(k == v or k.startswith(v + ".") for v in varied)]
    names = sorted({str(r.result.get("scenario") or r.settings.get("name")) for r in [base, *runs]})
    return {"differ": differ, "unintended": unintended, "scenarios": names if len(names) > 1 else []}


def settings_warning(settings: dict[str, Any]) -> str | None:
    parts = []
    if settings.get("scenarios"):
        parts.append(f"the runs are of different scenarios ({', '.join(settings['scenarios'])})")
    if settings.get("unintended"):
        parts.append("they differ in settings none of their overrides set: " + ", ".join(settings["unintended"]))
    return "; ".join(parts) or None


def expand(paths: list[Path]) -> list[Path]:
    """Run directories; a sweep's directory stands for its runs, in sweep order."""
    out = []
    for p in paths:
        sweep = p / "sweep.json"
        if sweep.is_file():
            try:
                runs = json.loads(sweep.read_text())["runs"]
            except (OSError, ValueError, KeyError) as exc:
                raise CompareError(f"{sweep}: not a sweep summary: {exc}") from None
            out += [p / r["run_dir"] for r in runs]
        else:
            out.append(p)
    return out


def _target_differs(base: Run, run: Run) -> bool:
    """The offered rate is a setting: when the runs were asked for different rates, the produced rate is what
    differs, not a figure that got better or worse."""
    a = (base.result.get("throughput") or {}).get("target_eps")
    b = (run.result.get("throughput") or {}).get("target_eps")
    return a is not None and b is not None and abs(a - b) > 0.01 * max(abs(a), 1.0)


# ------------------------------------------------------------------------------------------------ comparing
def _standard_error(values: list[float]) -> float:
    return float(np.std(values, ddof=1) / math.sqrt(len(values)))


def judge_change(name: str, base: Run, run: Run) -> dict[str, Any]:
    a, b = base.figure(name), run.figure(name)
    if a is None or b is None:
        return {"base": a, "value": b, "delta": None, "change": None, "verdict": "n/a", "noise": None,
                "noise_basis": None}
    lower_better = FIGURES[name][1]
    delta = b - a
    out = {"base": a, "value": b, "delta": delta, "change": None if a == 0 else delta / abs(a)}
    if name in COUNTS:
        return {**out, "verdict": "same" if delta == 0 else "better" if (delta < 0) == lower_better else "worse",
                "noise": 0.0, "noise_basis": "exact"}
    (sa, basis_a), (sb, basis_b) = base.noise(name), run.noise(name)
    basis = basis_a if basis_a == basis_b else f"{basis_a} / {basis_b}"
    n = min(len(sa), len(sb))
    if n < MIN_SAMPLES:  # no band to judge by; a change within the 1% floor every band has is still the same
        return {**out, "verdict": "same" if abs(delta) <= RELATIVE_FLOOR * abs(a) else "cannot tell", "noise": None,
                "noise_basis": f"{basis}: {len(sa)} and {len(sb)} samples, need {MIN_SAMPLES} each", "samples": n}
    band = 2.0 * math.hypot(_standard_error(sa), _standard_error(sb)) + RELATIVE_FLOOR * abs(a)
    if abs(delta) > band:
        verdict = "better" if (delta < 0) == lower_better else "worse"
    elif band > MAX_BAND * abs(a):
        verdict = "cannot tell"
    else:
        verdict = "same"
    return {**out, "verdict": verdict, "noise": band, "noise_basis": f"{basis} (n={len(sa)}, {len(sb)})",
            "samples": n}


THRESHOLD = re.compile(r"^\s*([a-z0-9_]+)\s*=\s*([+-])\s*(\d+(?:\.\d+)?)\s*(%?)\s*$")


def parse_thresholds(text: str) -> list[tuple[str, str, float, bool]]:
    """`p99=+20%,process_rps=-10%` -> [(figure, sign, amount, relative)]: fail when the figure moved further
    than the amount in that direction."""
    out = []
    for part in [p for p in text.split(",") if p.strip()]:
        m = THRESHOLD.match(part)
        if not m or m.group(1) not in FIGURES:
            raise CompareError(f"--fail-on {part.strip()!r}: expected FIGURE=+N% or FIGURE=-N (N in the figure's "
                               f"units); figures: {', '.join(FIGURES)}")
        out.append((m.group(1), m.group(2), float(m.group(3)), m.group(4) == "%"))
    return out


def crossed(change: dict, sign: str, amount: float, relative: bool) -> bool:
    if change["delta"] is None:
        return False
    moved = change["change"] if relative else change["delta"]
    if moved is None:  # relative change from 0: any move in that direction crosses
        moved = math.copysign(math.inf, change["delta"]) if change["delta"] else 0.0
    limit = amount / 100.0 if relative else amount
    return moved > limit if sign == "+" else moved < -limit


def compare(paths: list[Path], baseline: Path | None = None, fail_on: str = "") -> dict[str, Any]:
    thresholds = parse_thresholds(fail_on)
    runs = [load_run(p) for p in expand(paths)]
    base = load_run(baseline) if baseline is not None else (runs[0] if runs else None)
    if base is None or not runs:
        raise CompareError("give at least one run directory (and a baseline, or two runs)")
    others = [r for r in runs if r.path.resolve() != base.path.resolve()]
    if not others:
        raise CompareError("nothing to compare: give a second run (or --baseline)")
    rows = []
    failures = []
    for run in others:
        changes = {name: judge_change(name, base, run) for name in FIGURES}
        if _target_differs(base, run):
            changes["produce_eps"].update(verdict="setting", noise=None, noise_basis="a setting")
        for name, sign, amount, relative in thresholds:
            if crossed(changes[name], sign, amount, relative):
                failures.append(f"{run.label}: {name} moved {_fmt_change(changes[name])} (limit {sign}{amount:g}"
                                f"{'%' if relative else ''})")
        rows.append({"run": str(run.path), "label": run.label, "verdict": run.result.get("verdict"),
                     "changes": changes})
    settings = settings_diff(base, others)
    return {"baseline": {"run": str(base.path), "label": base.label, "verdict": base.result.get("verdict"),
                         "figures": {n: base.figure(n) for n in FIGURES}},
            "runs": rows, "fail_on": fail_on, "failures": failures,
            "settings": {**settings, "warning": settings_warning(settings)}}


VERDICTS_TEXT = ("Each figure: the run's value (the mean of its repeats, for a repeated run), its change against the "
                 "baseline beside the noise band it was judged against, and the verdict: better or worse beyond the "
                 "band; same within it; cannot tell with fewer than 3 samples a side (unless within 1%) or a band wider "
                 "than half the baseline; setting = the runs were asked for different rates, so the rate produced is what "
                 "differs, not a result. The band is twice the combined standard error of both sides (across "
                 "repeats when there are 3 or more, else over the run's own steady windows and batches) plus 1% "
                 "of the baseline; counts are exact.")


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.0f}"


def _fmt_change(change: dict) -> str:
    if change["delta"] is None:
        return "-"
    rel = "" if change["change"] is None else f" ({100 * change['change']:+.1f}%)"
    return f"{change['delta']:+,.1f}{rel}"


def _fmt_band(change: dict) -> str:
    """The noise band a change was judged against, beside it."""
    if change.get("noise_basis") in ("exact", "a setting"):
        return change["noise_basis"]
    if change.get("noise") is None:
        return "no band" if change["delta"] is None else f"no band: {change.get('noise_basis')}"
    return f"±{_fmt(change['noise'])}"


def _value(value: Any) -> str:
    return "-" if value is None else json.dumps(value) if isinstance(value, (dict, list, bool)) else str(value)


def settings_markdown(summary: dict) -> list[str]:
    """What differs between the runs' resolved scenarios, before any figure."""
    settings = summary.get("settings") or {}
    differ = settings.get("differ") or {}
    lines = ["## Settings", ""]
    if settings.get("warning"):
        lines += [f"**Warning:** {settings['warning']}.", ""]
    if not differ:
        return lines + ["The runs' resolved scenarios are the same.", ""]
    head = ["setting", "baseline"] + [r["label"] for r in summary["runs"]]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join([f"`{k}`"] + [_value(v) for v in values]) + " |" for k, values in differ.items()]
    return lines + [""]


def compare_markdown(summary: dict) -> str:
    base = summary["baseline"]
    lines = [f"# Comparison against {base['label']} ({base['verdict']})", ""] + settings_markdown(summary) + [
             VERDICTS_TEXT, ""]
    head = ["figure", "baseline"] + [r["label"] for r in summary["runs"]]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, (what, _) in FIGURES.items():
        cells = [f"{name} ({what})", _fmt(base["figures"][name])]
        for r in summary["runs"]:
            c = r["changes"][name]
            cells.append("-" if c["value"] is None else
                         f"{_fmt(c['value'])} ({_fmt_change(c)} {_fmt_band(c)}, **{c['verdict']}**)")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Runs (their own verdicts; the settings given on top of their scenario):", ""]
    lines += [f"- {r['label']}: {r['verdict']}; {', '.join(_overrides(Path(r['run']))) or 'no overrides'}"
              for r in [base] + summary["runs"]]
    if summary["fail_on"]:
        lines += ["", f"Thresholds `{summary['fail_on']}`: " + ("; ".join(summary["failures"])
                                                                  if summary["failures"] else "none crossed")]
    return "\n".join(lines) + "\n"


def recommended_line(summary: dict) -> str:
    """A sweep's answer in one line (harness.commands.sweep.recommend)."""
    rec = summary.get("recommended")
    if not rec:
        return "recommended: none (no combination passed: none sustained the load with nothing lost)"
    values = ", ".join(f"{k}={_fmt(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else _value(v)}"
                       for k, v in rec["values"].items())
    return (f"recommended: {values} (p99 {_fmt(rec['latency_p99_ms'])} ms, {_fmt(rec['process_rps'])} rows/s while busy; "
            f"{rec['why']}; runs: {rec['run_dir']})")
