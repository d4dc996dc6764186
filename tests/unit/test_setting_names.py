"""Setting names in pass-through tables are judged by the software that reads them (harness.settings).

Expected names come from the software's own documentation (Spark's configuration page, Kafka's topic and broker
config pages, librdkafka's CONFIGURATION.md) and, for librdkafka, from confluent_kafka itself; the typos are
the issue's. The catalogue is built once (a JVM run, cached) by the session fixture.
"""
import json

import pytest
from confluent_kafka import KafkaException, Producer

from harness.config import ConfigError, load_scenario
from harness.settings import catalogue, librdkafka
from harness.backends.eventhubs.spec import PRODUCER_SETTINGS as EVENTHUBS_PRODUCER_SETTINGS

MINIMAL = """
name = "t"
[producers]
rate = { kind = "constant", eps = 100 }
"""
EVENTHUBS = MINIMAL + '[backend]\nkind = "eventhubs"\n'


@pytest.fixture(scope="module")
def spark_names():
    return catalogue.spark_names()


@pytest.fixture(scope="module")
def kafka_names():
    return catalogue.kafka_names()


def load(tmp_path, text, *sets):
    p = tmp_path / "s.toml"
    p.write_text(text)
    return load_scenario(str(p), list(sets))[0]


def refused(tmp_path, text, *sets) -> str:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, text, *sets)
    msg = str(err.value)
    assert str(tmp_path / "s.toml") in msg, msg  # the file is named
    return msg


# -- Spark ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [
    # spark.apache.org/docs/latest/configuration.html, structured-streaming-programming-guide, running-on-*
    "spark.sql.shuffle.partitions", "spark.executor.memory", "spark.serializer", "spark.app.name",
    "spark.master", "spark.local.dir", "spark.driver.extraJavaOptions", "spark.sql.streaming.stateStore.providerClass",
    "spark.sql.streaming.minBatchesToRetain", "spark.dynamicAllocation.enabled", "spark.yarn.queue",
    "spark.kubernetes.namespace", "spark.sql.streaming.kafka.useDeprecatedOffsetFetching",
    "spark.kafka.consumer.cache.capacity",  # Spark's Kafka connector (structured-streaming-kafka-integration)
    "spark.shuffle.io.maxRetries", "spark.rpc.io.numConnectionsPerPeer",  # TransportConf's families
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled",
    "spark.yarn.am.memory",
])
def test_spark_knows_documented_keys(spark_names, key):
    assert spark_names.knows(key), key


@pytest.mark.parametrize("key", [
    "spark.hadoop.fs.s3a.access.key", "spark.executorEnv.JAVA_HOME", "spark.kubernetes.driver.label.team",
    "spark.kubernetes.executor.annotation.owner", "spark.sql.catalog.lake", "spark.sql.catalog.lake.uri",
    "spark.executor.resource.gpu.amount", "spark.kafka.clusters.east.auth.bootstrap.servers",
    "spark.ssl.ui.enabled", "spark.metrics.conf.*.sink.console.class", "spark.yarn.appMasterEnv.FOO",
    "spark.security.credentials.hive.enabled",
])
def test_spark_prefix_families(spark_names, key):
    assert spark_names.knows(key), key


def test_spark_alternative_and_deprecated_names(spark_names):
    # documented alternatives/deprecations Spark still reads (configuration.html; SparkConf's deprecatedConfigs)
    for key in ("spark.yarn.executor.memoryOverhead", "spark.scheduler.listenerbus.eventqueue.size",
                "spark.blacklist.enabled"):
        assert spark_names.knows(key), key


def test_hand_listed_families_are_spark_literals():
    """Each hand-listed family is kept only while Spark's jars contain it: none may have gone missing silently."""
    names = json.loads(catalogue._cache_file("spark", catalogue.spark_version_key()).read_text())
    literals = set(names["literal"])
    assert [p for p in catalogue.SPARK_FAMILY_PREFIXES if p not in literals] == []
    assert "spark.sql." in literals and not catalogue.spark_names().knows("spark.sql.shufle.partitions")


