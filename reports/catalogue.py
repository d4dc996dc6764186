"""The scenario catalogue in README.md, generated from the scenario files' own descriptions, so the table can
never list a scenario that is not shipped or miss one that is: `python -m reports.catalogue README.md` rewrites
the table between its two markers, and tests/unit/test_docs_commands.py fails when they differ.

One line a scenario: the description's first sentence (up to its first ". " or "; "), the backend, whether it
is a sweep or a soak, which change what a run of it looks like, and how many minutes a run of it took on the
project's 2-core machine (set-up, warm-up, traffic, faults, drain and judging; a sweep all its runs): measured by
`harness bench verdicts --all` and kept in docs/scenario-minutes.json, which `--minutes CATALOGUE.json ...`
rewrites from one or more catalogues (the median of their runs), so the column says what was measured, and when.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
import tomllib
import time
from pathlib import Path

from harness.paths import REPO, SCENARIOS_DIR

BEGIN, END = "<!-- scenarios:begin (python -m reports.catalogue README.md) -->", "<!-- scenarios:end -->"
MAX_CHARS = 170
MINUTES = REPO / "docs" / "scenario-minutes.json"


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
    """{"measured": ..., "minutes": {scenario: minutes}} as last measured; empty when never measured."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"measured": None, "minutes": {}}
    return data if isinstance(data, dict) and isinstance(data.get("minutes"), dict) else {"measured": None,
                                                                                           "minutes": {}}


def measured_minutes(catalogues: list[Path], path: Path = MINUTES) -> dict:
    """docs/scenario-minutes.json updated from catalogues' runs (harness bench verdicts --all): per scenario the
    median of its runs' minutes; scenarios they did not run keep what was there."""
    data = minutes(path)
    walls: dict[str, list[float]] = {}
    for cat_path in catalogues:
        cat = json.loads(Path(cat_path).read_text(encoding="utf-8"))
        for r in cat.get("runs") or []:
            if isinstance(r.get("wall_s"), (int, float)):
                walls.setdefault(r["scenario"], []).append(r["wall_s"] / 60.0)
    data["minutes"] = dict(sorted({**data["minutes"], **{n: round(statistics.median(w), 1)
                                                         for n, w in walls.items()}}.items()))
    data["measured"] = (f"harness bench verdicts --all, one run at a time on the project's 2-core machine, "
                        f"{time.strftime('%Y-%m-%d', time.gmtime())}") if walls else data.get("measured")
    return data


def table(directory: Path = SCENARIOS_DIR, times: dict | None = None) -> str:
    times = (times if times is not None else minutes())["minutes"]
    lines = ["| scenario | backend | what it does | minutes here |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {kind} | {text} | {times.get(name, '-')} |" for name, kind, text in rows(directory)]
    return "\n".join(lines)


def rewrite(markdown: str, directory: Path = SCENARIOS_DIR) -> str:
    """`markdown` with the table between BEGIN and END replaced by the current one."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(markdown):
        raise ValueError(f"no scenario table markers ({BEGIN} ... {END})")
    return pattern.sub(lambda _: f"{BEGIN}\n{table(directory)}\n{END}", markdown)


def main(argv: list[str]) -> int:
    if not argv or (len(argv) > 1 and (argv[1] != "--minutes" or len(argv) < 3)):
        print("usage: python -m reports.catalogue README.md [--minutes CATALOGUE.json ...]", file=sys.stderr)
        return 2
    if len(argv) > 1:
        MINUTES.write_text(json.dumps(measured_minutes([Path(p) for p in argv[2:]]), indent=2) + "\n",
                           encoding="utf-8")
    path = Path(argv[0])
    path.write_text(rewrite(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
