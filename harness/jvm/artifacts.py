"""JVM classpaths from Maven Central (or a team's own mirror), resolved by the poms kept beside this file and cached
outside git.

Each classpath is one directory `<cache>/jvm/<name>-<hash of pom+settings>/` filled by Maven's
`dependency:copy-dependencies`; changing a pom changes the hash, so a stale cache is never reused. When no `mvn`
is on PATH, Maven itself is fetched (checksum verified) into the cache.

Where from (`source`), first that applies:
- `HARNESS_MAVEN_MIRROR` (a URL: Artifactory, Nexus, any repository laid out as Maven Central): every artifact
  through it, with `HARNESS_MAVEN_USERNAME` / `HARNESS_MAVEN_PASSWORD` when it needs a sign-in. The settings file
  Maven is given names them as `${env.…}`, which Maven reads from its environment: a credential is never
  written;
- the user's own `~/.m2/settings.xml` when it declares a `<mirror>` (a team's usual set-up);
- else Maven Central only (settings.xml here: Spark's parent pom names other repositories the harness must not
  depend on).
The source is not part of the cache key: the same jars from a mirror are the same jars. So `harness setup` fills
the cache once, and runs after it need no network at all, the mirror unreachable or not (a run only reads the
cache: Maven runs only for a classpath not there yet).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from harness.errors import InputError
from harness.files.paths import cache_dir, pyspark_home

HERE = Path(__file__).resolve().parent
SETTINGS = HERE / "settings.xml"
CENTRAL = "https://repo.maven.apache.org/maven2"
MAVEN_VERSION = "3.9.9"
KAFKA_BROKER, SPARK_KAFKA = "kafka-broker", "spark-kafka"  # the artifact sets, one pom each
# Spark's Kafka source built for the older PySpark lines a query may run on (harness.spark.runtimes)
SPARK_KAFKA_35, SPARK_KAFKA_40 = "spark-kafka-3.5", "spark-kafka-4.0"
HADOOP_AWS = "hadoop-aws"  # S3A, for a checkpoint on an S3 store (harness.objstore): fetched when a run needs it
PROJECT_CLASSPATHS = (KAFKA_BROKER, SPARK_KAFKA)  # what every run may need: `harness setup` fetches these
CLASSPATHS = (*PROJECT_CLASSPATHS, SPARK_KAFKA_35, SPARK_KAFKA_40, HADOOP_AWS)
# sets that go on a Spark driver's classpath beside the jars its PySpark ships: those are left out of them
SPARK_SETS = (SPARK_KAFKA, SPARK_KAFKA_35, SPARK_KAFKA_40, HADOOP_AWS)


MIRROR_ENV, USERNAME_ENV, PASSWORD_ENV = "HARNESS_MAVEN_MIRROR", "HARNESS_MAVEN_USERNAME", "HARNESS_MAVEN_PASSWORD"
MIRROR_ID = "harness-mirror"


class SetupError(RuntimeError):
    pass


class MirrorSettingError(SetupError, InputError):
    """A mirror setting in the environment that cannot work: bad input (exit 2), said before Maven starts."""


@dataclass(frozen=True)
class Source:
    """Where Maven fetches from: `what` in words (for messages), the repository URL the Maven download comes from
    when no `mvn` is installed, and the settings text to give Maven (None: the file at `settings_path`)."""
    what: str
    base_url: str
    settings_text: str | None = None
    settings_path: Path | None = None


def _mirror_settings(url: str, signed_in: bool) -> str:
    server = (f"  <servers>\n    <server>\n      <id>{MIRROR_ID}</id>\n"
              f"      <username>${{env.{USERNAME_ENV}}}</username>\n"
              f"      <password>${{env.{PASSWORD_ENV}}}</password>\n    </server>\n  </servers>\n"
              if signed_in else "")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<!-- written by harness.jvm.artifacts from ${MIRROR_ENV}; credentials stay in the environment -->\n"
            '<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">\n' + server +
            f"  <mirrors>\n    <mirror>\n      <id>{MIRROR_ID}</id>\n      <mirrorOf>*</mirrorOf>\n"
            f"      <url>{url}</url>\n    </mirror>\n  </mirrors>\n</settings>\n")


def source(environ: Mapping[str, str] | None = None, user_settings: Path | None = None) -> Source:
    """Where the jars come from (the module's docstring); SetupError for a mirror setting that cannot work."""
    environ = os.environ if environ is None else environ
    user_settings = Path.home() / ".m2" / "settings.xml" if user_settings is None else user_settings
    url = (environ.get(MIRROR_ENV) or "").strip()
    if url:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise MirrorSettingError(f"${MIRROR_ENV}: a repository URL, http(s)://host/path (laid out as Maven "
                                     f"Central), got {url!r}")
        if parsed.username or parsed.password:
            raise MirrorSettingError(f"${MIRROR_ENV}: no credentials in the URL; give them in ${USERNAME_ENV} and "
                                     f"${PASSWORD_ENV} (read by Maven from the environment, never written)")
        user, password = environ.get(USERNAME_ENV), environ.get(PASSWORD_ENV)
        if bool(user) != bool(password):
            raise MirrorSettingError(f"${USERNAME_ENV} and ${PASSWORD_ENV} go together: "
                                     f"{USERNAME_ENV if not user else PASSWORD_ENV} is not set")
        url = url.rstrip("/")
        return Source(f"the mirror {url} (${MIRROR_ENV})", url, settings_text=_mirror_settings(url, bool(user)))
    try:
        text = user_settings.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    if "<mirror>" in text:
        return Source(f"the mirror in {user_settings}", CENTRAL, settings_path=user_settings)
    return Source("Maven Central", CENTRAL, settings_path=SETTINGS)


@contextmanager
def _settings_file(src: Source):
    """The settings file for Maven's `-s`: the source's own, or its text in a private file removed afterwards."""
    if src.settings_text is None:
        yield src.settings_path
        return
    fd, name = tempfile.mkstemp(prefix="maven-settings-", suffix=".xml", dir=cache_dir())
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(src.settings_text)
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


@contextmanager
def locked(name: str):
    """One builder at a time of a thing in the cache (`name`), across processes: the others wait for it, then find
    it made."""
    lock_path = cache_dir() / f".{name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def maven(src: Source | None = None) -> str:
    """Path of an `mvn` to run: the one on PATH, else Maven fetched from the source's repository into the cache."""
    found = shutil.which("mvn")
    if found:
        return found
    home = cache_dir() / f"apache-maven-{MAVEN_VERSION}"
    mvn = home / "bin" / "mvn"
    if mvn.exists():
        return str(mvn)
    with locked("maven"):
        if mvn.exists():
            return str(mvn)
        src = src or source()
        base = (f"{src.base_url}/org/apache/maven/apache-maven/{MAVEN_VERSION}/"
                f"apache-maven-{MAVEN_VERSION}-bin.tar.gz")
        tgz = cache_dir() / f"apache-maven-{MAVEN_VERSION}-bin.tar.gz"
        try:
            urllib.request.urlretrieve(base, tgz)
            expected = urllib.request.urlopen(base + ".sha512", timeout=60).read().decode().split()[0]
        except OSError as exc:
            raise SetupError(f"cannot fetch Maven from {src.what} ({base}): {exc}") from exc
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


def resolved(name: str) -> bool:
    """Whether the classpath is in the cache (resolve then runs no Maven)."""
    return (classpath_dir(name) / ".complete").exists()


def resolve(name: str, quiet: bool = True, spark_jars: Path | None = None) -> list[Path]:
    """Jars of one classpath (fetched once, then read from the cache). A set that goes on a Spark driver's
    classpath is given without what that Spark ships already: `spark_jars` is its jars/ directory, the project's
    PySpark's by default (another PySpark line's for a query run on it, harness.spark.runtimes)."""
    if name not in CLASSPATHS:
        raise SetupError(f"unknown classpath {name!r}; known: {', '.join(CLASSPATHS)}")
    out = classpath_dir(name)
    done = out / ".complete"
    if not done.exists():
        with locked(f"jvm-{name}"):
            if not done.exists():
                _copy_dependencies(name, out, quiet)
    jars = sorted(out.glob("*.jar"))
    if name in SPARK_SETS:
        jars = _not_in_pyspark(jars, spark_jars or pyspark_home() / "jars")
    return jars


def _copy_dependencies(name: str, out: Path, quiet: bool) -> None:
    src = source()
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with _settings_file(src) as settings:
        argv = [maven(src), "-B", "-s", str(settings), "-f", str(HERE / name / "pom.xml"),
                "dependency:copy-dependencies", f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"]
        if quiet:
            argv.insert(2, "-q")
        proc = subprocess.run(argv, capture_output=quiet, text=True)
    if proc.returncode != 0:
        detail = (proc.stdout or "")[-3000:] if quiet else ""
        raise SetupError(f"Maven could not resolve {HERE / name / 'pom.xml'} from {src.what} "
                         f"(exit {proc.returncode}):\n{detail}")
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


def _not_in_pyspark(jars: list[Path], spark_jars: Path) -> list[Path]:
    """Spark already ships Scala, Hadoop, slf4j...: add only what it lacks (its jars in `spark_jars`), or two
    versions would fight."""
    shipped = {_artifact(j) for j in spark_jars.glob("*.jar")}
    return [j for j in jars if _artifact(j) not in shipped]


def setup_all(quiet: bool = True) -> dict[str, list[Path]]:
    """The project's own sets (an older PySpark line's are fetched when it is prepared: harness.spark.runtimes)."""
    return {name: resolve(name, quiet) for name in PROJECT_CLASSPATHS}
