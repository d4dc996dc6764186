"""Every command in README.md and docs/*.md runs as written: each `harness ...` / `make ...` line of a fenced code
block parses with the harness's own argument parser (harness.cli.parser, a dry parse: nothing runs), names a
scenario that exists, and a make target the Makefile has. The scenario catalogue lists exactly the files in
scenarios/, in their own words; the README's own example validates; every relative link leads to a file."""
import json
import re
import shlex
from pathlib import Path

import pytest

from harness.cli import main, parser
from harness.files.paths import SCENARIOS_DIR
from harness.reports import catalogue

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
NOT_SHELL = {"toml", "json", "python", "yaml", "yml", "xml", "html", "text"}
HARNESS = ("harness", ".venv/bin/harness")
SCENARIO_COMMANDS = {"run", "validate", "capacity", "soak"}
EXAMPLE_FILES = {"my_scenario.toml"}  # README section 5 writes it; test_the_readme_example_validates runs it


def fenced_blocks(text: str):
    """(language, first line number, lines) of every fenced code block."""
    lines, i = text.split("\n"), 0
    while i < len(lines):
        m = re.match(r"^\s*```(\w*)", lines[i])
        if m:
            start, body = i + 1, []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                body.append(lines[i])
                i += 1
            yield m.group(1).lower(), start + 1, body
        i += 1


def command_lines(text: str):
    """(line number, tokens) of each harness/make command in shell-like blocks, continuations joined, comments and
    leading VAR=value assignments dropped."""
    for lang, start, body in fenced_blocks(text):
        if lang in NOT_SHELL:
            continue
        joined: list[tuple[int, str]] = []
        for n, line in enumerate(body, start):
            if joined and joined[-1][1].endswith("\\"):
                joined[-1] = (joined[-1][0], joined[-1][1][:-1] + " " + line.strip())
            else:
                joined.append((n, line.strip()))
        for n, line in joined:
            line = line.removeprefix("$ ")
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError:
                continue
            while tokens and re.match(r"^[A-Z_][A-Z0-9_]*=", tokens[0]):
                tokens = tokens[1:]
            if tokens and (tokens[0] in HARNESS or tokens[0] == "make" or tokens[:3] == ["python", "-m", "harness"]
                           or tokens[1:3] == ["-m", "harness"]):
                yield n, tokens


def make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


def harness_argv(tokens: list[str]) -> list[str] | None:
    """The harness arguments a command line stands for (a make target's harness command, ARGS included), or None
    for a make target that runs no harness command."""
    if tokens[0] in HARNESS:
        return tokens[1:]
    if tokens[0] != "make":
        return tokens[3:]
    target = next((t for t in tokens[1:] if "=" not in t), "")
    var = dict(t.split("=", 1) for t in tokens[1:] if "=" in t)
    args = shlex.split(var.get("ARGS", ""))
    return {"scenario": ["run", var.get("NAME", "steady"), *args],
            "capacity": ["capacity", var.get("NAME", "steady"), *args],
            "soak": ["soak", var.get("NAME", "soak"), *(["--duration", var["DURATION"]] if "DURATION" in var else []),
                     *args],
            "compare": ["compare", var.get("A", "runs/a"), var.get("B", "runs/b"), *args],
            "bench": ["bench", "all", *args], "list": ["list"]}.get(target)


def problems_of(text: str, where: str) -> list[str]:
    """What is wrong with the commands of one page (empty: all run as written)."""
    out, targets = [], make_targets()
    for n, tokens in command_lines(text):
        at = f"{where}:{n}: {' '.join(tokens)}"
        if tokens[0] == "make":
            target = next((t for t in tokens[1:] if "=" not in t), None)
            if target not in targets:
                out.append(f"{at}: no make target {target!r}")
                continue
        argv = harness_argv(tokens)
        if argv is None:
            continue
        try:
            args = parser().parse_args(argv)
        except SystemExit as exc:
            if exc.code not in (0, None):  # --help / --version exit 0
                out.append(f"{at}: does not parse (exit {exc.code})")
            continue
        scenario = getattr(args, "scenario", None)
        if args.command in SCENARIO_COMMANDS and scenario is not None:
            known = (SCENARIOS_DIR / f"{scenario}.toml").is_file() or (ROOT / scenario).is_file() \
                or scenario in EXAMPLE_FILES
            if not known:
                out.append(f"{at}: no scenario {scenario!r} in {SCENARIOS_DIR} and no such file")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_on_the_page_runs_as_written(page, capsys):
    assert problems_of(page.read_text(encoding="utf-8"), page.relative_to(ROOT).as_posix()) == []
    capsys.readouterr()  # argparse's usage lines for the record, not the report


