"""What a run ran on, recorded when it runs (`environment.json` in the run directory, copied into result.json's
`environment`): the harness's own commit, the Java, Spark, Kafka and client versions, the machine's cores.

Figures from two runs are comparable only when these match, and a run judged again later (`harness check`, on
another machine, with other versions installed) must still say what it ran on, not what the judge has: so the
facts are taken at run time and read back, never recomputed at judge time.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

from harness.files import atomic
from harness.jvm.artifacts import KAFKA_BROKER, SPARK_KAFKA, classpath_dir
from harness.files.paths import REPO
from harness.version import version as package_version

FILE = "environment.json"
# what each key of environment.json says (its schema, harness.schema); keys a backend adds beside these are strings too
FIELDS = {
    "harness": "This harness: `git <describe>` from a checkout (`-dirty` with local edits), `package <version>` "
               "installed.",
    "python": "The Python version that ran the harness (and Spark's Python workers).",
    "pyspark": "The PySpark version (Spark's own version: its JVM came with it) the query ran on: the project's, or "
               "the older line spark.pyspark named (harness.spark.runtimes), the harness's own then said beside it.",
    "java": "The first line of `java -version`: the JVM that ran Spark and the broker.",
    "librdkafka (producers)": "The librdkafka the Kafka producers sent with (confluent-kafka's).",
    "kafka broker": "The broker's version where the harness knows it: the embedded broker's, a container's image, "
                    "or the kind of cluster.",
    "kafka-clients (Spark's connector)": "The Kafka client Spark's Kafka source and sink read and wrote with.",
    "cpu cores": "The cores the run could use (`nproc`), and the machine's count when that is more.",
    "platform": "The operating system and kernel (Python's platform.platform()).",
}


def harness_version() -> str:
    """`git describe` when the harness runs from a checkout (the commit, and `-dirty` with local edits); the
    installed package's version otherwise (a wheel has no git history)."""
    if (REPO / ".git").exists() and shutil.which("git"):
        try:
            out = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty", "--tags"],
                                 capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                return f"git {out.stdout.strip()}"
        except (OSError, subprocess.SubprocessError):
            pass
    number = package_version()
    return f"package {number}" if number else "unknown (neither a git checkout nor an installed package)"


def java_version(java: str = "java") -> str:
    """The first line `java -version` prints (the JVM that runs the broker and Spark: `java` on PATH)."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    lines = (out.stderr or out.stdout).strip().splitlines()
    return lines[0].strip() if lines else "unknown (java -version printed nothing)"


def jar_version(directory: Path, artifact: str) -> str | None:
    """`4.1.1` for `kafka-clients-4.1.1.jar` in `directory`, or None."""
    pattern = re.compile(re.escape(artifact) + r"-(\d[\w.\-]*)\.jar$")
    for jar in sorted(directory.glob("*.jar")) if directory.is_dir() else []:
        m = pattern.match(jar.name)
        if m:
            return m.group(1)
    return None


def kafka_versions(backend_info: dict, spark_kafka: str = SPARK_KAFKA) -> dict[str, str]:
    """The broker's version where the harness knows it (the embedded broker's jars, a container's image) and the
    Kafka client Spark's connector (the artifact set `spark_kafka`) reads with. Never resolves (downloads) a
    classpath: only reads one in place."""
    if backend_info.get("kind") != "kafka":
        return {}
    out: dict[str, str] = {}
    mode = backend_info.get("mode")
    if mode == "embedded":
        out["kafka broker"] = f"{jar_version(classpath_dir(KAFKA_BROKER), 'kafka-clients') or 'unknown'} (embedded)"
    elif mode == "container":
        out["kafka broker"] = f"image {backend_info.get('image')}"
    elif mode:
        out["kafka broker"] = f"{mode} cluster (its version not asked)"
    clients = jar_version(classpath_dir(spark_kafka), "kafka-clients")
    if clients:
        out["kafka-clients (Spark's connector)"] = clients
    return out


def cpu_cores() -> str:
    """The cores this process may run on (what `nproc` says: a container's or taskset's share), and the machine's
    count when that is more."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 0)
    total = os.cpu_count() or usable
    return str(usable) if usable == total else f"{usable} (of {total} on the machine)"


def describe(backend_info: dict | None = None, runtime: dict | None = None) -> dict[str, str]:
    """The environment of a run about to start (`backend_info`: the backend's describe(), when up; `runtime`: the
    older PySpark line its query ran on, as job.json records it, harness.spark.runtimes)."""
    import pyspark

    out = {"harness": harness_version(), "python": sys.version.split()[0], "pyspark": pyspark.__version__,
           "java": java_version()}
    if runtime:
        out["pyspark"] = (f"{runtime['pyspark']} (spark.pyspark = \"{runtime['line']}\"; the harness's own: "
                          f"{pyspark.__version__})")
    try:
        import confluent_kafka

        out["librdkafka (producers)"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    out.update(kafka_versions(backend_info or {}, (runtime or {}).get("jar_sets", {}).get(SPARK_KAFKA, SPARK_KAFKA)))
    out.update({"cpu cores": cpu_cores(), "platform": platform.platform()})
    return out


def record(run_dir: Path, backend_info: dict | None = None, runtime: dict | None = None) -> dict[str, str]:
    """describe() written to the run directory (once the backend is up, so its version is known)."""
    env = describe(backend_info, runtime)
    atomic.write_json(run_dir / FILE, env)
    return env


def read(run_dir: Path) -> dict[str, str]:
    """The environment recorded at run time; {} for a run from before it was recorded (or a torn file)."""
    try:
        data = json.loads((run_dir / FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
