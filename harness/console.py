"""Terminal output: live progress (rich) for people, a few plain lines when quiet (CI, pipes); every line also
kept, as plain text, in the run directory's console.log."""
from __future__ import annotations

import io
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console as RichConsole
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.check import status_of
from harness.secrets import scrub
from harness.text.wording import PROCESSING_RATE, footprint_line, machine_line, warmup_line


# lines held for a run directory not named yet: a command that never names one (bench, a server) keeps a bounded tail
HELD_MAX_CHARS = 1_000_000


def _plain_console(file, width: int) -> RichConsole:
    """The console.log side: no colour codes, the terminal's width, so its lines are the lines the user saw."""
    return RichConsole(file=file, color_system=None, width=width, highlight=False, soft_wrap=True,
                       force_terminal=False, force_jupyter=False, emoji=False)


def is_quiet() -> bool:
    return bool(os.environ.get("CI")) or not sys.stdout.isatty()


def _deciding(checks: list[dict]) -> str:
    """The checks that kept a run from passing, by status, for the console's last line ("" when none)."""
    by_status: dict[str, list[str]] = {}
    for check in checks:
        status = status_of(check)
        if status in ("fail", "unknown", "unjudged"):
            by_status.setdefault(status, []).append(check["name"])
    parts = [(", ".join(names) if status == "fail" else f"{status}: {', '.join(names)}")
             for status, names in sorted(by_status.items(), key=lambda kv: ("fail", "unknown", "unjudged").index(
                 kv[0]))]
    return f" ({'; '.join(parts)})" if parts else ""


class _Bar:
    def __init__(self, progress: Progress | None, task, console: "Console"):
        self.progress, self.task, self.console = progress, task, console
        self._last_print = 0.0

    def update(self, completed: float, text: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=completed, info=text)
        elif time.monotonic() - self._last_print > 15:
            self._last_print = time.monotonic()
            self.console.info(f"  {completed:.0f}s  {text}")


