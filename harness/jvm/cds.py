"""Class Data Sharing (CDS) archives for the JVMs the harness starts: the Kafka broker (and its storage tool) and
the Spark driver. Why: on two cores a JVM's start-up is CPU spent parsing and verifying the same ~10,000 classes
every run (the driver's session took 5-6.5 s, its first parquet write 3.5-4 s; with an archive 3-4 s and 1.5-2 s).
An archive maps the classes already parsed; it changes class loading only, not the JIT nor anything the JVM does
once loaded, so the system under test stays what a user runs.

Java 17's dynamic archives: the first JVM of a kind runs with `-XX:ArchiveClassesAtExit=<private temp file>` and
writes the classes it loaded when it exits normally; whoever saw it exit calls `promote`, which maps the file once
with `-Xshare:on -XX:+VerifySharedSpaces` (a torn or foreign file fails there and is deleted) and renames it into
place. Later JVMs get `-XX:SharedArchiveFile=<archive>` (sharing "auto": a JVM that cannot map it, e.g. another
JDK, runs without it, silently). Archives live outside git under `<cache>/cds/`, keyed by the role, the JDK
(its `release` file) and every classpath entry (path, size, mtime): a new jar set or JDK is a new archive, so a
stale one is never used. `HARNESS_CDS=0` turns all of it off (`harness bench startup`'s reference).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import uuid
from pathlib import Path

from harness.files.paths import cache_dir, switched_off

CDS_ENV = "HARNESS_CDS"  # "0": no archive used or made
DYNAMIC_MAGIC = 0xF00BABA8  # the first u4 of a Java 17 dynamic archive's header (CDS_DYNAMIC_ARCHIVE_MAGIC)
TMP_SUFFIX = ".dumping"  # <archive>.<pid>.<uuid>.dumping: a JVM writing it at its exit
KEEP_PER_ROLE = 3  # archives kept per role, the most recently used: each is 20-200 MB, and every clone (its own
# venv, so its own PySpark jars' paths) or JDK makes new ones


def enabled() -> bool:
    return not switched_off(CDS_ENV)


def java_identity(java: str = "java") -> str:
    """What identifies the JDK a `java` on PATH runs: its home's `release` file (JAVA_VERSION, build), else the
    resolved binary's path, size and mtime."""
    found = shutil.which(java)
    if not found:
        return "no-java"
    binary = Path(found).resolve()
    release = binary.parent.parent / "release"
    try:
        return f"{binary}\n{release.read_text()}"
    except OSError:
        st = binary.stat()
        return f"{binary} {st.st_size} {st.st_mtime_ns}"


def _expand(entry: str) -> list[Path]:
    """A classpath entry as the files it stands for (`dir/*`: the jars in it, as the JVM expands it)."""
    if entry.endswith("*"):
        return sorted(Path(entry[:-1]).glob("*.jar"))
    return [Path(entry)]


def key(role: str, classpath: list[str], java: str | None = None) -> str:
    h = hashlib.sha256(role.encode())
    h.update((java if java is not None else java_identity()).encode())
    for entry in filter(None, classpath):
        h.update(f"\0{entry}".encode())
        for path in _expand(entry):
            try:
                st = path.stat()
                h.update(f"|{path}|{st.st_size}|{st.st_mtime_ns}".encode())
            except OSError:
                h.update(f"|{path}|missing".encode())
    return h.hexdigest()[:16]


def archives_dir() -> Path:
    return cache_dir() / "cds"


def archive_path(role: str, classpath: list[str], java: str | None = None) -> Path:
    return archives_dir() / f"{role}-{key(role, classpath, java)}.jsa"


def remove_archives() -> list[Path]:
    """Delete every archive made so far (`*.jsa` in archives_dir()); returns them. The next JVM of each kind runs
    without one and makes it again, as in a new virtualenv (its own PySpark jars: new keys) or after a JDK update
    (`harness bench verdicts --cold`). Dumps a JVM is writing (`*.dumping`) and the rest of the cache stay; a JVM
    running on a deleted archive keeps its mapping."""
    removed = []
    for path in sorted(archives_dir().glob("*.jsa")):
        try:
            path.unlink()
        except FileNotFoundError:  # another process's prune got there first
            continue
        removed.append(path)
    return removed


