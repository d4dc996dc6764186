"""A full disk is named as the cause, from the texts Spark really writes: the query's error as the driver records
it (`[STREAM_FAILED] java.io.IOException: No space left on device`, captured from a PySpark 4 streaming query
whose sink and checkpoint sat on a full 1 MB tmpfs) and the driver log's stack trace; the directory named is the
fullest of those the error names."""
import shutil
from pathlib import Path

from harness.files import nospace

SPARK = Path(__file__).parent.parent / "fixtures" / "spark-errors"
QUERY_ERROR = (SPARK / "enospc-stream-failed.txt").read_text()
DRIVER_LOG = SPARK / "enospc-driver.log"


def test_a_real_spark_error_is_a_full_disk_under_the_directory_it_names(tmp_path, monkeypatch):
    assert nospace.says_no_space(QUERY_ERROR)
    # the error names the sink (FileSink[file:...]) and the checkpoint: where they lie here
    text = QUERY_ERROR.replace("/tmp/rundir/full", str(tmp_path / "run"))
    (tmp_path / "run" / "checkpoint").mkdir(parents=True)
    free = {str(tmp_path / "run" / "checkpoint"): 0}
    real = shutil.disk_usage
    monkeypatch.setattr(nospace.shutil, "disk_usage", lambda p: real(p)._replace(free=free.get(str(p),
                                                                                              real(p).free)))
    said = nospace.cause(tmp_path / "elsewhere", [text])
    assert said == f"no space left on device under {tmp_path / 'run' / 'checkpoint'} (0.0 MB free now)"


def test_the_driver_log_names_it_when_the_error_does_not(tmp_path):
    said = nospace.cause(tmp_path, ["RuntimeError: Spark query did not start: process exited"], [DRIVER_LOG])
    assert said is not None and said.startswith(f"no space left on device under {tmp_path}")


def test_other_failures_are_not_a_full_disk(tmp_path):
    other = ("[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] Some data may have been lost because they are not "
             "available in Kafka any more")
    log = tmp_path / "driver.log"
    log.write_text("WARN NativeCodeLoader: Unable to load native-hadoop library\n" * 50)
    assert nospace.cause(tmp_path, [other, None], [log, tmp_path / "absent.log"]) is None


def test_the_run_error_leads_with_the_full_disk(tmp_path):
    from types import SimpleNamespace

    from harness.runner import _with_cause

    (tmp_path / "spark").mkdir()
    shutil.copy(DRIVER_LOG, tmp_path / "spark" / "driver.log")
    error = "RuntimeError: Spark query did not start: process exited (see spark/driver.log)"
    said = _with_cause(SimpleNamespace(query=None, run_dir=tmp_path), error)
    assert said.startswith(f"no space left on device under {tmp_path}") and said.endswith(error)
    (tmp_path / "spark" / "driver.log").write_text("all well\n")
    assert _with_cause(SimpleNamespace(query=None, run_dir=tmp_path), error) == error


def test_a_nearly_full_disk_stops_the_run_naming_it(tmp_path):
    import pytest

    free = shutil.disk_usage(tmp_path).free
    nospace.check_free(tmp_path, min_free=0)
    with pytest.raises(nospace.DiskFull, match=f"no space left on device under {tmp_path} .*the run stopped"):
        nospace.check_free(tmp_path, min_free=free + 10**12)
