"""A run stopped from outside (Ctrl-C, SIGTERM, SIGHUP) is not judged: `unjudged` with the reason, its figures
kept, and its junit.xml one error, not failures (as an interrupted sweep is)."""
import json
import os
import shutil
import signal
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.cli import main
from harness.supervisor import StoppedBySignal, Supervisor

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_the_run_naming_the_signal(sig):
    before = signal.getsignal(sig)
    with pytest.raises(KeyboardInterrupt) as caught:
        with Supervisor("test-stop"):
            os.kill(os.getpid(), sig)
            for _ in range(100):  # the handler runs between bytecodes
                pass
    assert isinstance(caught.value, StoppedBySignal) and str(caught.value) == f"stopped by {sig.name}"
    assert signal.getsignal(sig) == before  # restored on the way out


def test_a_stopped_run_is_unjudged_with_one_junit_error(tmp_path, capsys):
    run_dir = tmp_path / "steady"
    shutil.copytree(FIXTURES / "steady", run_dir)
    state = json.loads((run_dir / "run_state.json").read_text())
    state.update(interrupted=True, error="stopped by SIGTERM: processes stopped, partial results kept")
    (run_dir / "run_state.json").write_text(json.dumps(state))
    assert main(["check", str(run_dir)]) == 3  # unjudged: judged again, a stopped run still decides nothing
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] == "unjudged" and result["unjudged_reason"].startswith("stopped by SIGTERM")
    assert result["checks"] == [] and result["counts"]["delivered_unique"] > 0  # figures kept, no check judged
    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    assert suite.get("errors") == "1" and suite.get("failures") == "0"
    errors = suite.findall("testcase/error")
    assert len(errors) == 1 and "stopped by SIGTERM" in errors[0].get("message")
    assert "stopped by SIGTERM" in capsys.readouterr().out


def test_a_failed_query_whose_driver_is_still_stopping_counts_as_gone(tmp_path):
    """The driver records `failed`, then takes its time stopping Spark: the run must not wait for the process to
    end (the producers would go on meanwhile), the query is gone."""
    import sys

    from harness.files import atomic
    from harness.spark.process import SparkQueryProcess

    with Supervisor("t-watch") as sup:
        q = SparkQueryProcess(tmp_path / "run", sup, source=None, master="local[1]", conf={}, trigger={})
        q.child = sup.spawn("spark-query", [sys.executable, "-c", "import time; time.sleep(60)"])
        atomic.write_json(q.status_path, {"state": "started"})
        assert q.watch() == "running"
        atomic.write_json(q.status_path, {"state": "failed", "error": "[STREAM_FAILED] java.io.IOException: "
                                                                     "No space left on device"})
        assert q.watch() == "failed"
        sup.stop(q.child, timeout=1)
