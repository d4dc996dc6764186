"""`[backend] kind = "eventhubs"`, `protocol = "kafka"`: the table, the settings handed to librdkafka and to Spark's
Kafka source for a namespace's Kafka endpoint, and where the connection string (the SASL password) may travel.

Expected values come from outside the code under test: Microsoft's documented settings for the Kafka endpoint
(`bootstrap.servers = <namespace>.servicebus.windows.net:9093`, `security.protocol = SASL_SSL`, `sasl.mechanism =
PLAIN`, user `$ConnectionString`, the connection string as password; the Spark tutorial's JAAS line), written out
by hand here; librdkafka itself judging the producers' settings; the Kafka backend's own table for the values the
Kafka path must share with it."""
import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from harness import secrets
from harness.backends import SPECS
from harness.backends.capabilities import EmulatorControl
from harness.backends.eventhubs import kafka_endpoint as ke
from harness.backends.eventhubs.namespace import NamespaceEventHubs
from harness.backends.kafka.spec import KafkaSpec
from harness.config import ConfigError, load_scenario

KEY = "q0Yx3gkQm7nNfT1vQ2sR8uVw9yZaBcDeFgHiJkLmNoP="
CONN = f"Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={KEY}"


def spec(**backend):
    return SPECS["eventhubs"].model_validate({"kind": "eventhubs", **backend})


def scenario_file(tmp_path, backend: str, extra: str = "", options: str = "failOnDataLoss = true\n"):
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\n[backend]\nkind = "eventhubs"\n' + backend +
                    '\n[producers]\nrate = { kind = "constant", eps = 100 }\n'
                    '[spark.source_options]\n' + options + extra)
    return str(path)


# -- the table ---------------------------------------------------------------------------------------------------
def test_the_protocol_is_amqp_unless_asked_and_kafka_follows_the_kafka_backend():
    amqp, kafka = spec(), spec(protocol="kafka")
    assert amqp.protocol == "amqp" and amqp.sender.endswith(":EventHubsSender") and amqp.placement == "eventhubs"
    assert amqp.batch_cap_option == "maxEventsPerTrigger" and amqp.batch_cap_exact and amqp.spark_jars == ()
    for name in ("sender", "placement", "batch_cap_option", "batch_cap_exact", "spark_jars"):
        assert getattr(kafka, name) == getattr(KafkaSpec, name), name
    assert kafka.batch_cap_option == "maxOffsetsPerTrigger" and not kafka.batch_cap_exact
    assert (amqp.data_loss_failure, kafka.data_loss_failure) == ("EventHubsDataLossError", "KAFKA_DATA_LOSS")
    assert kafka.capabilities() == {EmulatorControl}  # no epoch receivers to steal on the Kafka path


