"""`harness` / `python -m harness`: run scenarios, list them, manage a standalone broker, set up, serve the emulator.

Exit codes: 0 pass, 1 a check failed, 2 bad input (file, field and what is allowed are named), 3 unjudged (no
check failed, but one could not be judged, or the machine was too busy with other work to judge performance),
130 interrupted.
"""
from __future__ import annotations

import argparse
import errno
import json
import sys
import tempfile
from pathlib import Path

from harness.check import counts_against, exit_code, status_of
from harness.errors import InputError
from harness.jvm.artifacts import SetupError
from harness.files.paths import SCENARIOS_DIR
from harness.spark.runtimes import LINES as PYSPARK_LINES
from harness.version import VersionAction

EXIT_BAD_INPUT = 2
MAX_CAPACITY_TRIALS = 64


def _out_writable(out: str | None) -> Path | None:
    """`--out` must be a directory the run can write, known before anything starts: a file, or a place under a
    read-only mount or a directory without write permission, is bad input (exit 2), not a traceback after Kafka
    started. Tried by making (and removing) a directory in the nearest existing ancestor, as the run will."""
    if not out:
        return None
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise InputError(f"--out {out}: is a file, not a directory; give a new directory for the run")
    probe_in = path
    while not probe_in.exists():
        probe_in = probe_in.parent
    if not probe_in.is_dir():
        raise InputError(f"--out {out}: {probe_in} is a file, so no directory can be made under it")
    try:
        tempfile.TemporaryDirectory(prefix=".harness-probe-", dir=probe_in).cleanup()
    except OSError as exc:
        reason = {errno.EROFS: "a read-only file system", errno.EACCES: "no permission to write there",
                  errno.EPERM: "not permitted to write there", errno.ENOSPC: "no space left on the device"}.get(
            exc.errno, exc.strerror or str(exc))
        raise InputError(f"--out {out}: cannot write under {probe_in} ({reason}); give a directory you can "
                         "write") from None
    return path


def _cmd_run(args) -> int:
    from harness.console import Console
    from harness.commands.run import run

    from harness.config import MAX_SWEEP_RUNS

    if args.repeat is not None and not 1 <= args.repeat <= MAX_SWEEP_RUNS:
        raise InputError(f"--repeat {args.repeat}: how many times to run the scenario, 1 to {MAX_SWEEP_RUNS}")
    _out_writable(args.out)
    outcome = run(args.scenario, args.set, Path(args.out) if args.out else None,
                  Console(quiet=True if args.quiet else None), repeat=args.repeat, replace=args.replace)
    return outcome.exit_code


def _cmd_capacity(args) -> int:
    from harness.commands.capacity import run_capacity
    from harness.console import Console

    if args.max_trials > MAX_CAPACITY_TRIALS:  # the ramp doubles the rate each trial (below 1: capacity's own)
        raise InputError(f"--max-trials {args.max_trials}: trials in all, at most {MAX_CAPACITY_TRIALS}")
    _out_writable(args.out)
    outcome = run_capacity(args.scenario, args.set, Path(args.out) if args.out else None,
                           Console(quiet=True if args.quiet else None), latency_p99_ms=args.latency_p99_ms,
                           trial_s=args.trial_s, max_trials=args.max_trials, start_eps=args.start_eps,
                           replace=args.replace)
    return outcome.exit_code


def _cmd_outage_cap(args) -> int:
    from harness.commands.outage_cap import run_outage_cap
    from harness.console import Console

    _out_writable(args.out)
    _, _, code = run_outage_cap(args.scenario, args.set, Path(args.out) if args.out else None,
                                Console(quiet=True if args.quiet else None), max_trials=args.max_trials,
                                drain_within_s=args.drain_within_s, replace=args.replace)
    return code


def _cmd_rehearse(args) -> int:
    from harness.commands.rehearse import rehearse
    from harness.console import Console

    _out_writable(args.out)
    _, code = rehearse(args.rehearsal, Path(args.out) if args.out else None, only=args.only,
                       console=Console(quiet=True if args.quiet else None), replace=args.replace)
    return code