class Console:
    """What the harness tells the user. Every line also goes, as plain text without colour, to the run's own
    `console.log` (`log_to`): a run directory read later, or a CI artifact, shows what the terminal showed.
    Lines printed before the run directory exists are held and written when it is named."""

    def __init__(self, quiet: bool | None = None):
        self.quiet = is_quiet() if quiet is None else quiet
        self.rich = RichConsole(highlight=False, soft_wrap=True)
        self._plain = _plain_console(io.StringIO(), self.rich.width)

    def log_to(self, path: Path) -> None:
        """From now on (and the lines held since the last log ended) also into `path`."""
        held = self._plain.file.getvalue() if isinstance(self._plain.file, io.StringIO) else ""
        fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by end_log
        fh.write(held)
        fh.flush()
        self._plain = _plain_console(fh, self.rich.width)

    def end_log(self) -> None:
        """The run's console.log complete: closed; the next lines are held for the next run's."""
        if not isinstance(self._plain.file, io.StringIO):
            self._plain.file.close()
        self._plain = _plain_console(io.StringIO(), self.rich.width)

    def _print(self, obj, markup: bool = True) -> None:
        if isinstance(obj, str):
            obj = scrub(obj)  # a line may quote a setting or an error that echoes one: no secret (harness.secrets)
        self.rich.print(obj, markup=markup)
        self._plain.print(obj, markup=markup)
        self._plain.file.flush()
        if isinstance(self._plain.file, io.StringIO) and self._plain.file.tell() > HELD_MAX_CHARS:
            self._plain = _plain_console(io.StringIO(), self.rich.width)  # no run is coming to take them

    def info(self, text: str) -> None:
        self._print(text, markup=False)

    def warn(self, text: str) -> None:
        self._print(f"[yellow]warning:[/yellow] {text}")

    @contextmanager
    def step(self, what: str):
        t = time.monotonic()
        if self.quiet:
            self.info(f"{what} ...")
            yield
        else:
            with self.rich.status(what):
                yield
        self.info(f"{what}: done in {time.monotonic() - t:.1f}s")

    @contextmanager
    def progress(self, what: str, total: float):
        if self.quiet:
            self.info(f"{what}: {total:.0f}s")
            yield _Bar(None, None, self)
            return
        columns = (TextColumn(f"[bold]{what}"), BarColumn(), TimeElapsedColumn(), TextColumn("{task.fields[info]}"))
        with Progress(*columns, console=self.rich, transient=False) as progress:
            task = progress.add_task(what, total=total, info="")
            yield _Bar(progress, task, self)

    def summary(self, result: dict, run_dir) -> None:
        verdict = result["verdict"]
        colour = {"pass": "green", "fail": "red"}.get(verdict, "yellow")
        c, lat, thr = result["counts"], result["latency_ms"], result["throughput"]
        table = Table(title=f"{result['scenario']} on {result['backend']}: [{colour}]{verdict.upper()}[/{colour}]",
                      show_header=True, header_style="bold")
        table.add_column("check")
        table.add_column("ok")
        table.add_column("detail", overflow="fold")
        for check in result["checks"]:
            mark = {"pass": "[green]yes[/green]", "fail": "[red]NO[/red]", "unknown": "[yellow]unknown[/yellow]",
                    "unjudged": "[yellow]unjudged[/yellow]",
                    "not required": "[dim]not required[/dim]"}[status_of(check)]
            table.add_row(check["name"], mark, scrub(check["detail"]))
        self._print(table)
        if result.get("unjudged_reason"):
            self.warn(f"unjudged: {result['unjudged_reason']}")
        self.info(f"produced {c['produced']:,}  acked {c['acked']:,}  delivered {c['delivered_unique']:,}  "
                  f"duplicates {c['duplicates']:,}  lost {c['lost']:,}  expected lost {c['expected_lost']:,}"
                  + (f"  unread {c['unread']:,}" if c.get("unread") else "")
                  + (f"  (duplicates expected {c['expected_duplicates']:,}, unexpected "
                     f"{c['duplicates'] - c['expected_duplicates']:,})" if c.get("expected_duplicates") is not None
                     else ""))
        if result.get("faults"):
            self.info("faults: " + ", ".join(f"{f['kind']}#{f['n']}" + (" (error)" if f["errors"] else "")
                                             for f in result["faults"]))
        q = result.get("query") or {}
        if q.get("kills") or q.get("error"):
            self.info(f"query: {q.get('name')} killed {q.get('kills', 0)}x, restarted {q.get('restarts', 0)}x"
                      + (f", ended with {q.get('error_class') or 'an error'}" if q.get("error") else ""))
        self.info(f"throughput: produce {thr['produce_eps']:,.0f} ev/s (target {thr['target_eps']:,.0f}), "
                  f"Spark's {PROCESSING_RATE} {thr['process_rps']:,.0f} rows/s (per second of batch time, not "
                  f"wall time) over {result['batches']} batches")
        steady, start = result.get("steady") or {}, result.get("startup") or {}
        self.info("end-to-end latency ms" + (f" (steady from {steady['from_s']:.0f} s)" if steady else "") + ": "
                  + "  ".join(f"{k} {v:,.1f}" for k, v in lat.items()))
        warm = result.get("warmup") or {}
        if warm:
            (self.info if warm.get("ended") in (None, "caught_up") else self.warn)(warmup_line(warm))
        if start.get("first_data_batch_from_run_start_s") is not None:
            self.info(f"start-up: first data batch {start['first_data_batch_from_run_start_s']:.1f} s after the run "
                      f"started; cold part p99 {(start.get('cold_latency_ms') or {}).get('p99', 0):,.0f} ms")
        foot = result.get("footprint") or {}
        if foot:  # the measurement's quality: what the harness took from the system under test's cores
            (self.info if foot.get("ok") else self.warn)(footprint_line(foot))
        machine = result.get("machine") or {}
        if machine:  # ... and what other processes took from it meanwhile
            (self.warn if machine.get("busy") else self.info)(machine_line(machine))
        for r in result.get("recovery") or []:
            self.info(f"recovery {r['kind']}#{r['n']}: " + (f"back in {r['time_to_recover_s']:.1f} s" if r["recovered"]
                                                            else "lag not back in its band")
                      + (f", first data batch after {r['first_data_batch_after_s']:.1f} s"
                         if r.get("first_data_batch_after_s") is not None else "")
                      + (f", backlog peak {r['backlog_peak_events']:,.0f}" if r.get("backlog_peak_events") else ""))
        for o in result.get("outages") or []:  # the restart after an outage (harness.analysis.outages)
            first = o.get("first_batch")
            self.info(f"outage #{o['n']}: backlog {o['backlog_events']:,}, aged out unread {o['expired_events']:,}; "
                      + (f"first batch {first['rows']:,} rows in {first['duration_ms']:,} ms" if first else
                         "no batch after the restart")
                      + f"; {o['crashes']} failures" + (", given up on (crash-loop)" if o.get("gave_up") else "")
                      + (f"; drained {o['drain_s']:.1f} s after the restart" if o.get("drain_s") is not None else ""))
        html = run_dir / "report.html"
        size = f" ({html.stat().st_size / 1e6:.2f} MB)" if html.exists() else ""
        self.info(f"{result['scenario']} on {result['backend']}: {verdict.upper()}{_deciding(result['checks'])}; "
                  f"report: {run_dir}/report.html{size}, report.md   result: {run_dir}/result.json")
