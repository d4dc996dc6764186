"""`harness setup`: everything a first run would otherwise fetch and make on its way, made beforehand, so that the
first `harness run` starts as fast as the tenth.

A first run fetches the JVM jars (harness.jvm.artifacts), reads the setting names scenarios are checked against
(harness.settings.catalogue), and, beside its own work, makes what every later run starts from (in the cache,
once per jar set, JDK and broker settings):
- the Kafka storage tool's output, kept (harness.backends.kafka.storage), and that tool's class archive;
- the Kafka broker's class archive (harness.jvm.cds), written by its JVM when it exits;
- the Spark driver's class archive, written by the query process's JVM when it exits.
On a busy two-core machine that made a first `steady` run's first data batch come 48 s after its start, where
the runs after it took 26 s: a result whose start-up said more about the cache than about the query.

An archive holds the classes its JVM loaded, so the JVMs here do what a `steady` run's do, started by the run's
own code (not copies of their command lines): `steady`'s embedded broker (EmbeddedKafka.start: the storage
tool, then the broker JVM), its topic holding one second of `steady`'s traffic sent as its producers send
(harness.bench.kafka_query.fill, with the producers' client defaults), and `steady`'s query process
(SparkQueryProcess: harness.spark.query with the same job) started beside the broker, waiting for its source as
a run's does, reading the topic in a first batch into the file sink and draining; then both stop normally and
their archives are kept. Nothing is judged. Whatever is in place already is looked for first (`missing`): a
second `harness setup` starts no JVM.

`--pyspark LINE` (repeatable) also makes an older PySpark line ready for scenarios that set spark.pyspark
(harness.spark.runtimes): its virtualenv and its build of Spark's Kafka source, which a first run on that line
would otherwise make before it starts. None by default: `make setup` makes the project's own line only.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from harness.backends import make_backend
from harness.backends.kafka import storage
from harness.backends.kafka.sender import DEFAULTS as PRODUCER_DEFAULTS
from harness.bench.kafka_query import fill
from harness.config import Scenario, load_scenario
from harness.console import Console
from harness.jvm import cds
from harness.jvm.artifacts import KAFKA_BROKER, SPARK_KAFKA, SetupError, resolve, setup_all
from harness.sinks import sink_part
from harness.spark import runtimes
from harness.spark.process import SparkQueryProcess, driver_classpath
from harness.supervisor import Supervisor
from harness.producers.rates import make_rate

SCENARIO = "steady"  # the run whose first start this makes ready (README's first command)
TRAFFIC_S = 1.0  # the topic holds this many seconds of the scenario's traffic: the query's first batch reads it


@dataclass(frozen=True)
class Item:
    """One thing a first run would make: what it is, in words, and the file that is it."""
    what: str
    path: Path

    def present(self) -> bool:
        return cds.looks_valid(self.path) if self.path.suffix == ".jsa" else self.path.is_file()


def setup(console: Console, verbose: bool = False, pyspark: tuple[str, ...] = ()) -> int:
    """The whole set-up, each part skipped when it is in place, and the PySpark lines `pyspark` made ready; 0 when
    everything is."""
    for name, jars in setup_all(quiet=not verbose).items():
        console.info(f"{name}: {len(jars)} jars in {jars[0].parent if jars else '-'}")
    from harness.settings.catalogue import build_all  # the setting names scenarios are checked against

    counts = build_all()
    console.info("setting names: " + ", ".join(f"{n} {what}" for what, n in counts.items()))
    made = make_first_run_files(console)
    if made:
        console.info("made: " + "; ".join(f"{i.what} ({i.path})" for i in made))
    else:
        console.info(f"the class archives and the storage tool's output a first {SCENARIO} run would make: "
                     f"already in place")
    for line in dict.fromkeys(pyspark):
        python = runtimes.prepare(line, console, jar_sets=(SPARK_KAFKA,))
        jars = runtimes.jars(line, SPARK_KAFKA, quiet=not verbose)
        console.info(f"spark.pyspark = \"{line}\": PySpark {runtimes.get(line).pyspark} in {python.parent.parent}, "
                     f"Spark's Kafka source {len(jars)} jars in {jars[0].parent if jars else '-'}")
    return 0


def first_run_scenario() -> Scenario:
    """SCENARIO, as `harness run` loads it."""
    scenario, _, _ = load_scenario(SCENARIO)
    return scenario


def wanted(scenario: Scenario) -> list[Item]:
    """What a first run of `scenario` makes for the runs after it, present or not. The storage tool's archive only
    while its output is not kept: a run that finds the output runs no tool."""
    broker_classpath = os.pathsep.join(str(j) for j in resolve(KAFKA_BROKER))  # EmbeddedKafka.start's
    template = storage.template_dir(broker_classpath, make_backend(scenario.backend, scenario.stream).extra)
    items = []
    tool_runs = template is None or not storage.is_kept(template)
    if template is not None:
        items.append(Item("the Kafka storage tool's output", template / storage.BOOTSTRAP))
    if cds.enabled():
        if tool_runs:
            items.append(Item("the storage tool's class archive",
                              cds.archive_path("kafka-storage-tool", [broker_classpath])))
        items.append(Item("the broker's class archive", cds.archive_path("kafka-broker", [broker_classpath])))
        items.append(Item("the Spark driver's class archive", cds.archive_path("spark-driver", _driver(scenario))))
    return items


def _driver(scenario: Scenario) -> list[str]:
    """The driver archive's classpath for `scenario`, as SparkQueryProcess builds the driver's conf (a run that
    keys it otherwise would find no archive here: make_first_run_files checks that the archive came where this
    says)."""
    jars = ",".join(str(j) for name in scenario.backend.spark_jars for j in resolve(name))
    return driver_classpath({"spark.jars": jars, **scenario.spark_conf()})


def missing(scenario: Scenario) -> list[Item]:
    return [item for item in wanted(scenario) if not item.present()]


def make_first_run_files(console: Console) -> list[Item]:
    """What a first run of SCENARIO would make and is missing, made (see the module's docstring); what was made.
    Fails (SetupError) when the JVMs ran but an item is still missing, naming it and keeping their logs."""
    scenario = first_run_scenario()
    todo = missing(scenario)
    if not todo:
        return []
    console.info(f"making what a first {SCENARIO} run would make: " + ", ".join(i.what for i in todo)
                 + f" (its broker and query with {TRAFFIC_S:g} s of its traffic, not judged)")
    work = Path(tempfile.mkdtemp(prefix="harness-setup-"))
    try:
        _first_start(scenario, work, console)
    except Exception as exc:  # their logs kept for the reader of the message
        raise SetupError(f"starting {SCENARIO}'s broker and query failed: {type(exc).__name__}: {exc} "
                         f"(their logs: {work})") from exc
    except BaseException:  # Ctrl-C: everything stopped (the Supervisor), nothing to keep
        shutil.rmtree(work, ignore_errors=True)
        raise
    left = [item for item in todo if not item.present()]
    if left:
        raise SetupError(f"the JVMs ran but left no {', no '.join(i.what for i in left)} "
                         f"({', '.join(str(i.path) for i in left)}; their logs: {work})")
    shutil.rmtree(work, ignore_errors=True)
    return todo


def _first_start(scenario: Scenario, work: Path, console: Console) -> None:
    """`scenario`'s broker and query process, started side by side as a run starts them, one first batch, then
    both stopped normally (their JVMs write their class archives as they exit)."""
    stream, spark = scenario.stream, scenario.spark
    with Supervisor(uuid.uuid4().hex) as sup:
        broker = make_backend(scenario.backend, stream)
        query = SparkQueryProcess(work, sup, source=None, jars=scenario.backend.spark_jars, master=spark.master,
                                  conf=scenario.spark_conf(), trigger=spark.trigger.model_dump(), sink=spark.sink,
                                  output_mode=spark.output_mode, driver_memory=spark.driver_memory,
                                  query=spark.query, query_params=spark.query_params)
        query.job.update(sink_part(spark.sink).job_part(scenario))
        try:
            query.start(await_source=True)  # its JVM and session while the broker starts
            with console.step(f"starting Kafka beside the Spark driver, its topic with {TRAFFIC_S:g} s of traffic"):
                broker.start(work, sup)
                broker.create_stream(stream.name, stream.partitions, {k: str(v) for k, v in stream.config.items()})
                events = max(1, int(make_rate(scenario.producers.rate).rate(0.0) * TRAFFIC_S))
                fill(broker.bootstrap, events, stream.name, stream.partitions,
                     int(scenario.producers.payload.size.bytes),
                     # log_level 3: errors only, not the retries of a broker whose coordinator is still loading
                     settings={**PRODUCER_DEFAULTS, **scenario.producers.client, "log_level": 3})
            with console.step("the Spark query: its session, the Kafka source, a first batch into the file sink"):
                query.provide_source(broker.spark_source(stream.name, scenario.source_options()))
                query.wait_started(spark.start_timeout_s)
                ends = broker.end_offsets(stream.name)
                query.drain({stream.name: {str(p): o for p, o in ends.items()}}, spark.drain_timeout_s)
                code = query.wait_exit(spark.drain_timeout_s + 60)
                state = query.status().get("state")
                if code != 0 or state != "drained":
                    raise RuntimeError(f"the query ended in state {state!r}, exit {code}: "
                                       f"{query.status().get('error') or 'see spark/driver.log'}")
        finally:
            with console.step("stopping them (their JVMs write their class archives)"):
                query.stop()
                broker.close_clients()
                broker.stop()
