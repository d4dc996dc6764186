"""What a real run keeps about itself beside its verdict: the console's own lines (console.log, plain text, the
final summary included) and what it ran on (result.json's environment, from the real java, git and nproc).
Reads the session's shared `harness run steady` (tests/integration/conftest.py), so it costs no run of its own."""
import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPARK_CLIENT = "kafka-clients (Spark's connector)"


def test_the_run_directory_keeps_what_the_console_printed(steady_run):
    out, proc, _ = steady_run  # passed or not (a busy machine can fail sustained): what it printed is kept
    log = (out / "console.log").read_text(encoding="utf-8")
    assert "\x1b[" not in log  # no colour codes
    printed = proc.stdout.splitlines()  # the runner's own stdout and stderr, as the user saw them
    lines = log.splitlines()
    assert set(lines) <= set(printed), sorted(set(lines) - set(printed))[:5]
    said = [line for line in printed if re.match(r"(run directory: |starting |traffic: |draining |stopping |"
                                                 r"steady on kafka: |│ |produced |throughput: |end-to-end latency|"
                                                 r"report: )", line)]
    assert len(said) >= 9 and [line for line in said if line not in lines] == []
    assert lines[0] == f"run directory: {out}"
    assert re.match(r"steady on kafka: (PASS|FAIL \(.+\)); report: \S+report\.html", lines[-1]), lines[-1]
    assert "Spark's processing rate while busy" in log and "│ no_duplicates" in log


def test_the_result_says_what_the_run_ran_on(steady_run):
    out, proc, _ = steady_run
    env = json.loads((out / "result.json").read_text())["environment"]
    assert env == json.loads((out / "environment.json").read_text())
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0].strip()
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    assert env["java"] == java and env["cpu cores"].split()[0] == nproc
    git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True)
    if git.returncode == 0:
        assert env["harness"].startswith("git ") and git.stdout.strip() in env["harness"]
    jars = json.loads((out / "spark" / "job.json").read_text())["conf"]["spark.jars"].split(",")
    clients = [Path(j).name for j in jars if Path(j).name.startswith("kafka-clients-")]
    assert clients == [f"kafka-clients-{env[SPARK_CLIENT]}.jar"]  # what it loaded
    assert re.fullmatch(r"\d+\.\d+\.\d+ \(embedded\)", env["kafka broker"])
    page = (out / "report.html").read_text()
    assert "<td>java</td>" in page and "<td>kafka broker</td>" in page


def test_the_result_says_what_share_of_the_cpu_the_harness_took(steady_run):
    """result.json's footprint: the harness's CPU and the system under test's over the traffic, both sampled; the
    producer's share checked against the producer's own CPU clock (its stats rows' process_time, an independent
    reading of the same process), and the report says it in words."""
    out, _, _ = steady_run
    result = json.loads((out / "result.json").read_text())
    foot = result["footprint"]
    assert foot["harness_cpu_s"] > 0 and foot["sut_cpu_s"] > 0 and foot["window_s"] > 0
    assert abs(foot["ratio"] - foot["harness_cpu_s"] / foot["sut_cpu_s"]) < 1e-3
    assert foot["ok"] == (foot["ratio"] < foot["goal"]) and {"producer", "broker", "driver-jvm"} <= set(foot["by_role"])
    rows = {}
    for path in (out / "producers").glob("stats-*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            rows.setdefault(row["t"], 0.0)
            rows[row["t"]] += row["cpu_s"]  # each process's CPU so far, written just after second t ended

    seconds = sorted(rows)

    def cpu_at(t: float) -> float:
        """Linear between the rows' ends (t + 1); a window edge in the first second (the sampler's first interval
        may begin before the first row is written) or after the last row is extrapolated from the nearest two."""
        lo = max((s for s in seconds if s + 1 <= t), default=seconds[0])
        hi = min((s for s in seconds if s + 1 >= t and s > lo), default=None)
        if hi is None:  # beyond the last row: the last two rows' slope
            lo, hi = seconds[-2], seconds[-1]
        return rows[lo] + (rows[hi] - rows[lo]) * (t - lo - 1) / (hi - lo)

    own = cpu_at(foot["covered_to_t"]) - cpu_at(foot["covered_from_t"])
    assert abs(foot["by_role"]["producer"] - own) <= 0.25 * own + 0.1, (foot["by_role"]["producer"], own)
    assert "of the CPU of what it measured" in (out / "report.md").read_text()
    assert "of the CPU of what it measured" in (out / "report.html").read_text()