def _cmd_shrink(args) -> int:
    from harness.commands.shrink import shrink
    from harness.console import Console

    _out_writable(args.out)
    if args.max_minutes <= 0:
        raise InputError(f"--max-minutes {args.max_minutes:g}: must be more than 0")
    _, code = shrink(Path(args.run_dir), Path(args.out) if args.out else None, checks=args.check,
                     max_runs=args.max_runs, max_minutes=args.max_minutes,
                     console=Console(quiet=True if args.quiet else None), replace=args.replace)
    return code


def _cmd_soak(args) -> int:
    from harness.console import Console
    from harness.commands.soak import soak
    from harness.config import MAX_SEED

    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        raise InputError(f"--seed {args.seed}: the seed is an integer from 0 to {MAX_SEED}")
    _out_writable(args.out)
    outcome = soak(args.scenario, duration=args.duration, seed=args.seed, fail_fast=args.fail_fast,
                   replay=Path(args.replay) if args.replay else None,
                   baseline=Path(args.baseline) if args.baseline else None, fail_on=args.fail_on,
                   overrides=args.set, out=Path(args.out) if args.out else None,
                   console=Console(quiet=True if args.quiet else None), replace=args.replace)
    return outcome.exit_code


def _cmd_list(args) -> int:
    from harness.commands import listing

    if args.backend and args.backend not in listing.BACKENDS:
        raise InputError(f"--backend {args.backend}: one of {', '.join(listing.BACKENDS)}")
    if args.kind and args.kind not in listing.KINDS:
        raise InputError(f"--kind {args.kind}: one of {', '.join(listing.KINDS)} (load: neither faults nor a sweep)")
    found = listing.rows(SCENARIOS_DIR, backend=args.backend, kind=args.kind, word=args.word)
    out = listing.render(found, args.json)
    if out is not None:
        print(out)
    return 0


def _cmd_init(args) -> int:
    from harness.commands.init import init

    init(Path(args.directory), query=args.query, name=args.name, install=args.install, force=args.force)
    return 0


def _cmd_validate(args) -> int:
    from harness.config import load_scenario

    scenario, path, _ = load_scenario(args.scenario, args.set)
    print(f"{path}: ok" + (f"; {scenario.unchecked}" if scenario.unchecked else ""))
    if args.show:
        from harness.secrets import redacted

        print(json.dumps(redacted(scenario.model_dump(mode="json")), indent=2))  # secrets as *** (harness.secrets)
    return 0


def _cmd_setup(args) -> int:
    from harness.commands.setup import setup
    from harness.console import Console

    return setup(Console(), verbose=args.verbose, pyspark=tuple(args.pyspark or ()))


def _cmd_kafka(args) -> int:
    from harness.backends.kafka import standalone

    if args.action == "up":
        if args.nodes < 1:
            raise InputError(f"--nodes {args.nodes}: how many broker nodes, 1 or more")
        security = standalone.security_request(args.security_protocol, args.sasl_mechanism, args.user,
                                               args.password_env)
        state = standalone.up(nodes=args.nodes, security=security)
        print("\n".join(standalone.client_lines(state)))
        print(f"logs: {state['logs']}  (stop with: harness kafka down)")
        return 0
    if args.security_protocol != "PLAINTEXT" or args.sasl_mechanism or args.user or args.password_env:
        raise InputError(f"harness kafka {args.action}: the security options are for `harness kafka up`")
    if args.action == "down":
        print("stopped" if standalone.down() else "no standalone broker running")
        return 0
    state = standalone.status()
    if not state:
        print("no standalone broker running")
        return 1
    print(f"running: bootstrap.servers={state['bootstrap']} nodes={state['nodes']} pid={state['pid']}")
    print("\n".join(standalone.client_lines(state)))
    return 0


def _cmd_emulator(args) -> int:
    from harness.emulator.options import run

    return run(args)  # the same options and checks as `python -m harness.emulator`