def test_the_harness_own_spark_keys_are_known(spark_names):
    from harness.spark.process import BASE_CONF, EVENT_LOG_CONF

    for key in [*BASE_CONF, *EVENT_LOG_CONF, "spark.driver.memory", "spark.local.dir", "spark.eventLog.dir",
                "spark.jars", "spark.executor.memory", "spark.executor.cores"]:
        assert spark_names.knows(key), key


def test_spark_conf_typo_refused_with_suggestion(tmp_path):
    msg = refused(tmp_path, MINIMAL + '[spark.conf]\n"spark.sql.shufle.partitions" = 8\n')
    assert "spark.conf.spark.sql.shufle.partitions: unknown Spark" in msg and "'spark.sql.shufle.partitions'" in msg
    assert "did you mean 'spark.sql.shuffle.partitions'" in msg and "spark.conf_allow" in msg


def test_spark_conf_typo_from_set_refused(tmp_path):
    msg = refused(tmp_path, MINIMAL, "spark.conf.spark.executor.memry=2g")
    assert "did you mean 'spark.executor.memory'" in msg


def test_spark_conf_good_keys_pass(tmp_path):
    s = load(tmp_path, MINIMAL + '[spark.conf]\n"spark.sql.shuffle.partitions" = 8\n"spark.hadoop.fs.s3a.endpoint" = '
                                 '"http://127.0.0.1:9000"\n')
    assert s.spark_conf()["spark.sql.shuffle.partitions"] == "8"


@pytest.mark.parametrize("key,near", [
    ("hive.exec.dynamic.partition", None),  # a Hive setting: not Spark's (spark.hadoop.* or conf_allow)
    ("sql.shuffle.partitions", "spark.sql.shuffle.partitions"),  # the prefix left out
    ('\\"spark.sql.shuffle.partitions\\"', "spark.sql.shuffle.partitions"),  # quotes inside the key
])
def test_spark_conf_key_without_the_spark_prefix_refused_unless_allowed(tmp_path, key, near):
    conf = f'[spark.conf]\n"{key}" = true\n'
    msg = refused(tmp_path, MINIMAL + conf)
    name = key.replace("\\", "")
    assert f"spark.conf.{name}: {name!r} is not a Spark" in msg and "start with 'spark.'" in msg, msg
    assert "list it in spark.conf_allow" in msg and (near is None or f"did you mean {near!r}" in msg), msg
    allowed = f"[spark]\nconf_allow = [{json.dumps(name)}]\n"  # the key itself
    assert load(tmp_path, MINIMAL + allowed + conf).spark.conf[name] is True
    if key.startswith("hive."):  # a prefix
        assert load(tmp_path, MINIMAL + '[spark]\nconf_allow = ["hive.*"]\n' + conf).spark.conf[name] is True


def test_conf_allow_lets_own_keys_through(tmp_path):
    text = MINIMAL + '[spark]\nconf_allow = ["spark.myapp.flag", "spark.myteam.*"]\n' \
                     '[spark.conf]\n"spark.myapp.flag" = 1\n"spark.myteam.a.b" = "x"\n'
    assert load(tmp_path, text).spark.conf["spark.myteam.a.b"] == "x"
    msg = refused(tmp_path, text.replace('"spark.myapp.flag" = 1', '"spark.myapp.flags" = 1'))
    assert "'spark.myapp.flags'" in msg


@pytest.mark.parametrize("entry", ["spark.my*app", "", "*", "spark.a b", "myapp.*.x"])
def test_conf_allow_entries_checked(tmp_path, entry):
    msg = refused(tmp_path, MINIMAL + f'[spark]\nconf_allow = ["{entry}"]\n')
    assert "spark.conf_allow.0" in msg and "prefix ending in *" in msg


def test_second_lookup_reads_the_cache_file_without_a_jvm(spark_names, monkeypatch):
    """What makes it fast (a JVM run takes seconds): no JVM, asserted as such rather than timed."""
    def jvm(*_args):
        raise AssertionError("the second lookup started a JVM")

    catalogue.spark_names.cache_clear()
    monkeypatch.setattr(catalogue, "_run", jvm)
    again = catalogue.spark_names()
    assert again.keys == spark_names.keys