def test_the_pages_have_commands_to_check():
    counts = {p.name: sum(1 for _ in command_lines(p.read_text(encoding="utf-8"))) for p in PAGES}
    assert counts["README.md"] >= 6 and sum(counts.values()) >= 40, counts


def test_a_command_that_would_not_run_is_caught(capsys):
    page = "\n".join(["```sh", ".venv/bin/harness run steady --quiett", "make scenario NAME=steadyy",
                      "make deploy", "harness compare", "python -m harness run no-such-scenario   # comment",
                      ".venv/bin/harness run steady \\", "    --set producers.rate.eps=5000 --out runs/x", "```",
                      "```toml", "harness = 'not a command'", "```"])
    found = problems_of(page, "page")
    capsys.readouterr()
    assert [p.split(": ", 1)[0] for p in found] == ["page:2", "page:3", "page:4", "page:5", "page:6"], found
    assert "no make target 'deploy'" in found[2] and "no scenario 'steadyy'" in found[1]


def test_the_catalogue_lists_exactly_the_scenario_files_in_their_own_words():
    text = README.read_text(encoding="utf-8")
    block = text[text.index(catalogue.BEGIN) + len(catalogue.BEGIN):text.index(catalogue.END)].strip()
    names = re.findall(r"^\| `([^`]+)` \|", block, re.M)
    assert names == [p.stem for p in sorted(SCENARIOS_DIR.glob("*.toml"))]
    assert block == catalogue.table(), "regenerate: python -m harness.reports.catalogue README.md"


def test_the_measured_table_in_checks_is_the_one_the_catalogues_gave():
    """docs/checks.md's measured figures are generated from the catalogue runs kept in docs/catalogue-measured.json
    (issue 32: the start-up and latency figures on different pages had drifted apart)."""
    text = (ROOT / "docs" / "checks.md").read_text(encoding="utf-8")
    start, end = text.index(catalogue.FIGURES_BEGIN), text.index(catalogue.FIGURES_END)
    block = text[start + len(catalogue.FIGURES_BEGIN):end].strip()
    assert block == catalogue.measured_table(), "regenerate: python -m harness.reports.catalogue docs/checks.md"
    assert len(catalogue.minutes()["figures"]) >= 15


def test_a_catalogue_runs_figures_are_its_result_jsons(tmp_path):
    """One catalogue run read back as a table row: the figures are the run's result.json's, found beside the
    catalogue (a moved catalogue reads the same); a run whose keeping up was not judged has no row."""
    fixtures = ROOT / "tests" / "fixtures" / "runs"
    cat = tmp_path / "moved" / "catalogue.json"
    result = json.loads((fixtures / "steady.result.json").read_text())
    # the recorded fixture's few seconds are all start-up (sustained not required): here as a judged run
    result["checks"] = [{**c, "status": "pass"} if c["name"] == "sustained" else c for c in result["checks"]]
    for name, text in (("steady", json.dumps(result)),
                       ("eh-ageout-lenient", (fixtures / "eh-ageout-lenient.result.json").read_text())):
        (cat.parent / name / "01").mkdir(parents=True)
        (cat.parent / name / "01" / "result.json").write_text(text)
    runs = [{"scenario": n, "round": 1, "run_dir": f"/elsewhere/{n}/01", "wall_s": w}
            for n, w in (("steady", 90.0), ("eh-ageout-lenient", 150.0))]
    cat.write_text(json.dumps({"runs": runs}))
    data = catalogue.measured_minutes([cat], path=tmp_path / "none.json")
    assert data["minutes"] == {"eh-ageout-lenient": 2.5, "steady": 1.5}
    assert list(data["figures"]) == ["steady"]  # eh-ageout-lenient's lag is held behind on purpose: not judged
    result["checks"] = [{**c, "status": "not required"} if c["name"] == "sustained" else c for c in result["checks"]]
    (cat.parent / "steady" / "01" / "result.json").write_text(json.dumps(result))
    assert catalogue.measured_minutes([cat], path=tmp_path / "none.json")["figures"] == {}
    result["checks"] = [{**c, "status": "pass"} if c["name"] == "sustained" else c for c in result["checks"]]
    row = data["figures"]["steady"]
    assert row["offered_eps"] == round(result["sustain"]["offered_eps"])
    assert row["lag_slope_eps"] == round(result["sustain"]["lag"]["slope_eps"])
    assert row["first_data_batch_s"] == result["startup"]["first_data_batch_from_run_start_s"]
    assert row["p99_ms"] == result["latency_ms"]["p99"] and row["verdict"] == result["verdict"]
    line = catalogue.measured_table(data).splitlines()[-1]
    assert line.startswith(f"| `steady` | {result['verdict']} | ") and f"{row['lag_slope_eps']:+,} ± " in line


