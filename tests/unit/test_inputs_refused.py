"""Bad input is refused before anything starts: `harness validate` (through harness.cli.main) exits 2 with the
file, the field, what is allowed and, for an unknown name, the nearest allowed ones. Every case here validated
before (and then misbehaved: read as something else, crashed a producer, hung the run, or died in a traceback)."""
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from harness import machine
from harness.config import ConfigError, load_scenario

BASE = 'name = "t"\n[producers]\nrate = { kind = "constant", eps = 100 }\n'
EVENTHUBS = 'name = "t"\n[backend]\nkind = "eventhubs"\n[producers]\nrate = { kind = "constant", eps = 100 }\n'


def validate(tmp_path, text, *sets, capsys):
    path = tmp_path / "s.toml"
    path.write_text(text)
    argv = ["validate", str(path)]
    for s in sets:
        argv += ["--set", s]
    code = main(argv)
    err = capsys.readouterr().err
    return code, err, str(path)


REFUSED = [
    # (scenario text, what the message must hold besides the file)
    (BASE + '[spark.source_options]\nfailOnDataLoss = "maybe"\n', ["spark.source_options: failOnDataLoss",
                                                                   "expected true or false"]),
    (BASE + '[spark.source_options]\nincludeHeaders = "yes"\n', ["includeHeaders", "expected true or false"]),
    (BASE + '[spark.source_options]\nmaxOffsetsPerTrigger = 0\n', ["maxOffsetsPerTrigger", "at least 1"]),
    (BASE + '[spark.source_options]\nmaxOffsetsPerTrigger = 1000.5\n', ["maxOffsetsPerTrigger", "integer"]),
    (BASE + '[spark.source_options]\nminPartitions = "two"\n', ["minPartitions", "integer"]),
    (BASE + '[spark.source_options]\n"fetchOffset.numRetries" = -1\n', ["fetchOffset.numRetries", "at least 1"]),
    (BASE + '[spark.source_options]\n"kafkaConsumer.pollTimeoutMs" = 0\n', ["kafkaConsumer.pollTimeoutMs"]),
    (BASE + '[spark.source_options]\nmaxTriggerDelay = "5 minutes"\n', ["maxTriggerDelay", "'15m'"]),
    (BASE + '[spark.source_options]\nstartingOffsets = "earlest"\n', ["startingOffsets", "'earliest', 'latest'"]),
    (BASE + '[spark.source_options]\nstartingOffsetsByTimestampStrategy = "first"\n', ["allowed: error, latest"]),
    (BASE + '[spark.source_options]\nminOffsetsPerTrigger = 500\nmaxOffsetsPerTrigger = 100\n',
     ["minOffsetsPerTrigger (500) is higher than maxOffsetsPerTrigger (100)"]),
    (BASE + '[spark.source_options]\nendingOffsets = "latest"\n', ["'endingOffsets' is for batch queries"]),
    (BASE + '[spark.source_options]\n"kafka.auto.offset.reset" = "earliest"\n', ["startingOffsets"]),
    (BASE + '[spark.source_options]\nmaxOffsetPerTrigger = 10\n', ["did you mean 'maxOffsetsPerTrigger'"]),
    (EVENTHUBS + '[spark.source_options]\n"eventhubs.prefetchCount" = 9000\n', ["prefetchCount", "[1, 8000]"]),
    (EVENTHUBS + '[spark.source_options]\n"eventhubs.useExclusiveReceiver" = "maybe"\n', ["true or false"]),
    (EVENTHUBS + '[spark.source_options]\n"eventhubs.prefechCount" = 10\n',
     ["did you mean 'eventhubs.prefetchCount'"]),
    (EVENTHUBS + '[stream.config]\nRetentionSecond = 60\n', ["stream.config", "did you mean 'RetentionSeconds'?"]),
    (BASE + '[spark]\ntrigger = { interval = "1 secnd" }\n', ["spark.trigger.interval", "did you mean 'seconds'",
                                                               "allowed: weeks, days"]),
    (BASE + '[spark]\ntrigger = { interval = "banana" }\n', ["spark.trigger.interval", "no number at 'banana'"]),
    (BASE + '[spark]\ntrigger = { interval = "10s" }\n',
     ["unknown unit 's' (a number and its unit need a space between them; did you mean 'seconds'?)"]),
    (BASE + '[spark]\ntrigger = { interval = "-5 seconds" }\n', ["spark.trigger.interval", "negative"]),
    (BASE + '[spark]\ntrigger = { interval = "1.5 minutes" }\n', ["only seconds can have a fractional part"]),
    (BASE + '[spark]\ntrigger = { kind = "availableNow", interval = "5 seconds" }\n', ["spark.trigger",
                                                                                       "takes no interval"]),
    (BASE + '[spark]\ntrigger = { kind = "once", interval = "1 minute" }\n', ["takes no interval"]),
    ('seed = -5\n' + BASE, ["seed", "greater than or equal to 0"]),
    (BASE + '[[faults]]\nkind = "driver_kill"\nwindow = [100000, 100001]\n',
     ["faults.0 (driver_kill): window = [100000, 100001]", "the traffic lasts 60 s", "at most 240 s"]),
    (BASE + '[[faults]]\nkind = "driver_kill"\nat_s = 5000\n', ["faults.0", "at_s = 5000", "traffic lasts 60 s"]),
    (BASE + '[[faults]]\nkind = "driver_kill"\nat_s = 10\njitter_s = inf\n', ["faults[0]", "jitter_s"]),
    (BASE + '[spark]\ndrain_timeout_s = inf\n', ["spark.drain_timeout_s"]),
    (BASE + '[spark]\ndriver_memory = "100000g"\n', ["spark.driver_memory", "more than this machine's memory"]),
    (BASE + '[spark]\ndriver_memory = "1gb"\n', ["spark.driver_memory", "k, m, g or t"]),
    (BASE + '[spark]\ndriver_memory = "64m"\n', ["spark.driver_memory", "below 512m"]),
    (BASE + '[spark]\ncluster = "standalone"\nworkers = 8\nworker_memory_mb = 65536\n',
     ["spark.worker_memory_mb: workers x worker_memory_mb = 8 x 65536 MiB is more than this machine's memory"]),
    (BASE + '[stream]\npartitons = 4\n', ["stream.partitons: unknown key; did you mean 'partitions'?"]),
    (BASE + '[[faults]]\nkind = "driver_kil"\nat_s = 5\n', ["faults[0]: unknown kind 'driver_kil'; did you mean "
                                                            "'driver_kill'"]),
    (BASE.replace('name = "t"', 'name = "t"\n[backend]\nkind = "kafak"'), ["backend", "did you mean 'kafka'?"]),
    (BASE + '[spark]\nquery = "passthru"\n', ["spark.query: unknown query 'passthru'; did you mean 'passthrough'"]),
]


