"""What a run directory's files say, and what they never say: written with the process umask (readable by
colleagues and artifact servers), a full disk named on stderr and no empty or partial file left, a torn JSON
line recorded (result.json `unreadable` and the report) instead of silently dropped, `harness report` refusing a
result.json that is not one, and `--out` refused when it holds an earlier run (replaced only when asked, and only
when it is the harness's own output)."""
import errno
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from harness.files import atomic, outdir
from harness.cli import main
from harness.errors import InputError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_results_are_written_with_the_process_umask(tmp_path, umask):
    atomic.write_text(tmp_path / "a.txt", "x")
    assert _mode(tmp_path / "a.txt") == 0o644  # not mkstemp's 0600
    umask(0o027)
    atomic.write_json(tmp_path / "b.json", {"x": 1})
    assert _mode(tmp_path / "b.json") == 0o640
    atomic.write_text(tmp_path / "key", "secret", mode=0o600)  # a private file asks for it
    assert _mode(tmp_path / "key") == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.json", "key"]  # no temporary file left


def test_a_rejudged_run_writes_every_result_file_readable_by_others(tmp_path, umask):
    run_dir = tmp_path / "steady"
    shutil.copytree(FIXTURES / "steady", run_dir)
    assert main(["check", str(run_dir)]) == 0
    for name in ("result.json", "junit.xml", "summary.md", "report.md", "report.html", "series.json",
                 "producers/per_second.json"):
        assert _mode(run_dir / name) == 0o644, name


def test_a_failed_write_leaves_no_partial_file_and_names_the_cause(tmp_path, monkeypatch):
    (tmp_path / "r.json").write_text('{"old": true}\n')

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(OSError, match=f"no space left on device under {tmp_path}") as caught:
        atomic.write_json(tmp_path / "r.json", {"new": True})
    assert caught.value.errno == errno.ENOSPC
    assert (tmp_path / "r.json").read_text() == '{"old": true}\n'  # the earlier file stands, whole
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def _full_disk(where: Path) -> Path | None:
    """A tiny tmpfs mounted at `where` (root only), or None where mounting is not allowed."""
    where.mkdir()
    if os.geteuid() != 0:
        return None
    pages = sum(-(-p.stat().st_size // 4096) + 1 for p in (FIXTURES / "steady").rglob("*"))  # tmpfs: 4 KiB pages
    size_kb = 4 * pages + 256
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(where)],
                          capture_output=True)
    return where if done.returncode == 0 else None


