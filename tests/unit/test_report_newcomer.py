"""What a newcomer reads first, in the words that cannot mislead: a check's status and detail agree, the
processing rate is named for what it is, the accounting is one figure a row with its meaning, the environment
says what the run ran on (recorded at run time), and the console's lines are kept in the run directory."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from harness.records import environment
from harness.cli import main
from harness.console import Console
from harness.text.wording import PROCESSING_RATE
from harness.reports.ci import summary_markdown
from harness.reports.html import build_html
from harness.reports.report import build_report

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"
ANSI = re.compile(r"\x1b\[")


def rejudged(name: str, tmp_path: Path) -> Path:
    run_dir = tmp_path / name
    shutil.copytree(FIXTURES / name, run_dir)
    main(["check", str(run_dir)])
    return run_dir


def test_a_passed_drain_never_reads_as_not_drained(tmp_path):
    """eh-ageout's query stops with the failure a fault declares: `drained` read "yes | not drained: ...". Now it is
    listed as not required, saying there was nothing to drain; no passed check's detail opens with a negation."""
    for name in ("eh-ageout", "steady"):
        result = json.loads((rejudged(name, tmp_path) / "result.json").read_text())
        for check in result["checks"]:
            if check["status"] == "pass":
                words = check["name"].replace("_", " ")
                assert not check["detail"].lower().startswith(("not ", f"no {words}", "failed")), check
        drained = next(c for c in result["checks"] if c["name"] == "drained")
        assert "not drained" not in drained["detail"]
        if name == "eh-ageout":  # the query failed as declared: nothing to drain, and the check says so
            assert drained["status"] == "not required" and drained["detail"].startswith("nothing to drain")
            assert result["verdict"] == "pass"


def test_the_processing_rate_is_named_while_busy_everywhere(tmp_path):
    run_dir = rejudged("steady", tmp_path)
    result = json.loads((run_dir / "result.json").read_text())
    md, page, ci = build_report(result, run_dir), build_html(run_dir), summary_markdown(result)
    for text in (md, page, ci):
        assert "Spark rows/s |" not in text and "rows/s of busy batch time" not in text
    assert PROCESSING_RATE in md and PROCESSING_RATE in page and "rows/s while busy" in ci
    assert re.search(r'<abbr title="[^"]*batch time[^"]*">Spark\'s processing rate while busy</abbr>', page)
    shown = f"{result['throughput']['process_rps']:,.1f}"
    assert shown in page and shown in md


def test_the_accounting_is_one_figure_a_row_with_its_meaning(tmp_path):
    run_dir = rejudged("eh-ageout", tmp_path)
    result = json.loads((run_dir / "result.json").read_text())
    page = build_html(run_dir)
    table = re.search(r'<table class=accounting>(.*?)</table>', page, re.S).group(1)
    rows = re.findall(r"<tr><td>([a-z_]+)</td><td class=num>([\d,]+)</td><td>([^<]*)</td></tr>", table)
    assert [r[0] for r in rows] == list(result["counts"])  # every figure, in result.json's order
    assert all(r[2] for r in rows)  # each with its meaning
    assert dict((r[0], r[1]) for r in rows)["unread"] == f"{result['counts']['unread']:,}"
    md = build_report(result, run_dir)
    assert "| unread | 5,270 | acked events left unread after the query stopped as a fault declared |" in md