@pytest.mark.parametrize("text,expected", REFUSED, ids=[f"refused{i}" for i in range(len(REFUSED))])
def test_bad_input_exits_2_naming_file_field_and_what_is_allowed(tmp_path, capsys, text, expected):
    code, err, path = validate(tmp_path, text, capsys=capsys)
    assert code == 2, err
    assert f"error: {path}: " in err
    for part in expected:
        assert part in err
    assert "Traceback" not in err


ACCEPTED = [
    BASE + '[spark]\ntrigger = { interval = "interval 1 minute 30 seconds" }\n',
    BASE + '[spark]\ntrigger = { interval = ".5 seconds" }\n',
    BASE + '[spark]\ntrigger = { kind = "availableNow" }\n',
    BASE + '[spark.source_options]\nfailOnDataLoss = "FALSE"\nmaxTriggerDelay = "30s"\nminOffsetsPerTrigger = 10\n'
           'maxOffsetsPerTrigger = 100\nstartingOffsets = \'{"events": {"0": -2, "1": 5}}\'\n',
    BASE + '[spark.source_options]\nfailOnDataLoss = false\nminPartitions = 4\n',
    BASE + '[spark]\ndriver_memory = "1536M"\n',
    'seed = 0\n' + BASE + '[[faults]]\nkind = "driver_kill"\nat_s = 200\n',  # while the query drains: allowed
]


