"""The scenario catalogue in README.md, generated from the scenario files' own descriptions, so the table can
never list a scenario that is not shipped or miss one that is: `python -m reports.catalogue README.md` rewrites
the table between its two markers, and tests/unit/test_docs_commands.py fails when they differ.

One line a scenario: the description's first sentence (up to its first ". " or "; "), the backend, and whether
it is a sweep or a soak, which change what a run of it looks like."""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

from harness.paths import SCENARIOS_DIR

BEGIN, END = "<!-- scenarios:begin (python -m reports.catalogue README.md) -->", "<!-- scenarios:end -->"
MAX_CHARS = 170


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


def table(directory: Path = SCENARIOS_DIR) -> str:
    lines = ["| scenario | backend | what it does |", "|---|---|---|"]
    lines += [f"| `{name}` | {kind} | {text} |" for name, kind, text in rows(directory)]
    return "\n".join(lines)


def rewrite(markdown: str, directory: Path = SCENARIOS_DIR) -> str:
    """`markdown` with the table between BEGIN and END replaced by the current one."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(markdown):
        raise ValueError(f"no scenario table markers ({BEGIN} ... {END})")
    return pattern.sub(lambda _: f"{BEGIN}\n{table(directory)}\n{END}", markdown)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m reports.catalogue README.md", file=sys.stderr)
        return 2
    path = Path(argv[0])
    path.write_text(rewrite(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
