"""The scenario catalogue in README.md, generated from the scenario files' own descriptions, so the table can
never list a scenario that is not shipped or miss one that is: `python -m harness.reports.catalogue README.md` rewrites
the table between its two markers, and tests/unit/test_docs_commands.py fails when they differ.

One line a scenario: the description's first sentence (up to its first ". " or "; "), the backend, whether it
is a sweep or a soak, which change what a run of it looks like, and how many minutes a run of it took on the
project's 2-core machine (set-up, warm-up, traffic, faults, drain and judging; a sweep all its runs): measured by
`harness bench verdicts --all` and kept in docs/catalogue-measured.json, which `--minutes CATALOGUE.json ...`
rewrites from one or more catalogues (the median of their runs), so the column says what was measured, and when.

The same catalogues give docs/checks.md its measured table (`measured_table`): per scenario whose keeping up is
judged, what its last catalogue run offered and processed, its lag slope, batch median, warm-up, latency, first
data batch and footprint, read from that run's result.json and kept in the same file, so a page's figures and
the command that measured them cannot drift apart (`python -m harness.reports.catalogue docs/checks.md`).
"""
from __future__ import annotations

import json
import re
import statistics
import sys
import tomllib
import time
from pathlib import Path

from harness.files.paths import REPO, SCENARIOS_DIR

BEGIN, END = "<!-- scenarios:begin (python -m harness.reports.catalogue README.md) -->", "<!-- scenarios:end -->"
FIGURES_BEGIN = "<!-- measured:begin (python -m harness.reports.catalogue docs/checks.md) -->"
FIGURES_END = "<!-- measured:end -->"
MAX_CHARS = 170
MINUTES = REPO / "docs" / "catalogue-measured.json"
COMMAND = "harness bench verdicts --all"


def first_sentence(description: str) -> str:
    text = " ".join(description.split())
    cut = min((i for i in (text.find(". "), text.find("; ")) if i > 0), default=len(text))
    text = text[:cut].rstrip(".")
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS].rsplit(" ", 1)[0] + " …"
    return text.replace("|", "\\|")


