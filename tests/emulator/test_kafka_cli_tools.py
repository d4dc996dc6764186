"""Apache Kafka's own command-line tools against the emulator's Kafka endpoint, run the way their documentation
shows (`kafka-console-producer.sh`, `kafka-console-consumer.sh`, `kafka-topics.sh --describe`,
`kafka-get-offsets.sh`), with the SASL settings in a client properties file as Microsoft's Event Hubs pages write
them. A Maven fetch has no bin/ scripts, so each tool's main class runs with `java -cp` on the broker classpath
the project already fetches (harness/jvm/kafka-broker/pom.xml, which includes kafka-tools), with a class-data
sharing archive per tool (harness.jvm.cds) to keep the JVMs' start-up short.

Expected values come from what the tools were given (the lines fed to the console producer) and from another
real client (librdkafka reads the same records), never from the emulator's code. `make test` runs ONE combined
test (each JVM costs seconds on two cores); the rest are `slow`.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from kafka_helpers import consume_assigned, produce

from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig
from harness.jvm import cds
from harness.jvm.artifacts import resolve

TOPIC = "cli-lines"
SLOW_TOPIC = "cli-more"


@pytest.fixture(scope="module")
def kemu():
    hubs = (HubConfig(TOPIC, 2, ("$Default",)), HubConfig(SLOW_TOPIC, 3, ("$Default",)))
    server = EmulatorServer(EmulatorConfig(hubs=hubs), tls_port=None, ws_port=None, wss_port=None, kafka_port=0,
                            kafka_tls_port=None).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def classpath() -> str:
    jars = resolve("kafka-broker")
    if not any(j.name.startswith("kafka-tools-") and "api" not in j.name for j in jars):
        pytest.fail("kafka-tools is not on the kafka-broker classpath (harness/jvm/kafka-broker/pom.xml)")
    return os.pathsep.join(str(j) for j in jars)


@pytest.fixture(scope="module")
def client_properties(kemu, tmp_path_factory) -> Path:
    """The client settings file `--producer.config` / `--consumer.config` / `--command-config` take."""
    path = tmp_path_factory.mktemp("cli") / "eventhubs.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="$ConnectionString" password="{kemu.connection_string()}";\n'
    )
    return path


def _tool(classpath: str, main: str, *args: str, stdin: str | None = None, timeout: float = 90) -> str:
    """Run one tool's main class; its stdout (the test fails with stderr when it exits non-zero)."""
    cp = [classpath]
    cds_options, dump = cds.options(f"kafka-cli-{main.rsplit('.', 1)[1]}", cp)
    argv = ["java", "-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true", "-Xlog:disable", "-Xlog:all=warning:stderr", *cds_options, "-cp", classpath, main, *args]
    try:
        proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        cds.promote(dump, cp)  # deletes a dump the killed JVM never finished
        raise AssertionError(f"{main} did not finish in {timeout} s: {exc.stderr!r}") from None
    cds.promote(dump, cp)
    assert proc.returncode == 0, f"{main} exited {proc.returncode}:\n{proc.stderr[-3000:]}\n{proc.stdout[-2000:]}"
    return proc.stdout


def _bootstrap(kemu) -> str:
    return f"127.0.0.1:{kemu.kafka_port}"


CONSOLE_RECORD = re.compile(r"^Partition:(\d+)\tOffset:(\d+)\t(.*)\t(.*)$")


def test_console_producer_consumer_describe_and_offsets(kemu, classpath, client_properties):
    """Produce 12 keyed lines with the console producer, read them back with the console consumer
    (--from-beginning --max-messages, in a consumer group), describe the topic and get its end offsets; librdkafka
    reads the same records at the same positions."""
    lines = [f"key-{i % 5}:line {i}" for i in range(12)]
    _tool(classpath, "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", _bootstrap(kemu),
          "--topic", TOPIC, "--producer.config", str(client_properties),
          "--property", "parse.key=true", "--property", "key.separator=:", stdin="\n".join(lines) + "\n")

    out = _tool(classpath, "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                _bootstrap(kemu), "--topic", TOPIC, "--consumer.config", str(client_properties),
                "--from-beginning", "--max-messages", str(len(lines)), "--timeout-ms", "30000",
                "--property", "print.key=true", "--property", "print.partition=true",
                "--property", "print.offset=true")
    printed = [CONSOLE_RECORD.match(line) for line in out.splitlines() if line.startswith("Partition:")]
    assert len(printed) == len(lines) and all(printed), out
    records = {(int(m[1]), int(m[2])): (m[3], m[4]) for m in printed}
    assert sorted(f"{k}:{v}" for k, v in records.values()) == sorted(lines)
    # the console producer's default partitioner keeps a key on one partition; within it, send order
    by_key: dict[str, set] = {}
    for (p, _), (k, _) in records.items():
        by_key.setdefault(k, set()).add(p)
    assert all(len(ps) == 1 for ps in by_key.values()), by_key
    ends = {p: max(o for q, o in records if q == p) + 1 for p, _ in records}
    for p in ends:
        assert sorted(o for q, o in records if q == p) == list(range(ends[p]))

    # another real client reads the same records at the same positions
    got = consume_assigned(kemu, TOPIC, {p: 0 for p in ends}, len(lines))
    assert {(m.partition(), m.offset()): (m.key().decode(), m.value().decode()) for m in got} == records

    described = _tool(classpath, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", _bootstrap(kemu),
                      "--command-config", str(client_properties), "--describe", "--topic", TOPIC)
    assert re.search(rf"Topic: {TOPIC}\s.*PartitionCount: 2\s", described), described
    partitions = re.findall(rf"Topic: {TOPIC}\s+Partition: (\d+)\s+Leader: (\d+)", described)
    assert sorted(partitions) == [("0", "0"), ("1", "0")], described

    offsets = _tool(classpath, "org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", _bootstrap(kemu),
                    "--command-config", str(client_properties), "--topic", TOPIC, "--time", "-1")
    got_ends = {int(p): int(o) for p, o in re.findall(rf"^{TOPIC}:(\d+):(\d+)$", offsets, re.M)}
    assert got_ends == {0: ends.get(0, 0), 1: ends.get(1, 0)}, offsets


@pytest.mark.slow  # `make test-slow`: two more JVMs; the combined test above covers the same tools
def test_earliest_offsets_and_a_partition_read_after_librdkafka_writes(kemu, classpath, client_properties):
    sent = produce(kemu, SLOW_TOPIC, [dict(value=b"from-librdkafka-%d" % i, partition=i % 3) for i in range(9)])
    assert sent.errors() == []
    earliest = _tool(classpath, "org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", _bootstrap(kemu),
                     "--command-config", str(client_properties), "--topic", SLOW_TOPIC, "--time", "-2")
    assert {int(p): int(o) for p, o in re.findall(rf"^{SLOW_TOPIC}:(\d+):(\d+)$", earliest, re.M)} == \
        {0: 0, 1: 0, 2: 0}
    out = _tool(classpath, "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                _bootstrap(kemu), "--topic", SLOW_TOPIC, "--consumer.config", str(client_properties),
                "--partition", "2", "--offset", "1", "--max-messages", "2", "--timeout-ms", "30000",
                "--property", "print.offset=true")
    expect = [(d[2], d[4].decode()) for d in sent if d[1] == 2 and d[2] >= 1]
    got = re.findall(r"^Offset:(\d+)\t(.*)$", out, re.M)
    assert [(int(o), v) for o, v in got] == expect, out