def _cmd_bench(args) -> int:
    """One bench or `all`, one table at the end; --json writes one bench's dict (one object keyed by bench for
    `all`). Exit 0 when every bench ran (a missed goal shows in the table), 1 when one raised. `verdicts
    SCENARIO` (harness.bench.verdicts) has options of its own: exit 0 when its goal is met, 1 when not."""
    from harness.console import Console

    verdict_options = {"SCENARIO": args.scenario, "--runs": args.runs, "--busy-cores": args.busy_cores,
                       "--cold": args.cold, "--expect": args.expect, "--set": args.set, "--out": args.out,
                       "--replace": args.replace, "--all": args.all, "--backend": args.backend, "--kind": args.kind,
                       "--only": args.only, "--resume": args.resume}
    if args.what != "verdicts":
        given = [name for name, value in verdict_options.items() if value]
        if given:
            raise InputError(f"{', '.join(given)}: only for `harness bench verdicts SCENARIO`, not for "
                             f"`harness bench {args.what}`")
        from harness.bench import main as bench_main

        return bench_main(args.what, args.json, args.quick, Console())
    from harness.bench import verdicts

    if args.all:
        return _cmd_catalogue(args)
    catalogue_only = [flag for flag, value in (("--backend", args.backend), ("--kind", args.kind),
                                               ("--only", args.only), ("--resume", args.resume)) if value]
    if catalogue_only:
        raise InputError(f"{', '.join(catalogue_only)}: only with `harness bench verdicts --all` (the catalogue)")
    if not args.scenario:
        raise InputError("harness bench verdicts: name the scenario (a name from scenarios/ or a .toml), e.g. "
                         "`harness bench verdicts steady --runs 5 --busy-cores 1`")
    if args.json or args.quick:
        raise InputError(f"{'--json' if args.json else '--quick'}: not for `harness bench verdicts` (it writes "
                         "bench.json and bench.md into its directory, --out)")
    _out_writable(args.out)
    return verdicts.main(args.scenario, args.set, runs=verdicts.DEFAULT_RUNS if args.runs is None else args.runs,
                         busy_cores=verdicts.DEFAULT_BUSY_CORES if args.busy_cores is None else args.busy_cores,
                         cold=args.cold, expect=args.expect, out=Path(args.out) if args.out else None,
                         replace=args.replace, console=Console())


def _cmd_catalogue(args) -> int:
    """`harness bench verdicts --all`: every shipped scenario (harness.bench.catalogue); options of one
    scenario's bench are refused with it."""
    from harness.bench import catalogue
    from harness.console import Console

    given = [flag for flag, value in (("SCENARIO", args.scenario), ("--busy-cores", args.busy_cores),
                                      ("--cold", args.cold), ("--expect", args.expect), ("--set", args.set),
                                      ("--json", args.json), ("--quick", args.quick)) if value]
    if given:
        raise InputError(f"{', '.join(given)}: not with --all (the catalogue runs every shipped scenario as "
                         "shipped, on the machine as it is, expecting each one's verdict; pick a part with "
                         "--backend, --kind or --only)")
    if args.resume and args.replace:
        raise InputError("--resume and --replace: one or the other (--replace deletes the catalogue --resume "
                         "would continue)")
    if not args.resume:
        _out_writable(args.out)
    only = [n.strip() for n in (args.only or "").split(",") if n.strip()] or None
    return catalogue.main(runs=1 if args.runs is None else args.runs, backend=args.backend, kind=args.kind,
                          only=only, out=Path(args.out) if args.out else None, resume=args.resume,
                          replace=args.replace, console=Console())


def _cmd_report(args) -> int:
    """Rebuild a run's report.md and report.html from its run directory (a sweep's sweep.md from sweep.json)."""
    run_dir = Path(args.run_dir)
    for name in ("sweep.json", "result.json"):
        path = run_dir / name
        if not path.is_file():
            continue
        data = _result_file(path)
        if name == "sweep.json":
            from harness.commands.sweep import write_sweep_reports

            write_sweep_reports(run_dir, data)
            for out in (run_dir / "sweep.md", run_dir / "sweep.html"):
                if out.exists():
                    print(out)
            return 0
        from harness.reports.report import write_reports

        outs = (run_dir / "report.md", run_dir / "report.html")
        before = {out: _stamp(out) for out in outs}
        problems = write_reports(data, run_dir)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        for out in outs:  # only what was rebuilt now: an older file left in place is not listed as new
            if out.exists() and _stamp(out) != before[out]:
                print(f"{out} ({out.stat().st_size / 1e6:.2f} MB)" if out.suffix == ".html" else out)
        return 1 if problems else 0
    raise InputError(f"{run_dir}: neither result.json nor sweep.json there (not a run or sweep directory)")


