"""The GitHub workflows parse and call only what exists: every `make X` a target of the Makefile (its rules, parsed),
every `harness ...` command line accepted by the harness's own argparse parser; no `${{ }}` expression inside a
`run:` script (workflow inputs reach the shell through `env:`, so an input cannot become shell code). And each
workflow does its job: pull requests run `make test` with Python 3.11, Java 17 and the caches; the nightly soak
compares against a stored baseline, publishes its JUnit and uploads the report files, not the run directory."""
from __future__ import annotations

import contextlib
import io
import itertools
import re
import shlex
from pathlib import Path

import pytest
import yaml

from harness.cli import parser

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))


def load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def triggers(wf: dict) -> dict:
    return wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as true


def steps(wf: dict):
    for job_name, job in wf["jobs"].items():
        for step in job["steps"]:
            yield job_name, job, step


def scripts(wf: dict) -> list[str]:
    return [step["run"] for _, _, step in steps(wf) if "run" in step]


def makefile_targets() -> set[str]:
    targets = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.%/ -]+?)\s*::?(?!=)", line)
        if m and not line.startswith("\t"):
            targets |= {t for t in m.group(1).split() if not t.startswith(".")}
    return targets


def command_lines(script: str) -> list[list[str]]:
    """Each simple command of a script as shell words (continuation lines joined; `;`, `&&`, `||` split)."""
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0]
        for part in re.split(r"&&|\|\||;", line):
            try:
                words = shlex.split(part)
            except ValueError:
                continue
            if words:
                out.append(words)
    return out


def test_there_are_the_two_workflows_and_each_parses():
    assert {f.name for f in FILES} >= {"tests.yml", "nightly-soak.yml"}
    for f in FILES:
        wf = yaml.safe_load(f.read_text())
        assert wf["name"] and triggers(wf) and wf["jobs"], f.name
        for _, job, step in steps(wf):
            assert job["runs-on"] and job["timeout-minutes"] > 0
            assert ("uses" in step) != ("run" in step), step


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_expression_is_interpolated_into_a_run_script(path):
    wf = yaml.safe_load(path.read_text())
    bad = [script for script in scripts(wf) if "${{" in script]
    assert not bad, f"{path.name}: `${{{{ }}}}` inside run: (pass it through env:): {bad}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_make_target_called_exists_in_the_makefile(path):
    targets = makefile_targets()
    assert {"setup", "test", "test-slow", "soak", "scenario"} <= targets  # the parser reads this Makefile
    called = [w for words in command_lines("\n".join(scripts(yaml.safe_load(path.read_text()))))
              if words[0] == "make" for w in words[1:] if not w.startswith("-") and "=" not in w]
    assert called, f"{path.name} calls no make target"
    assert [t for t in called if t not in targets] == []


def _variants(script: str, words: list[str]) -> list[list[str]]:
    """The command's words as the shell could expand them: "$VAR" as a placeholder, an array "${a[@]}" as each of
    the values the script assigns it (including empty)."""
    arrays = {}
    for name, body in re.findall(r"(\w+)=\(([^)]*)\)", script):
        arrays.setdefault(name, []).append(shlex.split(body))
    slots = []
    for w in words:
        m = re.fullmatch(r"\$\{(\w+)\[@\]\}", w)
        slots.append(arrays.get(m.group(1), [[]]) if m else [["placeholder" if w.startswith("$") else w]])
    return [[w for part in combo for w in part] for combo in itertools.product(*slots)]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_harness_command_line_parses_with_the_harness_parser(path):
    for script in scripts(yaml.safe_load(path.read_text())):
        for words in command_lines(script):
            if words[0].endswith("harness"):
                argv = words[1:]
            elif len(words) > 2 and words[1:3] == ["-m", "harness"]:
                argv = words[3:]
            else:
                continue
            for variant in _variants(script, argv):
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    try:
                        parser().parse_args(variant)
                    except SystemExit:
                        pytest.fail(f"{path.name}: `harness {' '.join(variant)}` does not parse: {err.getvalue()}")


def test_pull_requests_run_make_test_with_python_311_java_17_and_the_caches():
    wf = load("tests.yml")
    assert "pull_request" in triggers(wf)
    all_steps = [s for _, _, s in steps(wf)]
    assert [s["run"] for s in all_steps if "run" in s] == ["make test"]
    by_action = {s["uses"].split("@")[0]: s for s in all_steps if "uses" in s}
    assert str(by_action["actions/setup-python"]["with"]["python-version"]) == "3.11"
    assert by_action["actions/setup-python"]["with"]["cache"] == "pip"
    assert "constraints.txt" in by_action["actions/setup-python"]["with"]["cache-dependency-path"]
    assert str(by_action["actions/setup-java"]["with"]["java-version"]) == "17"
    assert by_action["actions/cache"]["with"]["path"] == "~/.cache/spark-stream-harness"


def test_the_nightly_soak_compares_with_a_stored_baseline_and_publishes_the_report_not_the_run_directory():
    wf = load("nightly-soak.yml")
    assert triggers(wf)["schedule"][0]["cron"].count(" ") == 4
    inputs = triggers(wf)["workflow_dispatch"]["inputs"]
    job = wf["jobs"]["soak"]
    job_steps = job["steps"]
    # inputs reach the shell only as environment variables
    env_text = " ".join(str(v) for v in job.get("env", {}).values())
    assert all(f"inputs.{name}" in env_text for name in inputs)

    soak = next(s for s in job_steps if "run" in s and "harness soak" in s["run"])
    restore = next(s for s in job_steps if s.get("uses", "").startswith("actions/cache/restore@"))
    save = next(s for s in job_steps if s.get("uses", "").startswith("actions/cache/save@"))
    keep = next(s for s in job_steps if "run" in s and restore["with"]["path"] in s["run"] and s is not soak)
    assert restore["with"]["restore-keys"] and restore["with"]["key"] == save["with"]["key"]
    assert restore["with"]["path"] == save["with"]["path"]
    order = job_steps.index
    assert order(restore) < order(soak) < order(keep) < order(save)
    assert "if" not in save and "if" not in keep  # only a passing night becomes the baseline
    # the soak passes --baseline only when one was restored: the first night runs without
    assert f"-f {restore['with']['path']}/result.json" in soak["run"]
    assert f"--baseline {restore['with']['path']}" in soak["run"]

    upload = next(s for s in job_steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()"
    assert sorted(upload["with"]["path"].split()) == sorted(
        f"runs/nightly/{f}" for f in ("report.html", "result.json", "junit.xml", "summary.md"))
    junit = next(s for s in job_steps if "junit" in str(s.get("with", {})) and s is not upload)
    assert junit["if"] == "always()" and junit["with"]["path"] == "runs/nightly/junit.xml"
    assert wf["permissions"]["checks"] == "write"

    slow = wf["jobs"]["slow-tests"]
    assert [s["run"] for s in slow["steps"] if "run" in s] == ["make test-slow"]