@pytest.mark.parametrize("text", ACCEPTED, ids=[f"accepted{i}" for i in range(len(ACCEPTED))])
def test_what_spark_accepts_still_validates(tmp_path, capsys, text):
    code, err, _ = validate(tmp_path, text, capsys=capsys)
    assert code == 0, err


def test_the_seed_range_is_the_producers_generators_range():
    """The producers seed numpy's generator with seed * 1009 + process index: numpy itself refuses a negative
    one (the crash `seed = -5` caused), and takes the largest seed the scenario allows."""
    with pytest.raises(ValueError):
        np.random.default_rng(-5 * 1009)
    np.random.default_rng((2 ** 63 - 1) * 1009 + 63)


def test_heaps_are_bounded_by_this_machines_memory(tmp_path, capsys):
    """The bound is the machine's physical memory as the kernel reports it (/proc/meminfo's MemTotal)."""
    total = next(int(line.split()[1]) << 10 for line in Path("/proc/meminfo").read_text().splitlines()
                 if line.startswith("MemTotal:"))
    assert abs(machine.memory_bytes() - total) < 64 << 20
    over = f"{(total >> 20) + 1024}m"
    code, err, _ = validate(tmp_path, BASE + f'[spark]\ndriver_memory = "{over}"\n', capsys=capsys)
    assert code == 2 and "more than this machine's memory" in err
    code, err, _ = validate(tmp_path, BASE + f'[backend]\nnodes = 5\nheap_mb = 4096\n', capsys=capsys)
    assert (code == 2) == (5 * 4096 << 20 > total), err
    from harness.config import Scenario, validate_resolved

    scenario, _, _ = load_scenario("steady")
    resolved = scenario.model_dump(mode="json")
    resolved["spark"]["driver_memory"] = over  # a run made on a bigger machine is still judged here
    assert isinstance(validate_resolved(resolved, "scenario.json"), Scenario)
    code, err, _ = validate(tmp_path, BASE, f"spark.driver_memory={over}", capsys=capsys)
    assert code == 2 and f"--set 'spark.driver_memory={over}'" in err and "spark.driver_memory:" in err