def test_a_misspelt_protocol_is_refused_naming_the_field_with_exit_2(tmp_path):
    path = scenario_file(tmp_path, 'protocol = "kafak"')
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    assert "protocol" in str(err.value) and "'amqp' or 'kafka'" in str(err.value) and "kafak" in str(err.value)
    proc = subprocess.run([sys.executable, "-m", "harness", "validate", path], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "protocol" in proc.stderr and "kafak" in proc.stderr, proc.stderr


@pytest.mark.parametrize("backend, words", [
    ('protocol = "kafka"\nmode = "container"', "mode = 'container' is not supported"),
    ('protocol = "kafka"\nsend = "partition_id"', "leave send out"),
])
def test_what_the_kafka_path_cannot_do_is_refused_at_load(tmp_path, backend, words):
    with pytest.raises(ConfigError) as err:
        load_scenario(scenario_file(tmp_path, backend))
    assert "backend" in str(err.value) and words in str(err.value)


@pytest.mark.parametrize("option, value, words", [
    ("maxEventsPerTrigger", "100", "not a Spark Kafka source option"),  # the AMQP source's cap
    ("maxOffsetsPerTrigger", "0", "maxOffsetsPerTrigger"),
    ('"kafka.sasl.jaas.config"', '"x"', "set by the harness"),
    ('"kafka.bootstrap.servers"', '"h:1"', "set by the harness"),
    ('"kafka.security.protocol"', '"PLAINTEXT"', "set by the harness"),
    ("subscribe", '"other"', "set by the harness"),
    ("assign", '"{}"', "set by the harness"),
    ('"kafka.auto.offset.reset"', '"earliest"', "startingOffsets"),
])
def test_spark_kafka_source_options_are_judged_as_on_the_kafka_backend(tmp_path, option, value, words):
    with pytest.raises(ConfigError) as err:
        load_scenario(scenario_file(tmp_path, 'protocol = "kafka"', options=f"{option} = {value}\n"))
    assert "spark.source_options" in str(err.value) and words in str(err.value)


def test_the_amqp_path_still_refuses_kafka_option_names(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_scenario(scenario_file(tmp_path, "", options="maxOffsetsPerTrigger = 10\n"))
    assert "maxEventsPerTrigger" in str(err.value)


def test_epoch_steal_is_refused_on_the_kafka_path_naming_the_field(tmp_path):
    extra = '[[faults]]\nkind = "epoch_steal"\nat_s = 1\n'
    with pytest.raises(ConfigError) as err:
        load_scenario(scenario_file(tmp_path, 'protocol = "kafka"', extra))
    assert "faults.0 (epoch_steal)" in str(err.value) and "backend.protocol = 'kafka'" in str(err.value)
    load_scenario(scenario_file(tmp_path, "", extra))  # on AMQP it stands


@pytest.mark.parametrize("fault, failonloss", [("recreate = false", "true"), ("recreate = true", "true")])
def test_hub_delete_on_the_kafka_path_is_refused_where_its_effect_is_not_measured(tmp_path, fault, failonloss):
    extra = f'[[faults]]\nkind = "hub_delete"\nat_s = 1\n{fault}\n'
    with pytest.raises(ConfigError) as err:
        load_scenario(scenario_file(tmp_path, 'protocol = "kafka"', extra, options=f"failOnDataLoss = {failonloss}\n"))
    assert "faults.0 (hub_delete)" in str(err.value) and "backend.protocol = 'kafka'" in str(err.value)


@pytest.mark.parametrize("name", ["ehk-steady", "ehk-skew", "ehk-crash-recovery", "ehk-ageout-lenient",
                                  "ehk-hub-delete"])
def test_the_ehk_scenarios_read_through_the_kafka_endpoint(name):
    scenario, _, _ = load_scenario(name)
    assert scenario.backend.kind == "eventhubs" and scenario.backend.protocol == "kafka"


def test_eh_parity_sweeps_the_protocol_over_the_same_traffic():
    scenario, _, _ = load_scenario("eh-parity")
    assert scenario.sweep == {"backend.protocol": ["amqp", "kafka"]}
    assert scenario.spark.master == "local-cluster[2,1,1024]"
    for protocol in ("amqp", "kafka"):  # every combination loads
        assert load_scenario("eh-parity", [f'backend.protocol="{protocol}"'])[0].backend.protocol == protocol


# -- the endpoint's settings -------------------------------------------------------------------------------------
@pytest.mark.parametrize("conn, host", [
    (CONN, "myns.servicebus.windows.net"),
    ("Endpoint=sb://127.0.0.1:5671/;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=hub", "127.0.0.1"),
    ("endpoint = sb://a.b.c ;SharedAccessKeyName=k;SharedAccessSignature=SharedAccessSignature sr=x&sig=y", "a.b.c"),
])
def test_the_namespace_endpoint_is_the_connection_strings_host_on_9093(conn, host):
    assert ke.namespace_endpoint(conn) == ke.KafkaEndpoint(host, 9093, None)
    assert ke.namespace_endpoint(conn).bootstrap == f"{host}:9093"


def test_a_connection_string_without_an_endpoint_is_named():
    backend = NamespaceEventHubs("X")
    backend._conn = "SharedAccessKeyName=k;SharedAccessKey=v"
    with pytest.raises(Exception) as err:
        backend.kafka_endpoint()
    assert "$X" in str(err.value) and "Endpoint=sb://" in str(err.value)


def test_producer_settings_are_microsofts_and_librdkafka_takes_them():
    env: dict[str, str] = {}
    settings = ke.kafka_producer_settings(CONN + ";EntityPath=events", ke.namespace_endpoint(CONN), env)
    assert KEY not in json.dumps(settings)  # a reference only: the job file holds no secret
    expanded = secrets.expand_all(settings, env)
    assert expanded == {"bootstrap.servers": "myns.servicebus.windows.net:9093", "security.protocol": "SASL_SSL",
                        "sasl.mechanisms": "PLAIN", "sasl.username": "$ConnectionString", "sasl.password": CONN}
    Producer(expanded)  # librdkafka refuses an unknown name or a bad value at construction


def test_the_emulators_endpoint_adds_its_ca_for_both_clients():
    endpoint = ke.KafkaEndpoint("127.0.0.1", 41234, "/run/tls/ca.pem")
    env: dict[str, str] = {}
    assert ke.kafka_producer_settings(CONN, endpoint, env)["ssl.ca.location"] == "/run/tls/ca.pem"
    opts = ke.kafka_source_options(CONN, endpoint, "events", {}, environ=env)
    assert opts["kafka.ssl.truststore.type"] == "PEM" and opts["kafka.ssl.truststore.location"] == "/run/tls/ca.pem"
    assert opts["kafka.bootstrap.servers"] == "127.0.0.1:41234"


def test_spark_source_options_are_the_tutorials_with_the_password_as_a_reference():
    env: dict[str, str] = {}
    opts = ke.kafka_source_options(CONN, ke.namespace_endpoint(CONN), "events", {"failOnDataLoss": True},
                             starting={1: 7, 0: 5}, environ=env)
    assert KEY not in json.dumps(opts)
    expanded = secrets.expand_all(opts, env)
    assert expanded == {
        "kafka.bootstrap.servers": "myns.servicebus.windows.net:9093", "subscribe": "events",
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                  f'username="$ConnectionString" password="{CONN}";',
        "kafka.request.timeout.ms": "60000", "kafka.session.timeout.ms": "30000",
        "startingOffsets": '{"events": {"0": 5, "1": 7}}', "failOnDataLoss": "true"}
    # what a record of the run may show of them: no key
    assert KEY not in json.dumps(secrets.redacted(expanded))


def test_the_users_own_starting_position_and_consumer_settings_win():
    env: dict[str, str] = {}
    opts = ke.kafka_source_options(CONN, ke.namespace_endpoint(CONN), "events",
                             {"startingOffsets": "earliest", "kafka.request.timeout.ms": "90000"}, {0: 3}, env)
    assert opts["startingOffsets"] == "earliest" and opts["kafka.request.timeout.ms"] == "90000"
    assert sum(k.lower() == "kafka.request.timeout.ms" for k in opts) == 1


def test_the_backend_hands_producers_and_spark_the_kafka_path(monkeypatch):
    monkeypatch.setenv("EH_CONN", CONN)
    backend = spec(mode="namespace", protocol="kafka", connection_string_env="EH_CONN").build(
        type("Stream", (), {"name": "events", "partitions": 2, "config": {}})())
    backend._conn = CONN
    backend._created_at["events"] = {0: 10, 1: 20}
    assert backend.sends_report_positions  # librdkafka's acks name partition and offset (= sequence number)
    assert backend.producer_settings()["bootstrap.servers"] == "myns.servicebus.windows.net:9093"
    source = backend.spark_source("events", {"failOnDataLoss": "true"})
    assert source.format == "kafka" and source.normalise == "harness.spark.events:from_kafka"
    assert source.jars == KafkaSpec.spark_jars and source.data_sources == ()
    assert json.loads(source.options["startingOffsets"]) == {"events": {"0": 10, "1": 20}}
    assert KEY not in json.dumps(source.as_job()) and KEY not in json.dumps(backend.describe())
    assert backend.describe()["protocol"] == "kafka"


def test_producer_settings_the_harness_derives_are_refused_in_producers_client(tmp_path):
    from harness.backends.eventhubs.kafka_endpoint import kafka_producer_settings
    from harness.backends.eventhubs.kafka_endpoint import PRODUCER_SET_BY_HARNESS

    env: dict[str, str] = {}
    derived = kafka_producer_settings(CONN, ke.KafkaEndpoint("h", 1, "/ca.pem"), env)
    assert set(derived) <= set(PRODUCER_SET_BY_HARNESS)  # every one the harness sets is guarded
    path = scenario_file(tmp_path, 'protocol = "kafka"', '[producers.client]\n"sasl.password" = "x"\n')
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    assert "producers.client.sasl.password: set by the harness" in str(err.value) and '"x"' not in str(err.value)