def looks_valid(path: Path) -> bool:
    """Cheap check before handing an archive to a JVM: a dynamic archive's magic number and a plausible size."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
        return len(head) == 4 and int.from_bytes(head, "little") == DYNAMIC_MAGIC and path.stat().st_size > 4096
    except OSError:
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_abandoned(archive: Path) -> None:
    """Temp dumps of `archive` whose process is gone (killed before promoting): each may be 100+ MB."""
    for tmp in archive.parent.glob(f"{archive.name}.*{TMP_SUFFIX}"):
        try:
            pid = int(tmp.name[len(archive.name) + 1:].split(".", 1)[0])
        except ValueError:
            pid = -1
        if pid <= 0 or not _pid_alive(pid):
            tmp.unlink(missing_ok=True)


def options(role: str, classpath: list[str], owner_pid: int | None = None) -> tuple[list[str], Path | None]:
    """The JVM options for a JVM of `role` on `classpath`, and the temp file it will dump into (None when it uses
    an archive, or CDS is off). `owner_pid`: the process that will call `promote` (this one by default); its temp
    dump is deleted by a later call once that process is gone. A file at the archive's place that is not an
    archive is removed and made again."""
    if not enabled():
        return [], None
    archive = archive_path(role, classpath)
    archive.parent.mkdir(parents=True, exist_ok=True)
    if archive.exists():
        if looks_valid(archive):
            _touch(archive)
            return [f"-XX:SharedArchiveFile={archive}"], None
        archive.unlink(missing_ok=True)
    clean_abandoned(archive)
    tmp = archive.with_name(f"{archive.name}.{owner_pid or os.getpid()}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
    return [f"-XX:ArchiveClassesAtExit={tmp}"], tmp


def final_path(tmp: Path) -> Path:
    """The archive a temp dump becomes."""
    return tmp.with_name(tmp.name.split(".jsa.", 1)[0] + ".jsa")


def verify(archive: Path, classpath: list[str], java: str = "java", timeout: float = 60.0) -> bool:
    """True when a JVM on `classpath` maps `archive` with sharing required and its checksums verified."""
    try:
        proc = subprocess.run([java, "-Xshare:on", "-XX:+VerifySharedSpaces", f"-XX:SharedArchiveFile={archive}",
                               "-cp", os.pathsep.join(filter(None, classpath)), "-version"],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def promote(tmp: Path | None, classpath: list[str]) -> bool:
    """After the JVM given `tmp` exited: keep its dump as the archive when a JVM maps it; else delete it. True
    when an archive was made."""
    if tmp is None or not tmp.exists():
        return False
    final = final_path(tmp)
    try:
        if looks_valid(tmp) and verify(tmp, classpath):
            os.replace(tmp, final)
            prune(final)
            return True
    finally:
        tmp.unlink(missing_ok=True)
    return False


def _touch(archive: Path) -> None:
    """Its modification time is when it was last used: what `prune` keeps the newest of."""
    try:
        os.utime(archive)
    except OSError:
        pass


def role_of(archive: Path) -> str:
    """`spark-driver-56af76cf78008552.jsa` -> `spark-driver` (archive_path's name, the key cut off)."""
    return archive.name[:-len(".jsa")].rsplit("-", 1)[0]


def prune(kept: Path, keep: int = KEEP_PER_ROLE) -> list[Path]:
    """Delete the archives of `kept`'s role beyond the `keep` most recently used (`kept` always stays); returns
    them. A JVM running on a deleted archive keeps its mapping: deleting never disturbs a run."""
    role = role_of(kept)
    same = [p for p in kept.parent.glob("*.jsa") if role_of(p) == role and p != kept]
    same.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0.0, reverse=True)
    gone = same[max(0, keep - 1):]
    for path in gone:
        path.unlink(missing_ok=True)
    return gone