def test_the_environment_is_recorded_at_run_time_and_rendered(tmp_path):
    run_dir = tmp_path / "steady"
    shutil.copytree(FIXTURES / "steady", run_dir)
    recorded = environment.record(run_dir, {"kind": "kafka", "mode": "embedded"})
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    assert recorded["java"] == java.strip()
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    assert recorded["cpu cores"].split()[0] == nproc
    assert recorded["python"] == sys.version.split()[0]
    git = subprocess.run(["git", "-C", str(FIXTURES), "rev-parse", "--short=7", "HEAD"], capture_output=True,
                         text=True)
    if git.returncode == 0:  # a checkout: the commit; a wheel: the package version
        assert recorded["harness"].startswith("git ") and git.stdout.strip()[:7] in recorded["harness"]
    else:
        assert recorded["harness"].startswith("package ")
    assert re.fullmatch(r"\d+\.\d+\.\d+ \(embedded\)", recorded["kafka broker"])
    # judged later, by a judge with other versions: what the run recorded, not what the judge has
    (run_dir / environment.FILE).write_text(json.dumps({**recorded, "java": "openjdk version \"11.0.1\""}))
    assert main(["check", str(run_dir)]) == 0
    result = json.loads((run_dir / "result.json").read_text())
    assert result["environment"]["java"] == 'openjdk version "11.0.1"'
    page, md = build_html(run_dir), (run_dir / "report.md").read_text()
    for key in ("harness", "java", "kafka broker", "cpu cores"):
        assert f"<td>{key}</td>" in page and f"| {key} |" in md
    assert "openjdk version &quot;11.0.1&quot;" in page


def test_a_run_recorded_before_the_environment_says_whose_versions_it_shows(tmp_path):
    run_dir = rejudged("stateful", tmp_path)
    assert not (run_dir / environment.FILE).exists()
    page = build_html(run_dir)
    assert "pyspark (of the judge; not recorded at run time)" in page


def test_the_console_keeps_every_line_in_the_run_directory_without_colour(tmp_path, capsys):
    """Lines before the run directory is named are held, then written; the summary table and warnings too, as
    plain text; after end_log the next run's lines do not land in this run's file."""
    console = Console(quiet=True)
    console.info("validated scenario steady")
    console.log_to(tmp_path / "console.log")
    with console.step("starting Kafka"):
        pass
    console.warn("the lag sampler missed 2 samples")
    result = json.loads((FIXTURES / "steady.result.json").read_text())
    console.summary(result, tmp_path)
    console.end_log()
    console.info("the next run")
    log = (tmp_path / "console.log").read_text()
    printed = capsys.readouterr().out
    assert not ANSI.search(log)
    lines = log.splitlines()
    assert lines[0] == "validated scenario steady" and "starting Kafka: done in" in log
    assert "warning: the lag sampler missed 2 samples" in log and "[yellow]" not in log
    assert "steady on kafka: PASS" in log and "no_duplicates" in log and "report: " in lines[-1]
    assert "the next run" not in log and "the next run" in printed
    for line in ("produced 3,000", "processing rate while busy"):
        assert line in log and line in printed


def test_kafka_versions_are_said_only_for_kafka_runs():
    assert environment.kafka_versions({"kind": "eventhubs", "mode": "emulator"}) == {}
    external = environment.kafka_versions({"kind": "kafka", "mode": "external", "bootstrap": "b:9092"})
    assert external["kafka broker"] == "external cluster (its version not asked)"
    assert environment.kafka_versions({"kind": "kafka", "mode": "container", "image": "apache/kafka:4.1.1"})[
        "kafka broker"] == "image apache/kafka:4.1.1"


def test_the_console_ends_with_the_verdict_the_checks_that_decided_it_and_the_report(tmp_path, capsys):
    """Issue 32: the verdict stood above a 40-line table and the last line was the report's path. Now the last
    line says both, with the checks that kept the run from passing."""
    result = json.loads((FIXTURES / "steady.result.json").read_text())
    console = Console(quiet=True)
    console.summary(result, tmp_path)
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("steady on kafka: PASS; report: ") and last.endswith("result.json"), last
    names = [c["name"] for c in result["checks"]]
    for check in result["checks"]:
        if check["name"] == names[0]:
            check["ok"], check["status"] = False, "fail"
        if check["name"] == names[1]:
            check["ok"], check["status"] = None, "unknown"
    result["verdict"] = "fail"
    console.summary(result, tmp_path)
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(f"steady on kafka: FAIL ({names[0]}; unknown: {names[1]}); report: "), last
