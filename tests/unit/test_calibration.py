"""A bench's calibration kept in the cache and copied into each run directory when the run starts, so the run
reads the same when moved or copied, whatever the cache holds by then."""
import json

from harness.records import calibration


def test_a_run_keeps_the_calibration_it_started_with(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    run.mkdir()
    assert calibration.record(run) == {} and calibration.read(run, calibration.eh_producers("partition_id")) is None
    name = calibration.eh_producers("partition_id")
    calibration.save(name, {"us_per_event": 92.0, "measured_at": "2026-11-28"})
    (calibration.directory() / "torn.json").write_text('{"us_per')  # unreadable: left out, not fatal
    calibration.record(run)
    calibration.save(name, {"us_per_event": 50.0, "measured_at": "2026-12-01"})
    assert calibration.read(run, name) == {"us_per_event": 92.0, "measured_at": "2026-11-28"}
    assert set(json.loads((run / "calibration.json").read_text())) == {"eh-producers-partition_id"}
