"""JVM classpaths from Maven Central, resolved by the poms kept beside this file and cached outside git.

Each classpath is one directory `<cache>/jvm/<name>-<hash of pom+settings>/` filled by Maven's
`dependency:copy-dependencies`; changing a pom changes the hash, so a stale cache is never reused. When no `mvn`
is on PATH, Maven itself is fetched from Maven Central (checksum verified) into the cache.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tarfile
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from harness.paths import cache_dir, pyspark_home

HERE = Path(__file__).resolve().parent
SETTINGS = HERE / "settings.xml"
CENTRAL = "https://repo.maven.apache.org/maven2"
MAVEN_VERSION = "3.9.9"
KAFKA_BROKER, SPARK_KAFKA = "kafka-broker", "spark-kafka"  # the artifact sets, one pom each
CLASSPATHS = (KAFKA_BROKER, SPARK_KAFKA)


class SetupError(RuntimeError):
    pass


@contextmanager
def _locked(name: str):
    lock_path = cache_dir() / f".{name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def maven() -> str:
    """Path of an `mvn` to run: the one on PATH, else Maven fetched from Maven Central into the cache."""
    found = shutil.which("mvn")
    if found:
        return found
    home = cache_dir() / f"apache-maven-{MAVEN_VERSION}"
    mvn = home / "bin" / "mvn"
    if mvn.exists():
        return str(mvn)
    with _locked("maven"):
        if mvn.exists():
            return str(mvn)
        base = f"{CENTRAL}/org/apache/maven/apache-maven/{MAVEN_VERSION}/apache-maven-{MAVEN_VERSION}-bin.tar.gz"
        tgz = cache_dir() / f"apache-maven-{MAVEN_VERSION}-bin.tar.gz"
        try:
            urllib.request.urlretrieve(base, tgz)
            expected = urllib.request.urlopen(base + ".sha512", timeout=60).read().decode().split()[0]
        except OSError as exc:
            raise SetupError(f"cannot fetch Maven from Maven Central ({base}): {exc}") from exc
        digest = hashlib.sha512(tgz.read_bytes()).hexdigest()
        if digest != expected:
            tgz.unlink()
            raise SetupError(f"Maven download checksum mismatch for {base}")
        with tarfile.open(tgz) as tar:
            tar.extractall(cache_dir(), filter="data")
        tgz.unlink()
        mvn.chmod(0o755)
    return str(mvn)


def _key(name: str) -> str:
    h = hashlib.sha256()
    for path in (HERE / name / "pom.xml", SETTINGS):
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def classpath_dir(name: str) -> Path:
    return cache_dir() / "jvm" / f"{name}-{_key(name)}"


def resolve(name: str, quiet: bool = True) -> list[Path]:
    """Jars of one classpath (fetched once, then read from the cache)."""
    if name not in CLASSPATHS:
        raise SetupError(f"unknown classpath {name!r}; known: {', '.join(CLASSPATHS)}")
    out = classpath_dir(name)
    done = out / ".complete"
    if not done.exists():
        with _locked(f"jvm-{name}"):
            if not done.exists():
                _copy_dependencies(name, out, quiet)
    jars = sorted(out.glob("*.jar"))
    if name == "spark-kafka":
        jars = _not_in_pyspark(jars)
    return jars


def _copy_dependencies(name: str, out: Path, quiet: bool) -> None:
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    argv = [maven(), "-B", "-s", str(SETTINGS), "-f", str(HERE / name / "pom.xml"),
            "dependency:copy-dependencies", f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"]
    if quiet:
        argv.insert(2, "-q")
    proc = subprocess.run(argv, capture_output=quiet, text=True)
    if proc.returncode != 0:
        detail = (proc.stdout or "")[-3000:] if quiet else ""
        raise SetupError(f"Maven could not resolve {HERE / name / 'pom.xml'} (exit {proc.returncode}):\n{detail}")
    (tmp / ".complete").write_text("ok\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def _artifact(jar: Path) -> str:
    """`kafka-clients-3.9.2.jar` -> `kafka-clients` (the name without its version)."""
    parts = jar.stem.split("-")
    for i, part in enumerate(parts):
        if part[:1].isdigit():
            return "-".join(parts[:i])
    return jar.stem


def _not_in_pyspark(jars: list[Path]) -> list[Path]:
    """Spark already ships Scala, Hadoop, slf4j...: add only what it lacks, or two versions would fight."""
    shipped = {_artifact(j) for j in (pyspark_home() / "jars").glob("*.jar")}
    return [j for j in jars if _artifact(j) not in shipped]


def setup_all(quiet: bool = True) -> dict[str, list[Path]]:
    return {name: resolve(name, quiet) for name in CLASSPATHS}