def rows(directory: Path = SCENARIOS_DIR) -> list[tuple[str, str, str]]:
    """(name, backend and kind, one line) for every scenario file, by name."""
    out = []
    for path in sorted(directory.glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        kind = (data.get("backend") or {}).get("kind", "kafka")
        protocol = (data.get("backend") or {}).get("protocol")  # Event Hubs through its Kafka endpoint
        kind += f" ({protocol})" if protocol and protocol != "amqp" else ""
        extra = " (sweep)" if data.get("sweep") else " (soak)" if data.get("soak") else ""
        out.append((path.stem, kind + extra, first_sentence(str(data.get("description", "")))))
    return out


def minutes(path: Path = MINUTES) -> dict:
    """{"measured": ..., "minutes": {scenario: minutes}, "figures": {scenario: {...}}} as last measured; empty
    when never measured."""
    empty = {"measured": None, "minutes": {}, "figures": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return empty
    return {**empty, **data} if isinstance(data, dict) and isinstance(data.get("minutes"), dict) else empty


def _catalogue_runs(catalogues: list[Path]):
    """(catalogue file, run) for every run of the catalogues, in the order given."""
    for cat_path in catalogues:
        cat = json.loads(Path(cat_path).read_text(encoding="utf-8"))
        for r in cat.get("runs") or []:
            yield Path(cat_path), r


def _whole(x) -> int | None:
    return None if x is None else round(x)


def run_figures(cat_path: Path, run: dict) -> dict | None:
    """One catalogue run's row of the measured table, from its result.json (found beside the catalogue, as
    `harness bench verdicts` lays it out, so a moved catalogue still reads); None when its keeping up was not
    judged (not required: a query that must fail, a backfill, faults that fill the traffic) or the run left no
    result."""
    run_dir = cat_path.parent / run["scenario"] / f"{int(run.get('round') or 1):02d}"
    try:
        result = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    sustain = result.get("sustain") or {}
    lag = sustain.get("lag") or {}
    status = {c["name"]: c["status"] for c in result.get("checks") or []}
    judged = status.get("sustained") in ("pass", "fail")
    if not judged or not sustain.get("offered_eps") or lag.get("slope_eps") is None:
        return None
    latency, startup = result.get("latency_ms") or {}, result.get("startup") or {}
    return {"verdict": result.get("verdict"), "sustained": status.get("sustained", "-"),
            "offered_eps": _whole(sustain["offered_eps"]), "processed_eps": _whole(sustain.get("processed_eps")),
            "lag_slope_eps": _whole(lag["slope_eps"]), "lag_slope_2se_eps": _whole(2 * (lag.get("slope_se_eps") or 0)),
            "batch_p50_ms": sustain.get("batch_p50_ms"), "warmup_s": (result.get("warmup") or {}).get("s"),
            "p50_ms": latency.get("p50"), "p99_ms": latency.get("p99"),
            "first_data_batch_s": startup.get("first_data_batch_from_run_start_s"),
            "footprint": (result.get("footprint") or {}).get("ratio")}


def measured_minutes(catalogues: list[Path], path: Path = MINUTES) -> dict:
    """docs/scenario-minutes.json updated from catalogues' runs (harness bench verdicts --all): per scenario the
    median of its runs' minutes; scenarios they did not run keep what was there."""
    data = minutes(path)
    walls: dict[str, list[float]] = {}
    figures: dict[str, dict] = {}
    for cat_path, r in _catalogue_runs(catalogues):
        if isinstance(r.get("wall_s"), (int, float)):
            walls.setdefault(r["scenario"], []).append(r["wall_s"] / 60.0)
        row = run_figures(cat_path, r)
        if row:
            figures[r["scenario"]] = row  # the last catalogue's run
    data["minutes"] = dict(sorted({**data["minutes"], **{n: round(statistics.median(w), 1)
                                                         for n, w in walls.items()}}.items()))
    data["figures"] = dict(sorted({**data["figures"], **figures}.items()))
    data["measured"] = (f"{COMMAND}, one run at a time on the project's 2-core machine, "
                        f"{time.strftime('%Y-%m-%d', time.gmtime())}") if walls else data.get("measured")
    return data


def table(directory: Path = SCENARIOS_DIR, times: dict | None = None) -> str:
    times = (times if times is not None else minutes())["minutes"]
    lines = ["| scenario | backend | what it does | minutes here |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {kind} | {text} | {times.get(name, '-')} |" for name, kind, text in rows(directory)]
    return "\n".join(lines)


def _n(x, digits: int = 0) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _latency(f: dict) -> str:
    return "-" if not f["p99_ms"] else f"{_n(f['p50_ms'])} / {_n(f['p99_ms'])}"


def _percent(ratio) -> str:
    return "-" if ratio is None else f"{100 * ratio:.1f}%"


def measured_table(data: dict | None = None) -> str:
    """docs/checks.md's table: a scenario whose keeping up was judged a row, its last catalogue run's figures."""
    data = data if data is not None else minutes()
    measured = (data.get("measured") or "never measured").replace(COMMAND, f"`{COMMAND}`", 1)
    lines = [f"Measured: {measured}. A row a scenario whose keeping up is judged, from its last catalogue run: the "
             "figures of its measured window (after the warm-up); latency `-` for a query whose output rows are "
             "aggregates (no event's latency to read).", "",
             "| scenario | verdict | sustained | offered / processed per s | lag slope per s (±2 SE) | batch p50 ms "
             "| warm-up s | p50 / p99 ms | first data batch after `harness run` | footprint |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, f in (data.get("figures") or {}).items():
        lines.append(f"| `{name}` | {f['verdict']} | {f['sustained']} | {_n(f['offered_eps'])} / "
                     f"{_n(f['processed_eps'])} | {f['lag_slope_eps']:+,} ± {f['lag_slope_2se_eps']:,} | "
                     f"{_n(f['batch_p50_ms'])} | {_n(f['warmup_s'], 1)} | {_latency(f)} | "
                     f"{_n(f['first_data_batch_s'], 1)} s | {_percent(f['footprint'])} |")
    return "\n".join(lines)


def _between(markdown: str, begin: str, end: str, body: str) -> str:
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(markdown):
        raise ValueError(f"no generated-table markers ({begin} ... {end})")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", markdown)


def rewrite(markdown: str, directory: Path = SCENARIOS_DIR) -> str:
    """`markdown` with each generated table it holds (the scenarios, the measured figures) replaced by the
    current one."""
    if BEGIN not in markdown and FIGURES_BEGIN not in markdown:
        raise ValueError(f"no generated-table markers ({BEGIN} or {FIGURES_BEGIN})")
    if BEGIN in markdown:
        markdown = _between(markdown, BEGIN, END, table(directory))
    if FIGURES_BEGIN in markdown:
        markdown = _between(markdown, FIGURES_BEGIN, FIGURES_END, measured_table())
    return markdown


def main(argv: list[str]) -> int:
    if not argv or (len(argv) > 1 and (argv[1] != "--minutes" or len(argv) < 3)):
        print("usage: python -m harness.reports.catalogue PAGE.md [--minutes CATALOGUE.json ...]", file=sys.stderr)
        return 2
    if len(argv) > 1:
        MINUTES.write_text(json.dumps(measured_minutes([Path(p) for p in argv[2:]]), indent=2) + "\n",
                           encoding="utf-8")
    path = Path(argv[0])
    path.write_text(rewrite(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