def test_check_on_a_full_disk_says_so_and_leaves_no_empty_file(tmp_path, monkeypatch, capsys):
    """Real ENOSPC on a tiny tmpfs where the test may mount one; else the atomic writer's fsync raises it."""
    mount = _full_disk(tmp_path / "disk")
    try:
        run_dir = (mount or tmp_path / "disk") / "steady"
        shutil.copytree(FIXTURES / "steady", run_dir)
        (run_dir / "result.json").write_text(json.dumps({"scenario": "steady", "backend": "kafka",
                                                          "verdict": "pass"}))
        if mount is not None:
            with open(mount / "filler", "wb", buffering=0) as f:  # the rest of the disk taken
                try:
                    while True:
                        f.write(b"\0" * 65536)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
        else:
            monkeypatch.setattr(atomic.os, "fsync", lambda fd: (_ for _ in ()).throw(
                OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
        before = {p for p in run_dir.rglob("*") if p.is_file() and p.stat().st_size == 0}
        assert main(["check", str(run_dir)]) == 1
        err = capsys.readouterr().err
        assert f"writing the results in {run_dir} failed" in err and "no space left on device under" in err
        empty = {p for p in run_dir.rglob("*") if p.is_file() and p.stat().st_size == 0}
        assert empty == before  # no 0-byte judge-error.txt (nor any other)
        assert not list(run_dir.rglob("*.tmp"))
        assert json.loads((run_dir / "result.json").read_text())["verdict"] == "pass"  # the old one, whole
    finally:
        if mount is not None:
            subprocess.run(["umount", str(mount)], check=True)


def test_a_torn_progress_file_and_ack_log_are_said_in_the_result_and_the_report(tmp_path, capsys):
    run_dir = tmp_path / "steady"
    shutil.copytree(FIXTURES / "steady", run_dir)
    progress = run_dir / "progress.jsonl"
    lines = progress.read_bytes().split(b"\n")[:-1]
    garbled = lines[:3] + [b"\xff\xfe garbage", b"[1, 2]"] + lines[3:] + [lines[-1][:25]]  # torn last line
    progress.write_bytes(b"\n".join(garbled))
    acks = run_dir / "producers" / "acks-0.arrows"
    acks.write_bytes(acks.read_bytes()[:-10])  # the end-of-stream mark and the last batch's end gone
    main(["check", str(run_dir)])
    out = capsys.readouterr().out
    result = json.loads((run_dir / "result.json").read_text())
    torn = [u for u in result["unreadable"] if u["file"] == "progress.jsonl"]
    assert len(torn) == 1 and torn[0]["count"] == 3 and torn[0]["lines"] == [4, 5, len(garbled)]
    assert "the last one torn" in torn[0]["detail"]
    assert "unreadable progress.jsonl: 3 of" in out
    (ack,) = [u for u in result["unreadable"] if u["file"] == "producers/acks-0.arrows"]
    assert "a torn last batch" in ack["detail"] and "unreadable producers/acks-0.arrows" in out
    assert "progress.jsonl" in (run_dir / "report.md").read_text().split("Unreadable, left out")[1]


@pytest.mark.parametrize("content", ["", "{}", "null", '{"verdict": "pass"'])
def test_report_refuses_a_result_json_that_is_not_one(tmp_path, capsys, content):
    run_dir = tmp_path / "steady"
    shutil.copytree(FIXTURES / "steady", run_dir)
    (run_dir / "report.md").write_text("an older report\n")
    (run_dir / "result.json").write_text(content)
    assert main(["report", str(run_dir)]) == 2
    captured = capsys.readouterr()
    assert f"{run_dir / 'result.json'}: " in captured.err and "harness check" in captured.err
    assert captured.out == ""  # the older report is not listed as rebuilt
    assert (run_dir / "report.md").read_text() == "an older report\n"


# -- --out ------------------------------------------------------------------------------------------------------
def _earlier_run(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "scenario.json").write_text("{}")
    (path / "checkpoint").mkdir()
    (path / "checkpoint" / "offsets").write_text("old")
    return path


@pytest.mark.parametrize("command", [["run", "steady"], ["capacity", "steady"], ["soak", "soak"],
                                     ["run", "steady", "--repeat", "2"]])
def test_a_non_empty_out_is_refused_before_anything_starts(tmp_path, capsys, command):
    out = _earlier_run(tmp_path / "old")
    assert main([*command, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"--out {out}: not empty" in err and "--replace" in err and "scenario.json" in err
    assert (out / "checkpoint" / "offsets").read_text() == "old"


def test_replace_refuses_a_directory_the_harness_did_not_write(tmp_path, capsys):
    mine = tmp_path / "home"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    assert main(["run", "steady", "--out", str(mine), "--replace", "--quiet"]) == 2
    assert "--replace deletes only an earlier harness output directory" in capsys.readouterr().err
    assert (mine / "thesis.tex").read_text() == "precious"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["run", "steady", "--out", str(a_file), "--quiet"]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err


def test_replace_empties_an_earlier_run_only_once_the_scenario_is_good(tmp_path, capsys):
    out = _earlier_run(tmp_path / "old")
    assert main(["run", "steady", "--out", str(out), "--replace", "--set", "seed=\"x\"", "--quiet"]) == 2
    assert (out / "checkpoint" / "offsets").read_text() == "old"  # a bad scenario deletes nothing
    outdir.prepare(out, replace=True)
    assert out.is_dir() and list(out.iterdir()) == []
    outdir.check(out)  # empty: fine without --replace
    with pytest.raises(InputError, match="not empty"):
        outdir.check(_earlier_run(tmp_path / "again"))


def test_a_relative_out_becomes_an_absolute_run_directory(tmp_path, monkeypatch):
    """The run's processes (the Spark driver, a sweep's runs) do not share the command's working directory: a
    relative `--out` left the driver looking for its job file elsewhere, and the query never started."""
    from harness.runner import new_run_dir

    monkeypatch.chdir(tmp_path)
    got = new_run_dir("steady", Path("mine") / "run")
    assert got == tmp_path / "mine" / "run" and got.is_absolute() and got.is_dir()