# -- Kafka (Java names, from the jars) ---------------------------------------------------------------------------
def test_kafka_consumer_option_typo(tmp_path):
    msg = refused(tmp_path, MINIMAL + '[spark.source_options]\n"kafka.max.poll.recrods" = 500\n')
    assert "spark.source_options.kafka.max.poll.recrods: unknown Kafka consumer setting 'kafka.max.poll.recrods'" in msg
    assert "did you mean 'kafka.max.poll.records'" in msg


def test_kafka_consumer_options_pass(tmp_path, spark_names):
    # kafka.apache.org/documentation/#consumerconfigs; Spark's own example kafka.security.protocol
    for name in ("max.poll.records", "fetch.max.bytes", "security.protocol", "isolation.level", "client.rack"):
        assert name in spark_names.consumer
    s = load(tmp_path, MINIMAL + '[spark.source_options]\n"kafka.max.poll.records" = 500\n'
                                 '"kafka.isolation.level" = "read_committed"\n')
    assert s.source_option("kafka.max.poll.records", "") == "500"


def test_topic_config_typo(tmp_path, kafka_names):
    # kafka.apache.org/documentation/#topicconfigs
    assert {"retention.ms", "cleanup.policy", "min.insync.replicas", "segment.bytes"} <= kafka_names.topic
    msg = refused(tmp_path, MINIMAL + '[stream.config]\n"retention.mss" = 1000\n')
    assert "stream.config.retention.mss: unknown Kafka topic config 'retention.mss'; did you mean 'retention.ms'" in msg
    assert load(tmp_path, MINIMAL + '[stream.config]\n"retention.ms" = 1000\n').stream.config["retention.ms"] == 1000


def test_broker_config_typo(tmp_path, kafka_names):
    # kafka.apache.org/documentation/#brokerconfigs
    assert {"log.retention.hours", "num.network.threads", "auto.create.topics.enable"} <= kafka_names.broker
    msg = refused(tmp_path, MINIMAL + '[backend.broker]\n"log.retention.hourz" = 1\n')
    assert "backend.broker.log.retention.hourz: unknown Kafka broker config 'log.retention.hourz'" in msg
    assert "did you mean 'log.retention.hours'" in msg
    ok = load(tmp_path, MINIMAL + '[backend.broker]\n"log.retention.hours" = 1\n'
                                  '"listener.name.client.plain.sasl.jaas.config" = "x"\n')
    assert ok.backend.broker["log.retention.hours"] == 1


# -- librdkafka --------------------------------------------------------------------------------------------------
def test_producer_typo_refused_as_librdkafka_does(tmp_path):
    with pytest.raises(KafkaException, match="No such configuration property"):
        Producer({"lingr.ms": 5})  # librdkafka itself
    msg = refused(tmp_path, MINIMAL + '[producers.client]\n"lingr.ms" = 5\n')
    assert "producers.client.lingr.ms: unknown librdkafka setting 'lingr.ms'; did you mean 'linger.ms'?" in msg


def test_producer_bad_value_refused_as_librdkafka_does(tmp_path):
    with pytest.raises(KafkaException, match="Invalid value"):
        Producer({"acks": "al"})
    msg = refused(tmp_path, MINIMAL + '[producers.client]\nacks = "al"\n')
    assert "producers.client.acks: librdkafka refuses acks = 'al'" in msg


def test_documented_librdkafka_settings_pass(tmp_path):
    # librdkafka CONFIGURATION.md; what the shipped scenarios and the Kafka sender use
    client = {"linger.ms": 5, "acks": "all", "enable.idempotence": True, "batch.num.messages": 10000,
              "queue.buffering.max.messages": 200000, "compression.type": "lz4",
              "topic.metadata.refresh.interval.ms": 1000, "partitioner": "murmur2_random"}
    for name, value in client.items():
        assert librdkafka.refusal(name, value) is None, name
    producer = Producer({k: (str(v).lower() if isinstance(v, bool) else v) for k, v in client.items()})
    assert producer.flush(0) == 0  # librdkafka took them all for a real client (no broker is dialled: none given)
    del producer
    body = "".join(f'"{k}" = {json.dumps(v)}\n' for k, v in client.items())
    assert load(tmp_path, MINIMAL + "[producers.client]\n" + body).producers.client["acks"] == "all"


