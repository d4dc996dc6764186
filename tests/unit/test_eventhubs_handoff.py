"""handoff.py: a partition's owner among sibling processes serves another's range over its abstract socket, with
the statistics and errors of its own read; a process that is not a sibling (another parent) is refused both ways.

Real sockets and real processes (two siblings started by this test, so their common parent is this process); the
"read" the owner serves is a plain generator, the Event Hubs side being covered by the integration tests.
"""
import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from harness.backends.eventhubs.spark_source import handoff

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract sockets: Linux only")

OWNER = textwrap.dedent("""
    import sys, time, pyarrow as pa
    from harness.backends.eventhubs.spark_source import handoff
    from harness.backends.eventhubs.spark_source.offsets import Range

    def serve(options, rng, stats):
        stats.reused = 1
        if rng.start < 0:
            raise ValueError(f"no such range {rng.start} ({options['tag']})")
        for lo in range(rng.start, rng.end, 3):
            yield pa.record_batch([pa.array(list(range(lo, min(lo + 3, rng.end))))], names=["seq"])
        stats.rows = rng.end - rng.start

    assert handoff.claim(("ns", "hub", "$default", "0"), serve)
    assert handoff.claim(("ns", "hub", "$default", "0"), serve)  # already ours
    print("owning", flush=True)
    time.sleep(float(sys.argv[1]))
""")

TASK = textwrap.dedent("""
    import json, sys
    from harness.backends.eventhubs.spark_source import handoff
    from harness.backends.eventhubs.spark_source.offsets import Range
    from harness.backends.eventhubs.spark_source.receivers import TaskStats

    key = ("ns", "hub", "$default", "0")
    out = {"claim_taken": handoff.claim(key, lambda *a: iter(()))}
    sock = handoff.connect(key)
    out["connected"] = sock is not None
    stats = TaskStats()
    out["seqs"] = [s for b in handoff.fetch(sock, {"tag": "x"}, Range("0", 4, 11), stats)
                   for s in b.column("seq").to_pylist()]
    out["stats"] = [stats.reused, stats.rows, stats.served_by]
    try:
        list(handoff.fetch(handoff.connect(key), {"tag": "y"}, Range("0", -1, 2), TaskStats()))
    except ValueError as exc:
        out["error"] = str(exc)
    out["unowned"] = handoff.connect(("ns", "hub", "$default", "1")) is None
    print(json.dumps(out), flush=True)
""")


def test_a_sibling_serves_the_range_its_statistics_and_its_errors_and_others_are_refused():
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    owner = subprocess.Popen([sys.executable, "-c", OWNER, "30"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert owner.stdout.readline().strip() == "owning"
        task = subprocess.run([sys.executable, "-c", TASK], capture_output=True, text=True, timeout=60, env=env)
        assert task.returncode == 0, task.stderr
        out = json.loads(task.stdout)
        assert out["claim_taken"] is False  # the owner holds the name
        assert out["connected"] is True
        assert out["seqs"] == list(range(4, 11))  # 4..10 in batches of 3, in order
        assert out["stats"] == [1, 7, owner.pid]
        assert out["error"] == "no such range -1 (y)"
        assert out["unowned"] is True
        # this process is the siblings' parent, not a sibling: its own name for the partition is another one ...
        assert handoff.connect(("ns", "hub", "$default", "0")) is None
        # ... and dialling the siblings' name directly, neither end trusts the other: the owner hangs up unread
        name = handoff.address(("ns", "hub", "$default", "0")).replace(
            f"/{os.getppid()}/".encode(), f"/{os.getpid()}/".encode())
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.connect(name)
            assert handoff.trusted(raw) is False
            raw.settimeout(10)
            assert raw.recv(1) == b""
    finally:
        owner.kill()
        owner.wait()


def test_parent_of_reads_proc():
    assert handoff.parent_of(os.getpid()) == os.getppid()
    assert handoff.parent_of(2 ** 22 + 12345) is None  # above pid_max: no such process
