"""A run directory is self-contained: copied or moved, it re-judges the same from its own files, and a copy
missing a sink file fails on its own (lost events) instead of reading the original's.

The recorded steady run (tests/fixtures/runs/steady) is made "the original" by pointing its sink log at its own
files, as Spark wrote them (absolute paths where the run directory was); the copy and the move then sit elsewhere
while the original still exists, which is what let a copy read the original's files before."""
import json
import shutil
from pathlib import Path

from harness.cli import main

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"
WHERE_IT_LAY = "/tmp/fx/steady"  # where the recording was made (its log's paths)


def _original(tmp_path: Path) -> Path:
    run_dir = tmp_path / "original" / "steady"
    shutil.copytree(FIXTURES / "steady", run_dir)
    for log in (run_dir / "sink" / "_spark_metadata").iterdir():
        if log.name.isdigit():
            log.write_text(log.read_text().replace(WHERE_IT_LAY, str(run_dir)))
    listed = json.loads((run_dir / "sink" / "_spark_metadata" / "0").read_text().splitlines()[1])["path"]
    assert listed.startswith(f"file://{run_dir}/sink/")  # the log names the original's own files
    return run_dir


def _judged(run_dir: Path) -> tuple[int, dict]:
    code = main(["check", str(run_dir)])
    return code, json.loads((run_dir / "result.json").read_text())


def _figures(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in ("run_dir",)}


def test_a_copy_and_a_move_rejudge_the_same_and_a_copy_missing_a_file_fails_alone(tmp_path):
    original = _original(tmp_path)
    code, before = _judged(original)
    assert code == 0 and before["verdict"] == "pass" and before["counts"]["lost"] == 0
    assert before["unreadable"] == []

    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(original, copy)
    code, copied = _judged(copy)
    assert code == 0 and _figures(copied) == _figures(before)

    # a sink file deleted in the copy: the copy judges its own sink (events lost), never the original's file
    victim = sorted(copy.glob("sink/part-*.parquet"))[0]
    import pyarrow.parquet as pq

    rows = pq.read_table(victim).num_rows
    assert rows > 0
    victim.unlink()
    code, broken = _judged(copy)
    assert code == 1 and broken["verdict"] == "fail"
    assert broken["counts"]["lost"] == rows
    events = next(c for c in broken["checks"] if c["name"] == "no_loss")
    assert events["ok"] is False
    assert [u["file"] for u in broken["unreadable"]] == [f"sink/{victim.name}"]
    assert "not in this run directory's sink/" in broken["unreadable"][0]["detail"]

    # the original is untouched and still passes
    code, again = _judged(original)
    assert code == 0 and _figures(again) == _figures(before)

    # moved: the original's place is gone, the run directory judges the same where it is now
    moved = tmp_path / "moved" / "steady"
    moved.parent.mkdir()
    shutil.move(str(original), moved)
    code, after_move = _judged(moved)
    assert code == 0 and _figures(after_move) == _figures(before)