def test_sentinels_are_refused_by_librdkafka():
    """The check's premise: librdkafka refuses 'x' for the sentinel settings, so no probe makes a client."""
    for sentinel in librdkafka._SENTINELS:
        with pytest.raises(KafkaException, match=f'Invalid value for configuration property "{sentinel}"'):
            Producer({sentinel: "x"})


def test_secret_value_not_quoted(tmp_path):
    msg = refused(tmp_path, MINIMAL + '[producers.client]\n"ssl.key.pasword" = "hunter2"\n')
    assert "hunter2" not in msg


# -- Event Hubs ----------------------------------------------------------------------------------------------------
def test_eventhubs_sender_reads_the_allowed_settings():
    """The names allowed are the ones the sender reads: a sender built with them uses their values."""
    from harness.backends.eventhubs.sender import EventHubsSender

    cs = "Endpoint=sb://127.0.0.1/;SharedAccessKeyName=k;SharedAccessKey=dGVzdA==;EntityPath=hub"
    sender = EventHubsSender("hub", {"connection_string": cs, "retry_total": 7, "max_batch_events": 9}, None, None, 2)
    try:
        assert sender.max_batch == 9
        assert sender.client._config.max_retries == 7
    finally:
        sender.client.close()
    assert set(EVENTHUBS_PRODUCER_SETTINGS) == {"retry_total", "max_batch_events"}


def test_eventhubs_producer_settings(tmp_path):
    assert load(tmp_path, EVENTHUBS + "[producers.client]\nretry_total = 10\n").producers.client["retry_total"] == 10
    msg = refused(tmp_path, EVENTHUBS + "[producers.client]\nretry_totl = 10\n")
    assert "unknown Event Hubs sender setting 'retry_totl'; did you mean 'retry_total'?" in msg
    msg = refused(tmp_path, EVENTHUBS + "[producers.client]\n\"linger.ms\" = 5\n")
    assert "allowed: retry_total, max_batch_events" in msg
    msg = refused(tmp_path, EVENTHUBS + "[producers.client]\nmax_batch_events = 0\n")
    assert "producers.client.max_batch_events: an integer of at least 1, got 0" in msg


# -- the cache -----------------------------------------------------------------------------------------------------
def test_cache_built_once_and_rebuilt_when_unreadable(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    builds = []

    def build():
        builds.append(1)
        return {"entry": ["spark.a"]}

    assert catalogue._cached("spark", "9.9", build) == {"entry": ["spark.a"]}
    assert catalogue._cached("spark", "9.9", build) == {"entry": ["spark.a"]} and len(builds) == 1
    catalogue._cache_file("spark", "9.9").write_text("{torn")
    assert catalogue._cached("spark", "9.9", build) == {"entry": ["spark.a"]} and len(builds) == 2
    assert catalogue._cached("spark", "10.0", build) and len(builds) == 3  # another version: its own file
    catalogue._cache_file("spark", "9.9").write_text("{}")  # readable but holding nothing: rebuilt, not trusted
    assert catalogue._cached("spark", "9.9", build, required=("entry",)) and len(builds) == 4
    with pytest.raises(catalogue.CatalogueError, match="found no literal names"):
        catalogue._cached("spark", "9.8", build, required=("entry", "literal"))


def test_a_recorded_scenario_is_not_judged_again(tmp_path, monkeypatch):
    """`harness check` on a copied run directory needs no JVM: the names were judged when the run started."""
    from harness.config import Scenario, validate_resolved
    from harness.settings import check

    data = {"name": "t", "producers": {"rate": {"kind": "constant", "eps": 100}},
            "spark": {"conf": {"spark.sql.shufle.partitions": 8}}, "stream": {"config": {"retention.mss": 1}}}
    with pytest.raises(ValueError, match="spark.sql.shufle.partitions"):
        Scenario.model_validate(data)

    def no_jvm():
        raise catalogue.CatalogueError("no java here")
    monkeypatch.setattr(check, "spark_names", no_jvm)
    monkeypatch.setattr(check, "kafka_names", no_jvm)
    assert validate_resolved(data, "scenario.json").spark.conf == {"spark.sql.shufle.partitions": 8}
    with pytest.raises(ConfigError, match="cannot check setting names: no java here"):
        load(tmp_path, MINIMAL + '[spark.conf]\n"spark.sql.shuffle.partitions" = 8\n')
