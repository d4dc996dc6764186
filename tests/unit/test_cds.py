"""harness.jvm.cds: class archives for the JVMs the harness starts. A missing, torn or foreign archive must never
break a JVM (it starts without one), an archive is only kept when a real JVM maps it, and the key changes with
the jars and the JDK so a stale archive is never handed out."""
from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from harness.jvm import cds
from harness.jvm.artifacts import resolve


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(cds, "cache_dir", lambda: tmp_path)
    monkeypatch.delenv(cds.CDS_ENV, raising=False)
    return tmp_path


def _jar(path, size: int):
    path.write_bytes(b"x" * size)
    return str(path)


def _torn_archive(path):
    """The magic number of a dynamic archive, then noise: what a JVM killed while writing could leave."""
    path.write_bytes(cds.DYNAMIC_MAGIC.to_bytes(4, "little") + os.urandom(64 * 1024))


def test_key_follows_the_jars_and_the_jdk_and_nothing_else(tmp_path):
    jar = _jar(tmp_path / "a.jar", 10)
    first = cds.key("broker", [jar, ""], java="jdk 17.0.15")
    assert cds.key("broker", [jar], java="jdk 17.0.15") == first  # an empty entry is no entry
    assert cds.key("broker", [jar], java="jdk 17.0.16") != first
    assert cds.key("driver", [jar], java="jdk 17.0.15") != first
    (tmp_path / "libs").mkdir()
    wild = f"{tmp_path / 'libs'}/*"
    before = cds.key("broker", [wild], java="j")
    _jar(tmp_path / "libs" / "b.jar", 5)  # a jar added where the classpath takes every jar
    assert cds.key("broker", [wild], java="j") != before
    _jar(tmp_path / "a.jar", 11)
    assert cds.key("broker", [jar], java="jdk 17.0.15") != first


def test_no_archive_yet_means_this_jvm_writes_one_at_its_exit(cache):
    opts, dump = cds.options("broker", ["/x.jar"])
    assert dump is not None and dump.parent == cache / "cds"
    assert opts == [f"-XX:ArchiveClassesAtExit={dump}"]
    assert cds.final_path(dump) == cds.archive_path("broker", ["/x.jar"])
    assert str(os.getpid()) in dump.name  # whose it is: deleted once that process is gone


def test_an_archive_in_place_is_used(cache):
    archive = cds.archive_path("broker", ["/x.jar"])
    archive.parent.mkdir(parents=True)
    _torn_archive(archive)  # looks like one: the JVM itself decides whether it maps
    assert cds.options("broker", ["/x.jar"]) == ([f"-XX:SharedArchiveFile={archive}"], None)


def test_a_file_that_is_no_archive_is_removed_and_made_again(cache):
    archive = cds.archive_path("broker", ["/x.jar"])
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"not an archive" * 1000)
    opts, dump = cds.options("broker", ["/x.jar"])
    assert not archive.exists() and dump is not None and opts[0].startswith("-XX:ArchiveClassesAtExit=")


def test_off_switch(cache, monkeypatch):
    monkeypatch.setenv(cds.CDS_ENV, "0")
    assert cds.options("broker", ["/x.jar"]) == ([], None)


def test_abandoned_dumps_are_deleted_live_ones_kept(cache):
    archive = cds.archive_path("broker", ["/x.jar"])
    archive.parent.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = archive.with_name(f"{archive.name}.{dead.pid}.{uuid.uuid4().hex[:8]}{cds.TMP_SUFFIX}")
    mine = archive.with_name(f"{archive.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{cds.TMP_SUFFIX}")
    gone.write_bytes(b"x")
    mine.write_bytes(b"x")
    cds.clean_abandoned(archive)
    assert not gone.exists() and mine.exists()


def test_a_torn_dump_is_not_kept(cache):
    _, dump = cds.options("broker", ["/x.jar"])
    _torn_archive(dump)
    assert cds.promote(dump, ["/x.jar"]) is False
    assert not dump.exists() and not cds.final_path(dump).exists()
    assert cds.promote(None, []) is False  # CDS off or an archive used: nothing to keep


def _kafka_classpath() -> str:
    return os.pathsep.join(str(j) for j in resolve("kafka-broker"))


def test_a_real_jvm_makes_an_archive_then_maps_it_and_runs_despite_a_torn_one(cache):
    """The JDK on PATH, Kafka's own jars: a JVM given ArchiveClassesAtExit writes a file promote keeps (mapped
    with sharing required); the next JVM maps it; a torn file in its place does not stop a JVM from running."""
    cp = _kafka_classpath()
    run = ["kafka.tools.StorageTool", "random-uuid"]
    opts, dump = cds.options("storage-tool-test", [cp])
    first = subprocess.run(["java", *opts, "-cp", cp, *run], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert cds.promote(dump, [cp]) is True
    archive = cds.archive_path("storage-tool-test", [cp])
    assert archive.exists() and not dump.exists()
    opts, dump = cds.options("storage-tool-test", [cp])
    assert dump is None
    shared = subprocess.run(["java", "-Xshare:on", *opts, "-Xlog:class+load=info", "-cp", cp, *run],
                            capture_output=True, text=True, timeout=120)
    assert shared.returncode == 0, shared.stdout[-2000:]
    assert "source: shared objects file (top)" in shared.stdout  # Kafka's classes came from the archive

    os.chmod(archive, 0o644)
    _torn_archive(archive)
    opts, dump = cds.options("storage-tool-test", [cp])
    assert dump is None  # handed out: it looks like one
    torn = subprocess.run(["java", *opts, "-cp", cp, *run], capture_output=True, text=True, timeout=120)
    assert torn.returncode == 0, torn.stderr
    assert len(torn.stdout.strip()) == 22  # a Kafka uuid, printed by a JVM that ran without the archive


def test_only_the_most_recently_used_archives_of_a_role_are_kept(cache):
    """Every clone and JDK makes archives of 20-200 MB: past KEEP_PER_ROLE per role the least recently used go,
    the other roles' stay, and using an archive makes it recent."""
    (cache / "cds").mkdir()
    made = []
    for i in range(5):  # driver archives last used 100, 200, ... 500 s ago
        path = cache / "cds" / f"spark-driver-{i:016x}.jsa"
        _torn_archive(path)
        os.utime(path, (1_000_000 - 100 * (i + 1),) * 2)
        made.append(path)
    broker = cache / "cds" / f"kafka-broker-{7:016x}.jsa"
    _torn_archive(broker)
    os.utime(broker, (1, 1))  # the oldest of all, but the only one of its role
    cds._touch(made[4])  # the oldest driver archive is used now
    kept = cache / "cds" / f"spark-driver-{9:016x}.jsa"
    _torn_archive(kept)
    gone = cds.prune(kept, keep=3)
    assert sorted(gone) == sorted(made[1:4])
    assert {p.name for p in (cache / "cds").glob("*.jsa")} == {kept.name, made[0].name, made[4].name, broker.name}
    assert cds.role_of(broker) == "kafka-broker" and cds.role_of(kept) == "spark-driver"
