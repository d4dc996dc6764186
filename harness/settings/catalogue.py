"""The setting names Spark and Kafka know, asked of the installed software and cached per version outside git.

A copied list goes stale with the next upgrade and is wrong in both directions; so the names are read from the
jars themselves by a short JVM run (SettingNames.java beside this file, a single-file program: nothing compiled
is kept): Spark's ConfigEntry registry after its config holders are initialised, the names SparkConf and SQLConf
still accept as deprecated or alternative, the `spark.` string literals Spark reads (spark.master,
spark.app.name), the prefix families its holders define (spark.kubernetes.driver.label.), and Kafka's own
ConfigDefs (consumer, producer, topic, broker). With each name, its value type as the software holds it (Spark's
converters probed, Kafka's ConfigDef types and validators), for harness.settings.values.

The result is cached as JSON under the harness's cache dir, keyed by the Spark version, the classpath (its
directory name carries the hash of its pom) and this program's source, so an upgrade rebuilds it and a second
call costs one small file read. `harness setup` builds it; otherwise the first scenario that needs it does.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from harness.files import atomic
from harness.jvm.artifacts import KAFKA_BROKER, SPARK_KAFKA, SetupError, classpath_dir, resolve
from harness.files.paths import cache_dir, pyspark_home
from harness.settings.values import KafkaType, SparkType

PROGRAM = Path(__file__).resolve().parent / "SettingNames.java"
JVM_TIMEOUT_S = 180

# Key families Spark passes on whole, whose members no registry lists; each is kept only when Spark's own jars
# still contain it as a literal (see SPARK_FAMILY_PREFIXES_UNCHECKED for the two built by concatenation).
SPARK_FAMILY_PREFIXES = (
    "spark.hadoop.",                       # copied into the Hadoop Configuration (SparkHadoopUtil)
    "spark.hive.",                         # copied into the Hive conf
    "spark.executorEnv.",                  # executors' environment (SparkConf.setExecutorEnv)
    "spark.yarn.appMasterEnv.",            # the YARN application master's environment
    "spark.sql.catalog.",                  # catalog plugins and their options (CatalogManager)
    "spark.kafka.clusters.",               # delegation tokens per Kafka cluster (spark-token-provider-kafka)
    "spark.metrics.conf.",                 # metrics sinks and sources (MetricsConfig)
    "spark.ssl.",                          # SSLOptions' namespaces: spark.ssl.ui.*, spark.ssl.rpc.*, ...
    "spark.security.credentials.",         # credential providers: spark.security.credentials.<service>.enabled
    "spark.io.encryption.commons.config.",  # handed to commons-crypto
    "spark.network.crypto.config.",        # handed to commons-crypto
)
SPARK_FAMILY_PREFIXES_UNCHECKED = (
    "spark.shuffle.io.", "spark.rpc.io.",  # TransportConf builds "spark." + module + ".io.<name>"
    "spark.driver.resource.", "spark.executor.resource.", "spark.task.resource.",  # ResourceUtils: <c>.resource.
    "spark.sql.streaming.stateStore.rocksdb.",  # RocksDBConf: its prefix constant has no trailing dot
    "spark.kubernetes.authenticate.",           # KUBERNETES_AUTH_*_CONF_PREFIX, no trailing dot either
)


@dataclass(frozen=True)
class SparkNames:
    keys: frozenset[str]        # registered entries, alternatives, deprecated names, literals Spark reads
    prefixes: tuple[str, ...]   # a key under one of these is Spark's
    consumer: frozenset[str]    # the Kafka consumer names of the kafka-clients Spark's Kafka source uses
    version: str
    types: Mapping[str, SparkType] = field(default_factory=dict)  # registered entries' value types
    consumer_types: Mapping[str, KafkaType] = field(default_factory=dict)  # that consumer's ConfigDef types

    def knows(self, key: str) -> bool:
        return key in self.keys or key.startswith(self.prefixes)


@dataclass(frozen=True)
class KafkaNames:
    broker: frozenset[str]
    topic: frozenset[str]
    producer: frozenset[str]
    consumer: frozenset[str]
    version: str
    types: Mapping[str, Mapping[str, KafkaType]] = field(default_factory=dict)  # kind -> name -> ConfigDef type


class CatalogueError(SetupError):
    """The names could not be read (no java, the jars not fetched): said in words, not a traceback."""


def _jars(name: str) -> list[Path]:
    try:
        return resolve(name)
    except SetupError as exc:
        raise CatalogueError(f"the {name} jars are needed to know its setting names: {exc}") from None


def _pyspark_jars() -> list[Path]:
    try:
        return sorted((pyspark_home() / "jars").glob("*.jar"))
    except RuntimeError as exc:
        raise CatalogueError(f"{exc}: it is needed to know Spark's setting names") from None


FORMAT = b"names and types 2"  # how this module reads the dump: a change here rebuilds the cache as well


def _program_hash() -> str:
    return hashlib.sha256(PROGRAM.read_bytes() + FORMAT).hexdigest()[:12]


def _cache_file(kind: str, version: str) -> Path:
    safe = "".join(c if c.isalnum() or c in ".-" else "_" for c in version)
    return cache_dir() / "settings" / f"{kind}-{safe}-{_program_hash()}.json"


def _run(mode: str, jars: list[Path]) -> dict[str, list[str]]:
    """One JVM run of SettingNames.java: {kind: sorted names}."""
    with tempfile.TemporaryDirectory(prefix="harness-settings-") as tmp:
        out = Path(tmp) / "names.tsv"
        argv = ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", os.pathsep.join(str(j) for j in jars), str(PROGRAM), mode, str(out)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=JVM_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL, cwd=tmp)
        except FileNotFoundError:
            raise CatalogueError("no `java` on PATH: it is needed to read the setting names Spark and Kafka "
                                 "know (and to run Spark and Kafka)") from None
        except subprocess.TimeoutExpired:
            raise CatalogueError(f"reading the {mode} setting names took over {JVM_TIMEOUT_S} s") from None
        if proc.returncode != 0 or not out.exists():
            raise CatalogueError(f"reading the {mode} setting names failed (java exit {proc.returncode}): "
                                 f"{(proc.stderr or proc.stdout)[-1500:]}")
        names: dict[str, set[str]] = {}
        for line in out.read_text(encoding="utf-8").splitlines():
            kind, _, name = line.partition("\t")
            names.setdefault(kind, set()).add(name)
    return {kind: sorted(values) for kind, values in names.items()}


def _complete(names: Any, required: tuple[str, ...]) -> bool:
    """Every kind the checks read is there and not empty: a run that read nothing must not refuse everything."""
    return isinstance(names, dict) and all(isinstance(names.get(k), list) and names[k] for k in required)


def _cached(kind: str, version: str, build, required: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """The names from the cache file, else built and written there (atomically: a concurrent reader sees the old
    file or the new one; two builds at once both write the same)."""
    path = _cache_file(kind, version)
    try:
        names = json.loads(path.read_text(encoding="utf-8"))
        if _complete(names, required):
            return names
    except (OSError, ValueError):
        pass
    names = build()
    if not _complete(names, required):
        missing = [k for k in required if not names.get(k)]
        raise CatalogueError(f"reading the {kind} setting names found no {', '.join(missing)} names: the "
                             f"classpath is not what {PROGRAM.name} expects")
    atomic.write_json(path, names)
    return names


def spark_missing() -> str | None:
    """Why Spark's setting names cannot be read on this machine (PySpark, whose jars hold them, is not installed:
    a light CI job that only lints scenario files), or None."""
    try:
        importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return "PySpark is not installed here"
    return None


def spark_version_key() -> str:
    return f"{importlib.metadata.version('pyspark')}-{classpath_dir(SPARK_KAFKA).name}"


def kafka_version_key() -> str:
    return classpath_dir(KAFKA_BROKER).name


@functools.cache
def spark_names() -> SparkNames:
    """What the installed PySpark's Spark (with Spark's Kafka source on its classpath) knows."""
    version = spark_version_key()
    names = _cached("spark", version, lambda: _run("spark", _pyspark_jars() + _jars(SPARK_KAFKA)),
                    required=("entry", "literal", "prefix", "consumer", "type", "consumer-type"))
    literals = set(names.get("literal", ()))
    families = [p for p in SPARK_FAMILY_PREFIXES if p in literals] + list(SPARK_FAMILY_PREFIXES_UNCHECKED)
    keys = {k for kind in ("entry", "alternative", "deprecated", "literal") for k in names.get(kind, ())}
    prefixes = tuple(sorted(set(names.get("prefix", ())) | set(families)))
    return SparkNames(frozenset(k for k in keys if not k.endswith(".")), prefixes,
                      frozenset(names.get("consumer", ())), version,
                      _types(names["type"], SparkType.parse), _types(names["consumer-type"], KafkaType.parse))


KAFKA_KINDS = ("broker", "topic", "producer", "consumer")


@functools.cache
def kafka_names() -> KafkaNames:
    """What the Kafka the harness runs (the broker jars) knows: broker, topic, Java producer and consumer names."""
    version = kafka_version_key()
    names = _cached("kafka", version, lambda: _run("kafka", _jars(KAFKA_BROKER)),
                    required=KAFKA_KINDS + tuple(f"{k}-type" for k in KAFKA_KINDS))
    return KafkaNames(*(frozenset(names.get(k, ())) for k in KAFKA_KINDS), version=version,
                      types={k: _types(names[f"{k}-type"], KafkaType.parse) for k in KAFKA_KINDS})


def _types(lines: list[str], parse) -> dict[str, Any]:
    """`name TAB fields...` lines (SettingNames.java's type dump) -> {name: parse(fields)}."""
    found = {}
    for line in lines:
        name, *fields = line.split("\t")
        found[name] = parse(fields)
    return found


def build_all() -> dict[str, int]:
    """For `harness setup`: both catalogues built (or found), with how many names each holds."""
    spark, kafka = spark_names(), kafka_names()
    return {"spark": len(spark.keys), "kafka broker": len(kafka.broker), "kafka topic": len(kafka.topic)}