def test_unquoted_dotted_option_names_are_read_as_names(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(EVENTHUBS + "[spark.source_options]\neventhubs.prefetchCount = 90\n")
    scenario, _, _ = load_scenario(str(path))
    assert scenario.spark.source_options == {"eventhubs.prefetchCount": 90}


def test_a_long_value_is_quoted_short(tmp_path, capsys):
    code, err, _ = validate(tmp_path, BASE + f'[spark]\ntrigger = {{ interval = "{"9" * 20000} x" }}\n', capsys=capsys)
    assert code == 2 and len(err) < 1500


def test_scenario_name_typo_suggests(capsys):
    assert main(["validate", "stedy"]) == 2
    assert "no scenario named 'stedy'; did you mean 'steady'" in capsys.readouterr().err


# -- --set ------------------------------------------------------------------------------------------------------
def test_a_set_typo_is_blamed_on_the_set_not_the_file(tmp_path, capsys):
    code, err, path = validate(tmp_path, BASE, "producers.rat=5", capsys=capsys)
    assert code == 2
    assert f"error: --set 'producers.rat=5' (on {path}): producers.rat: unknown key; did you mean 'rate'?" in err


def test_set_reaches_an_element_of_a_list_of_tables(tmp_path, capsys):
    text = BASE + '[[faults]]\nkind = "driver_kill"\nat_s = 5\n[[faults]]\nkind = "driver_kill"\nat_s = 9\n'
    path = tmp_path / "s.toml"
    path.write_text(text)
    scenario, _, _ = load_scenario(str(path), ["faults.1.at_s=20"])
    assert [f.at_s for f in scenario.faults] == [5, 20]
    code, err, _ = validate(tmp_path, text, "faults.2.at_s=20", capsys=capsys)
    assert code == 2 and "--set 'faults.2.at_s=20': faults has 2 entries" in err and "(0 to 1)" in err
    code, err, _ = validate(tmp_path, text, "faults.0.at_s=-1", capsys=capsys)
    assert code == 2 and "--set 'faults.0.at_s=-1'" in err and "at_s" in err and "greater than or equal to 0" in err
    code, err, _ = validate(tmp_path, text, "faults.0.window=[100000, 100001]", "faults.0.at_s=nan", capsys=capsys)
    assert code == 2 and "at_s" in err
    code, err, path = validate(tmp_path, text, "faults.1.at_s=5000", capsys=capsys)
    assert code == 2 and f"--set 'faults.1.at_s=5000' (on {path}): faults.1 (driver_kill): at_s = 5000" in err
    code, err, _ = validate(tmp_path, BASE, "spark.source_options.failOnDataLoss=maybe", capsys=capsys)
    assert code == 2 and "--set 'spark.source_options.failOnDataLoss=maybe'" in err and "true or false" in err
    code, err, _ = validate(tmp_path, BASE, "faults.0.at_s=20", capsys=capsys)
    assert code == 2 and "has no faults entries" in err


# -- files and directories that used to end in a traceback -------------------------------------------------------
def test_a_quoted_set_key_is_checked_like_the_unquoted_one(tmp_path, capsys):
    """TOML's quoting of a dotted option name (the issue's) was stored with its quotes, checked by nothing and
    handed to Spark as a key no one reads: now it is the same option as the unquoted form, typo and all."""
    for key in ('spark.conf."spark.sql.shufle.partitions"', "spark.conf.spark.sql.shufle.partitions"):
        code, err, path = validate(tmp_path, BASE, f"{key}=4", capsys=capsys)
        assert code == 2 and f"error: --set '{key}=4' (on {path}): spark.conf.spark.sql.shufle.partitions: unknown " \
            "Spark" in err and "did you mean 'spark.sql.shuffle.partitions'" in err, err
    code, err, _ = validate(tmp_path, BASE, 'spark.conf."spark.sql.shuffle.partitions"=4', capsys=capsys)
    assert code == 0, err
    code, err, _ = validate(tmp_path, BASE, 'spark.conf."spark.sql=4', capsys=capsys)
    assert code == 2 and "error: --set 'spark.conf.\"spark.sql=4': the key 'spark.conf.\"spark.sql' is not a " \
        "dotted key as TOML reads it (Unterminated string" in err, err


def test_a_spark_conf_key_that_is_not_sparks_exits_2(tmp_path, capsys):
    code, err, path = validate(tmp_path, BASE, "spark.conf.sql.shuffle.partitions=4", capsys=capsys)
    assert code == 2 and f"error: --set 'spark.conf.sql.shuffle.partitions=4' (on {path}): " \
        "spark.conf.sql.shuffle.partitions: 'sql.shuffle.partitions' is not a Spark" in err, err
    assert "did you mean 'spark.sql.shuffle.partitions'" in err and "list it in spark.conf_allow" in err
    code, err, _ = validate(tmp_path, BASE + '[spark]\nconf_allow = ["myapp.*"]\n', 'spark.conf."myapp.flag"=1',
                            capsys=capsys)
    assert code == 0, err


# -- a fault schedule that cannot happen ---------------------------------------------------------------------------
KILLS = BASE + '[[faults]]\nkind = "driver_kill"\nat_s = 5\nevery_s = 10\ncount = 3\n'  # 60 s of traffic


@pytest.mark.parametrize("sets,expected", [
    # the issue's: a repeating fault timed past the traffic planned no injection, and the run passed without it
    (["faults.0.at_s=500"], ["faults.0 (driver_kill): at_s = 500, every_s = 10, count = 3 asks for injections at "
                             "500, 510 and 520 s; none of them fits before the end of the traffic at 60 s",
                             "The traffic lasts 60 s (producers.duration_s)", "after any warm-up",
                             "Give at_s at most 40 or producers.duration_s at least 520"]),
    # ... or fewer than its count: 50 and 60 fit, 70 does not
    (["faults.0.at_s=50"], ["asks for injections at 50, 60 and 70 s; only 2 of the 3 fit (at 50 and 60 s)",
                            "Give at_s at most 40, every_s at most 5, count = 2 or producers.duration_s at least 70"]),
    (["producers.duration_s=20"], ["at 5, 15 and 25 s; only 2 of the 3 fit (at 5 and 15 s) before the end of the "
                                   "traffic at 20 s", "The traffic lasts 20 s"]),
    # until_s stops it before the traffic ends
    (["faults.0.until_s=12"], ["count = 3, until_s = 12 asks for injections at 5, 15 and 25 s; only 1 of the 3 fits "
                               "(at 5 s) before until_s = 12", "or until_s at least 25"]),
    # a repeating fault's one injection past the traffic's end (a single one there would hit the drain, on purpose)
    (["faults.0.count=1", "faults.0.at_s=61"],
     ["at_s = 61, every_s = 10, count = 1 asks for injections at 61 s; none of them fits"]),
])
def test_a_fault_schedule_that_does_not_fit_the_traffic_exits_2(tmp_path, capsys, sets, expected):
    code, err, path = validate(tmp_path, KILLS, *sets, capsys=capsys)
    assert code == 2 and err.count("error: ") == 1 and "faults.0 (driver_kill): " in err, err
    assert all(e in err for e in expected), err
    with pytest.raises(ConfigError, match=r"faults\.0 \(driver_kill\)"):
        load_scenario(path, list(sets))


def test_a_repeating_fault_without_count_that_plans_nothing_exits_2(tmp_path, capsys):
    text = BASE + '[[faults]]\nkind = "resend"\nat_s = 90\nevery_s = 10\n'
    code, err, _ = validate(tmp_path, text, capsys=capsys)
    assert code == 2 and "faults.0 (resend): at_s = 90, every_s = 10 asks for injections at 90 s and every 10 s " \
                         "after; none of them fits before the end of the traffic at 60 s" in err, err


def test_the_issues_crash_recovery_override_exits_2(capsys):
    """`harness validate crash-recovery --set faults.0.at_s=500` said ok, and the run passed with no crash."""
    assert main(["validate", "crash-recovery", "--set", "faults.0.at_s=500"]) == 2
    err = capsys.readouterr().err
    assert "--set 'faults.0.at_s=500'" in err and "faults.0 (driver_kill)" in err and "none of them fits" in err
    assert main(["validate", "crash-recovery", "--set", "faults.0.at_s=30"]) == 2
    assert "only 1 of the 3 fits (at 30 s)" in capsys.readouterr().err


def test_schedules_that_fit_still_validate(tmp_path, capsys):
    fits = [KILLS, KILLS.replace("at_s = 5", "at_s = 40"),  # 40, 50 and 60: the last at the traffic's very end
            BASE + '[[faults]]\nkind = "resend"\nat_s = 5\nevery_s = 10\nuntil_s = 30\n',
            # timed from the end of the warm-up: 40, 50 and 60 s of the 60 s measured window, not of 90 s in all
            BASE.replace("[producers]\n", "[producers]\nwarmup_s = 30\n")
            + '[[faults]]\nkind = "driver_kill"\nat_s = 40\nevery_s = 10\ncount = 3\n']
    for text in fits:
        code, err, _ = validate(tmp_path, text, capsys=capsys)
        assert code == 0, err


def test_a_file_that_is_not_utf8_exits_2(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_bytes(BASE.encode().replace(b'"t"', b'"t\xff"'))
    assert main(["validate", str(path)]) == 2
    assert f"{path}: not UTF-8" in capsys.readouterr().err


def test_a_file_nested_50000_deep_exits_2(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text("a = " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert main(["validate", str(path)]) == 2
    assert f"{path}: nested 50,000 levels deep (at most 64" in capsys.readouterr().err


# Root reads and writes through any mode bits: the permission cases then run as root without its capabilities
# (CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH are what skip the mode bits). Not as `nobody`: a clone in a private
# directory (`mktemp -d`, mode 0700, as CI's and most users' are) holds the virtualenv and the code, which
# `nobody` cannot reach ("No module named harness"). Still root, the child reaches them; the files under test are
# root's own, so their mode bits decide for it as they would for any user.
DROP_CAPABILITIES = ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all"]


def _without_privileges(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    if not shutil.which("setpriv"):
        pytest.fail("these tests run as root: they need setpriv (util-linux) to drop root's capabilities, without "
                    "which root reads and writes through the mode bits under test")
    return [*DROP_CAPABILITIES, *argv]


def _harness(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLCONFIGDIR": str(cwd), "HOME": str(cwd)}  # the child writes nothing elsewhere
    proc = subprocess.run(_without_privileges([sys.executable, "-m", "harness", *args]), capture_output=True,
                          text=True, timeout=120, env=env, cwd=cwd)
    if proc.stderr.startswith("setpriv:"):  # e.g. a container without CAP_SETPCAP: root cannot be made to obey
        pytest.fail(f"root's capabilities could not be dropped here, so mode bits cannot be tested: {proc.stderr}")
    return proc


def test_an_unreadable_file_exits_2(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(BASE)
    path.chmod(0)
    proc = _harness("validate", str(path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"{path}: cannot be read (Permission denied)" in proc.stderr and "Traceback" not in proc.stderr


def test_out_that_is_a_file_or_read_only_exits_2(tmp_path, capsys):
    scenario = tmp_path / "s.toml"
    scenario.write_text(BASE)
    a_file = tmp_path / "file"
    a_file.write_text("")
    assert main(["run", str(scenario), "--out", str(a_file)]) == 2
    assert f"--out {a_file}: is a file" in capsys.readouterr().err
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    proc = _harness("run", str(scenario), "--out", str(locked / "run"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"--out {locked / 'run'}: cannot write under {locked}" in proc.stderr
    assert not (locked / "run").exists()


def test_capacity_trials_are_bounded(capsys):
    """The ramp doubles the rate each trial: 100000 trials overflowed a float in a traceback."""
    assert main(["capacity", "steady", "--max-trials", "100000"]) == 2
    assert "--max-trials 100000: trials in all, at most 64" in capsys.readouterr().err


def test_run_with_bad_input_exits_2_before_anything_starts(tmp_path):
    """`harness run` with the issue's trigger typo: exit 2 at once, no run directory, no process left (before,
    Kafka started and the run failed 37 s later with "Spark query did not start")."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(BASE + '[spark]\ntrigger = { interval = "1 secnd" }\n')
    out = tmp_path / "run"
    token = uuid.uuid4().hex
    proc = subprocess.run([sys.executable, "-m", "harness", "run", str(scenario), "--out", str(out)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "HARNESS_TEST_TOKEN": token})
    assert proc.returncode == 2, proc.stderr
    assert f"{scenario}: spark.trigger.interval" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists() or not any(out.iterdir())
    assert not list(tmp_path.glob("runs/*"))
    left = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if token.encode() in environ.read_bytes():
                left.append(environ.parent.name)
        except OSError:
            continue
    assert not left, f"processes started by the refused run still alive: {left}"


def test_suggestions_are_near_case_insensitive_and_never_unrelated():
    from harness.text.suggest import did_you_mean, nearest, quote

    assert nearest("MAXOFFSETPERTRIGGER", ["maxOffsetsPerTrigger", "failOnDataLoss"]) == ["maxOffsetsPerTrigger"]
    assert did_you_mean("zzzz", ["steady", "burst"]) == ""
    assert len(quote("x" * 10_000)) < 260