def test_the_readme_example_validates(tmp_path, monkeypatch, capsys):
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## 5."):text.index("## 6.")]
    blocks = {lang: body for lang, _, body in fenced_blocks(section) if lang in ("toml", "python")}
    (tmp_path / "my_scenario.toml").write_text("\n".join(blocks["toml"]) + "\n")
    (tmp_path / "my_query.py").write_text("\n".join(blocks["python"]) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["validate", str(tmp_path / "my_scenario.toml")]) == 0, capsys.readouterr()
    # and a mistake in it is refused, naming the field
    bad = (tmp_path / "my_scenario.toml").read_text().replace("maxOffsetsPerTrigger", "maxOffsetPerTrigger")
    (tmp_path / "bad.toml").write_text(bad)
    assert main(["validate", str(tmp_path / "bad.toml")]) == 2
    assert "maxOffsetPerTrigger" in capsys.readouterr().err


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_a_file(page):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
        if "://" not in target:
            assert (page.parent / target).exists(), f"{page.name}: {target}"


def test_no_page_carries_a_path_of_the_machine_it_was_written_on():
    """Issue 32: README and docs/options.md showed /work/main/..., the checkout of the machine they were written
    on; a reader's differs. Examples name paths a reader has (~/..., runs/...) or obviously made-up ones."""
    machine = re.compile(r"(?<![\w.~])/(?:work|root|home/[a-z_][\w-]*)/")
    found = [f"{page.relative_to(ROOT)}:{n}" for page in PAGES
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if machine.search(line)]
    assert found == []


def test_the_first_screen_says_what_it_needs_and_costs():
    first = README.read_text(encoding="utf-8").split("## 2.")[0]
    for needed in ("**Linux**", "**Python 3.11**", "**Java 17**", "PyPI and Maven Central",
                   "`make test` about 25 minutes", "Disk: about"):
        assert needed in first, needed


@pytest.mark.parametrize("page, command", [
    (README, r"\$ \.venv/bin/harness (run stedy)\n"),
    (ROOT / "docs" / "options.md", r"\.venv/bin/harness (validate steady --set spark\.conf\.spark\.sql\.shufle\S+)"),
])
def test_an_error_a_page_shows_is_the_one_the_command_prints(page, command, capsys):
    """Issue 32: README's did-you-mean example had drifted from the real output. The error line shown after the
    command (up to where it lists every name, or names a path) is what the command prints today."""
    text = page.read_text(encoding="utf-8")
    m = re.search(command, text)
    assert m, command
    shown = next(line for line in text[m.end():].splitlines() if line.startswith("error: "))
    assert main(shlex.split(m.group(1))) == 2
    printed = capsys.readouterr().err.strip()
    for part in re.split(r" \(on [^)]*\)| known: .*", shown):
        assert part.rstrip(".,") in printed, (part, printed)


MEASURED = re.compile(r"[Mm]easured (here|on)|\(20\d\d-\d\d-\d\d")
COMMAND = re.compile(r"`[^`]*\b(harness|make) [a-z][^`]*`|\.venv/bin/harness |harness bench|make scenario|make bench")


def _paragraphs(text: str):
    """Paragraphs and list items outside tables and code blocks (a code block stays with the text around it)."""
    blocks, current, fenced = [], [], False
    for line in text.split("\n"):
        if line.strip().startswith("```"):
            fenced = not fenced
            current.append(line)
            continue
        if not fenced and (not line.strip() or line.startswith(("- ", "#"))):
            if current:
                blocks.append("\n".join(current))
            current = [line] if line.strip() else []
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    return [b for b in blocks if not b.startswith(("|", "```"))]


def test_every_measured_figure_names_the_command_that_measures_it():
    """Issue 32: figures in the docs must come from a command the page gives. A paragraph that reports a
    measurement (`Measured here`, a date) names its command in it, or is a bench's own list item (the page's
    first lines give `harness bench NAME`)."""
    from harness.bench import BENCHES

    bare = []
    for page in PAGES:
        for block in _paragraphs(page.read_text(encoding="utf-8")):
            lead = re.match(r"- `([a-z-]+)`:", block)
            if MEASURED.search(block) and not COMMAND.search(block) and not (lead and lead.group(1) in BENCHES):
                bare.append(f"{page.relative_to(ROOT)}: {block[:100]!r}")
    assert bare == []