def _result_file(path: Path) -> dict:
    """result.json (a run's, harness.records.result.RunResult) or sweep.json read for a rebuild; empty, torn or not a
    result: InputError naming the file and the cause (nothing is rebuilt from it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not readable: {exc}") from None
    if not text.strip():
        raise InputError(f"{path}: empty (a run stopped while writing it, or a full disk?): run `harness check "
                         f"{path.parent}` to judge the run again and rewrite it")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path}: not readable JSON ({exc}): run `harness check {path.parent}` to rewrite it") from None
    if path.name == "result.json":
        from pydantic import ValidationError

        from harness.records.result import RunResult

        try:
            RunResult.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "(the whole file)"
            raise InputError(f"{path}: not a run's result ({exc.error_count()} problem(s), the first at {where}: "
                             f"{first['msg']}): run `harness check {path.parent}` to rewrite it") from None
    elif not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise InputError(f"{path}: not a sweep's summary (an object with its `runs`)")
    return data


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_ino


def _cmd_check(args) -> int:
    """Judge a finished run again from its directory: the checker over every ack log under producers/ (machines'
    subdirectories gathered from other hosts included), clock skew per machine, then result.json, junit.xml,
    summary.md and the reports rewritten; with --baseline, harness compare's thresholds against that run applied
    again as the `baseline` check. Exit 0 pass, 1 fail, 2 not a run directory, 3 unjudged."""
    from harness.config import validate_resolved
    from harness.runner import measure_and_judge, record
    from harness.soak.checks import baseline_spec

    run_dir = Path(args.run_dir).resolve()
    state_path, scenario_path = run_dir / "run_state.json", run_dir / "scenario.json"
    for path in (scenario_path, state_path):
        if not path.is_file():
            raise InputError(f"{run_dir}: no {path.name} there (not a run directory `harness run` wrote)")
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        resolved = json.loads(scenario_path.read_text(encoding="utf-8"))["resolved"]
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"{run_dir}: run_state.json or scenario.json not readable: {exc}") from None
    if args.skew_threshold_ms is not None and args.skew_threshold_ms < 0:
        raise InputError(f"--skew-threshold-ms {args.skew_threshold_ms}: must be 0 or more")
    scenario = validate_resolved(resolved, str(scenario_path))
    if args.fail_on is not None and args.baseline is None:
        raise InputError("--fail-on needs --baseline RUN_DIR")
    baseline = baseline_spec(Path(args.baseline) if args.baseline else None, args.fail_on, scenario.soak)
    try:
        judged = measure_and_judge(scenario, run_dir, state, args.skew_threshold_ms)
        result, problems = record(judged, run_dir, baseline)
    except OSError as exc:  # a full disk: the cause said; harness.files.atomic leaves no partial or empty file
        print(f"error: writing the results in {run_dir} failed: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    print(_check_summary(result, run_dir))
    return exit_code(result["verdict"])


def _check_summary(result: dict, run_dir: Path) -> str:
    lines = [f"{run_dir}: verdict {result['verdict'].upper()}"
             + (f" ({result.get('unjudged_reason')})" if result.get("unjudged_reason") else "")]
    for c in result.get("checks") or []:
        if counts_against(c):
            lines.append(f"  {'failed' if status_of(c) == 'fail' else status_of(c)} {c['name']}: {c['detail']}")
    for item in result.get("unreadable") or []:
        lines.append(f"  unreadable {item['file']}: {item['detail']}")
    clock = (result.get("producers") or {}).get("clocks")
    if clock:
        lines.append(f"clocks (threshold {clock['threshold_ms']:g} ms): {clock['note']}")
        for m in clock["machines"]:
            off = ("not measured" if m["offset_ms"] is None else
                   f"offset {m['offset_ms']:+.1f} ms ± {m['uncertainty_ms']:.1f} ms ({m['samples']} exchanges, "
                   f"drift {m['drift_ms']:+.1f} ms)")
            lines.append(f"  {m['machine']} (producers {m['producers']}, {m['directory']}): {off}"
                         f"{', corrected' if m['corrected'] else ''}; negative latencies {m['negative_latencies']}"
                         f" as sent, {m['negative_after_correction']} after correction")
        if not clock["latency_judged"]:
            lines.append(f"  latency not judged: {clock['latency_not_judged_reason']}")
    lines.append(f"written: result.json, junit.xml, summary.md, report.md, report.html in {run_dir}")
    return "\n".join(lines)


def _cmd_compare(args) -> int:
    from harness.files import atomic
    from harness.reports.compare import compare, compare_markdown
    from harness.reports.compare_html import compare_html

    summary = compare([Path(p) for p in args.runs], Path(args.baseline) if args.baseline else None,
                      args.fail_on or "")
    text = compare_markdown(summary)
    print(text, end="")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        atomic.write_json(out / "compare.json", summary)
        atomic.write_text(out / "compare.md", text)
        atomic.write_text(out / "compare.html", compare_html(summary, _sweep_of(args.runs)))
        print(f"written: {out}/compare.html, compare.md, compare.json", file=sys.stderr)
    return 1 if summary["failures"] else 0


def _sweep_of(paths: list[str]) -> dict | None:
    """The sweep summary when the runs compared are exactly one sweep's directory (its swept axis is drawn)."""
    if len(paths) != 1 or not (Path(paths[0]) / "sweep.json").is_file():
        return None
    try:
        return json.loads((Path(paths[0]) / "sweep.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _replace_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--replace", action="store_true", help="--out may be an earlier run's directory: its contents "
                   "are deleted first (only a directory the harness wrote; a non-empty --out is refused otherwise)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description=__doc__.splitlines()[0])
    p.add_argument("--version", action=VersionAction,
                   help="the installed version, where it runs from, and the Python")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a scenario and write its run directory")
    r.add_argument("scenario", help="a name from scenarios/ or a path to a .toml file")
    r.add_argument("--set", action="append", default=[], metavar="dotted.key=value",
                   help="override a scenario field (value parsed as TOML), repeatable")
    r.add_argument("--out", help="run directory (default runs/<UTC timestamp>-<scenario>)")
    r.add_argument("--quiet", action="store_true", help="no live progress (default when not a terminal or CI)")
    r.add_argument("--repeat", type=int, metavar="N", help="run it N times (each sweep combination N times) into "
                   "r1..rN: harness compare takes the spread across them as the noise")
    _replace_option(r)
    r.set_defaults(func=_cmd_run)

    rh = sub.add_parser("rehearse", help="roll changes (code, settings, Spark version) out on a base scenario's "
                        "live checkpoint, one run each, and say which survived (rehearsal.md / .html)")
    rh.add_argument("rehearsal", help="a name from scenarios/rehearsals/ or a path to a rehearsal .toml file")
    rh.add_argument("--only", action="append", metavar="NAME", help="run only this change (repeatable)")
    rh.add_argument("--out", help="rehearsal directory (default runs/<UTC timestamp>-<name>-rehearsal)")
    rh.add_argument("--quiet", action="store_true", help="no live progress (default when not a terminal or CI)")
    _replace_option(rh)
    rh.set_defaults(func=_cmd_rehearse)

    sh = sub.add_parser("shrink", help="the smallest part of a failed run's fault schedule that still fails it "
                        "(delta debugging over re-runs): minimal.toml to run again and attach to a bug report")
    sh.add_argument("run_dir", help="the directory of a failed run that injected faults (a run, a soak)")
    sh.add_argument("--check", action="append", metavar="NAME", help="the failing check a re-run must fail for "
                    "the failure to count as the same (repeatable; default: any of the run's failing checks)")
    sh.add_argument("--max-runs", type=int, default=16, metavar="N", help="at most this many re-runs (default 16)")
    sh.add_argument("--max-minutes", type=float, default=90.0, metavar="M", help="start no re-run after this "
                    "many minutes (default 90)")
    sh.add_argument("--out", help="shrink directory (default runs/<UTC timestamp>-<scenario>-shrink)")
    sh.add_argument("--quiet", action="store_true", help="no live progress (default when not a terminal or CI)")
    _replace_option(sh)
    sh.set_defaults(func=_cmd_shrink)

    from harness.commands import capacity_defaults as cap

    cp = sub.add_parser("capacity", help="the highest constant rate the query sustains (ramp, then bisect), "
                        "and what bounded it")
    cp.add_argument("scenario", help="a name from scenarios/ or a path to a .toml file")
    cp.add_argument("--set", action="append", default=[], metavar="dotted.key=value",
                    help="override a scenario field for every trial (value parsed as TOML), repeatable")
    cp.add_argument("--out", help="capacity directory (default runs/<UTC timestamp>-<scenario>-capacity)")
    cp.add_argument("--latency-p99-ms", type=float, help="latency limit per trial (default: the scenario's "
                    f"checks.latency_p99_ms, else {cap.DEFAULT_LATENCY_P99_MS:g} or {cap.LATENCY_INTERVALS:g} "
                    "trigger intervals, the larger)")
    cp.add_argument("--trial-s", type=float, default=cap.DEFAULT_TRIAL_S,
                    help=f"measured window of each trial, after its warm-up (default {cap.DEFAULT_TRIAL_S:g})")
    cp.add_argument("--max-trials", type=int, default=cap.DEFAULT_MAX_TRIALS,
                    help=f"trials in all, ramp and bisection (default {cap.DEFAULT_MAX_TRIALS})")
    cp.add_argument("--start-eps", type=float, help="first rate (default: the scenario's constant rate, else "
                    f"{cap.DEFAULT_START_EPS:,})")
    cp.add_argument("--quiet", action="store_true", help="no live progress (default when not a terminal or CI)")
    _replace_option(cp)
    cp.set_defaults(func=_cmd_capacity)

    oc = sub.add_parser("outage-cap", help="the per-trigger cap (maxOffsetsPerTrigger / maxEventsPerTrigger) a "
                        "query should restart with after its scenario's outage: the largest that neither fails "
                        "(out of memory, a crash-loop) nor drains too slowly")
    oc.add_argument("scenario", help="a name from scenarios/ or a path to a .toml file with one outage fault")
    oc.add_argument("--set", action="append", default=[], metavar="dotted.key=value",
                    help="override a scenario field for every trial (value parsed as TOML), repeatable")
    oc.add_argument("--out", help="search directory (default runs/<UTC timestamp>-<scenario>-outage-cap)")
    oc.add_argument("--max-trials", type=int, default=4, help="trials in all (default 4, at most 10)")
    oc.add_argument("--drain-within-s", type=float, help="seconds after the restart the backlog must drain in "
                    "(the topic's retention; default: the outage's drain_within_s)")
    oc.add_argument("--quiet", action="store_true", help="no live progress (default when not a terminal or CI)")
    _replace_option(oc)
    oc.set_defaults(func=_cmd_outage_cap)

    sk = sub.add_parser("soak", help="one long run: traffic shapes cycling, faults on a seeded plan, checks "
                        "evaluated while it runs, resources and leaks, junit.xml and a CI summary")
    sk.add_argument("scenario", nargs="?", default="soak", help="a name from scenarios/ or a .toml (default: soak)")
    sk.add_argument("--duration", help="traffic duration, e.g. 2h, 10m, 90s (default: the scenario's)")
    sk.add_argument("--seed", type=int, help="the seed (traffic and the random fault plan; default: the scenario's)")
    sk.add_argument("--fail-fast", action="store_true", help="stop at the first failed live check")
    sk.add_argument("--replay", metavar="RUN_DIR", help="run a stored soak again exactly (its scenario.json)")
    sk.add_argument("--baseline", metavar="RUN_DIR", help="fail on harness compare's thresholds against this run")
    sk.add_argument("--fail-on", metavar="FIGURE=+N%,...", help="the thresholds for --baseline (default: the "
                    "scenario's soak.baseline_fail_on)")
    sk.add_argument("--set", action="append", default=[], metavar="dotted.key=value",
                    help="override a scenario field (value parsed as TOML), repeatable")
    sk.add_argument("--out", help="run directory (default runs/<UTC timestamp>-<scenario>)")
    sk.add_argument("--quiet", action="store_true", help="no live progress (default when not a terminal or CI)")
    _replace_option(sk)
    sk.set_defaults(func=_cmd_soak)

    ls = sub.add_parser("list", help="the shipped scenarios: backend, protocol, kind, traffic, faults, description")
    ls.add_argument("word", nargs="?", help="only scenarios whose name or description holds this word (any case)")
    ls.add_argument("--backend", help="only this backend's scenarios (kafka, eventhubs)")
    ls.add_argument("--kind", help="only this kind (load, faults, sweep, soak)")
    ls.add_argument("--json", action="store_true", help="the rows as a JSON list, for scripts")
    ls.set_defaults(func=_cmd_list)

    from harness.commands.init import DEFAULT_INSTALL, DEFAULT_QUERY

    ini = sub.add_parser("init", help="the harness in your own repository: a starter scenario for your query, a "
                         "pytest test and GitHub Actions workflows (a pull-request check and a nightly run)")
    ini.add_argument("directory", nargs="?", default=".", help="the repository's root (default: here)")
    ini.add_argument("--query", default=DEFAULT_QUERY, metavar="PACKAGE.MODULE:FUNCTION",
                     help=f"your query function (default {DEFAULT_QUERY}; a starter is written if the module "
                          "does not exist)")
    ini.add_argument("--name", help="the scenario's name (default: the module's name)")
    ini.add_argument("--install", default=DEFAULT_INSTALL, metavar="PIP_SPEC",
                     help="what the workflows pip-install the harness from: a name, a wheel or a git URL "
                          f"(default {DEFAULT_INSTALL})")
    ini.add_argument("--force", action="store_true", help="replace files that exist")
    ini.set_defaults(func=_cmd_init)

    v = sub.add_parser("validate", help="check a scenario file without running it")
    v.add_argument("scenario")
    v.add_argument("--set", action="append", default=[])
    v.add_argument("--show", action="store_true", help="print the resolved scenario")
    v.set_defaults(func=_cmd_validate)

    rp = sub.add_parser("report", help="rebuild a run's report.md and report.html (a sweep's sweep.md) from its results")
    rp.add_argument("run_dir")
    rp.set_defaults(func=_cmd_report)

    ck = sub.add_parser("check", help="judge a finished run again from its directory (ack logs gathered from "
                        "several producer machines included, clock skew measured) and rewrite its results")
    ck.add_argument("run_dir")
    ck.add_argument("--skew-threshold-ms", type=float, default=None, help="correct a producer machine's times by "
                    "its measured clock offset beyond this (default 10)")
    ck.add_argument("--baseline", default=None, help="a run directory: harness compare's thresholds against it "
                    "become the `baseline` check again")
    ck.add_argument("--fail-on", default=None, help="the thresholds, e.g. p99=+20%%,process_rps=-10%% (default: "
                    "the scenario's soak.baseline_fail_on, p99=+50%%,process_rps=-20%%)")
    ck.set_defaults(func=_cmd_check)

    c = sub.add_parser("compare", help="runs side by side against a baseline: deltas, better/worse/same")
    c.add_argument("runs", nargs="+", help="run directories (a sweep's directory stands for its runs)")
    c.add_argument("--baseline", help="compare against this run (default: the first run given)")
    c.add_argument("--fail-on", metavar="FIGURE=+N%,...", help="exit 1 when a figure moves past a threshold "
                   "against the baseline, e.g. p99=+20%%,process_rps=-10%%")
    c.add_argument("--out", help="also write compare.html, compare.json and compare.md here")
    c.set_defaults(func=_cmd_compare)

    s = sub.add_parser("setup", help="fetch the JVM artifacts (Kafka broker, Spark's Kafka source) into the cache "
                       "and make what a first run would make on its way (the JVMs' class archives, the Kafka "
                       "storage tool's output) by starting steady's broker and query once; nothing already there")
    s.add_argument("--verbose", action="store_true")
    s.add_argument("--pyspark", action="append", metavar="LINE", choices=PYSPARK_LINES, help=(
        "also make this older PySpark line ready for scenarios with spark.pyspark (its virtualenv and Spark's "
        f"Kafka source for it); one of {', '.join(PYSPARK_LINES)}, repeatable"))
    s.set_defaults(func=_cmd_setup)

    k = sub.add_parser("kafka", help="a standalone embedded broker for manual work")
    k.add_argument("action", choices=["up", "down", "status"])
    k.add_argument("--nodes", type=int, default=1)
    k.add_argument("--security-protocol", default="PLAINTEXT", type=str.upper,
                   choices=["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"],
                   help="the client listener's: SASL_SSL gets a certificate the harness makes (its CA is printed as "
                        "ssl.ca.location)")
    k.add_argument("--sasl-mechanism", type=str.upper, choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    k.add_argument("--user", help="the broker's one (super) user, with --security-protocol SASL_*")
    k.add_argument("--password-env", metavar="VAR",
                   help="the environment variable holding --user's password (never given on the command line)")
    k.set_defaults(func=_cmd_kafka)

    b = sub.add_parser("bench", help="benchmarks, measured side by side in one run")
    b.add_argument("what", choices=["producers", "footprint", "kafka-query", "emulator", "eh-source", "eh-producers",
                                    "checker", "startup", "rtm", "kafka-hostile", "all", "verdicts"],
                   help="one benchmark, all of them in this order, or verdicts SCENARIO (not part of all): whether "
                        "a scenario's verdict holds, quiet, with cores busy and cold")
    b.add_argument("scenario", nargs="?", help="verdicts: a name from scenarios/ or a path to a .toml file")
    b.add_argument("--json", help="also write the figures to this file (atomically): one bench's object, or one "
                                  "object keyed by bench name for all")
    b.add_argument("--quick", action="store_true", help="shorter windows / fewer events, for a smoke run")
    b.add_argument("--runs", type=int, metavar="N", help="verdicts: runs in each mode (default 5)")
    b.add_argument("--busy-cores", type=int, metavar="K", help="verdicts: cores another process keeps busy in the "
                   "busy mode's runs (default 1)")
    b.add_argument("--cold", action="store_true", help="verdicts: also a cold mode, the JVMs' class archives "
                   "deleted before each of its runs, as a new virtualenv has none")
    b.add_argument("--expect", choices=["pass", "fail"], help="verdicts: the verdict every mode must agree on for "
                   "exit 0 (pass: busy runs may be unjudged (busy); fail: every run fails `sustained`)")
    b.add_argument("--set", action="append", default=[], metavar="dotted.key=value",
                   help="verdicts: override a scenario field for every run (value parsed as TOML), repeatable")
    b.add_argument("--out", help="verdicts: the bench's directory (default runs/<UTC timestamp>-<scenario>-verdicts;"
                                 " with --all runs/<UTC timestamp>-catalogue)")
    b.add_argument("--all", action="store_true", help="verdicts: the catalogue, every shipped scenario --runs N "
                   "times (default 1), each at its expected verdict, with its margins")
    b.add_argument("--backend", help="verdicts --all: only this backend's scenarios (kafka, eventhubs)")
    b.add_argument("--kind", help="verdicts --all: only this kind (load, faults, sweep)")
    b.add_argument("--only", metavar="NAME,NAME", help="verdicts --all: only these scenarios")
    b.add_argument("--resume", action="store_true", help="verdicts --all: run into the catalogue at --out what it "
                   "lacks for the scenarios picked (a part at a time, or after an interruption)")
    _replace_option(b)
    b.set_defaults(func=_cmd_bench)

    e = sub.add_parser("emulator", help="the Event Hubs emulator")
    esub = e.add_subparsers(dest="emulator_command", required=True)
    es = esub.add_parser("serve", help="serve in the foreground until Ctrl-C/SIGTERM")
    from harness.emulator.options import add_arguments as add_emulator_arguments

    add_emulator_arguments(es)
    es.set_defaults(func=_cmd_emulator)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        from harness.secrets import scrub

        print(f"error: {scrub(str(exc))}", file=sys.stderr)  # a message may quote a value: no secret in it
        return EXIT_BAD_INPUT
    except SetupError as exc:  # Maven / Maven Central unreachable, a pom that does not resolve
        print(f"set-up failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `harness list | head`
        sys.stderr.close()
        return 0
