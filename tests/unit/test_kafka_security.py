"""Kafka client security settings: checked, mapped to Spark's Java client options, kept out of what a run writes.

Expected values are written out by hand from the clients' documented names (librdkafka CONFIGURATION.md, Kafka's
JAAS syntax), never produced by the functions under test.
"""
import json
import subprocess

import pytest

from harness import secrets
from harness.backends.kafka import security as sec
from harness.backends.kafka.authz import refusals
from harness.backends.kafka.spec import KafkaSpec
from harness.config import ConfigError, load_scenario
from harness.faults import fault_for
from harness.faults.delete_records import DeleteRecordsOptions
from harness.faults.topic_delete import TopicDeleteOptions

PLAIN = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "app",
         "sasl.password": "s3cret"}


def harness(capsys, *args):
    """The CLI in this process (its exit code and stderr are the contract; a subprocess costs seconds each)."""
    from harness.cli import main

    code = main(list(args))
    return subprocess.CompletedProcess(args, code, *capsys.readouterr())


# -- checking ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("client, message", [
    ({"sasl.passwd": "x"}, "'sasl.passwd' is not a client security setting; allowed (librdkafka names): "),
    ({"security.protocol": "SASL_PLAINTEXT"},
     "security.protocol = 'SASL_PLAINTEXT' needs sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI, "
     "OAUTHBEARER)"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u"},
     "sasl.mechanism = 'SCRAM-SHA-512' needs sasl.username and sasl.password (or sasl.password_env)"),
    ({"security.protocol": "TLS"}, "security.protocol = 'TLS'; allowed: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"sasl.mechanism": "PLAIN"},
     "sasl.* settings need security.protocol = 'SASL_PLAINTEXT' or 'SASL_SSL' (it is 'PLAINTEXT')"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u",
      "sasl.password": "${NOT_SET_HERE}"}, "'sasl.password' needs the environment variable NOT_SET_HERE, which is not set"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u",
      "sasl.password_env": "NOT_SET_HERE"}, "'sasl.password_env' needs the environment variable NOT_SET_HERE"),
    ({"ssl.ca.location_env": "X"}, "'ssl.ca.location_env': the _env suffix is for secrets"),
    ({**PLAIN, "sasl.password_env": "X"}, "'sasl.password' is given twice (as 'sasl.password' and 'sasl.password_env')"),
])
def test_check_names_the_setting(client, message):
    with pytest.raises(ValueError) as err:
        sec.check(client, environ={"X": "1"})
    assert str(err.value).startswith(message)


def test_check_accepts_a_password_from_the_environment():
    sec.check({**PLAIN, "sasl.password": "${KAFKA_PW}"}, environ={"KAFKA_PW": "x"})
    sec.check({k: v for k, v in PLAIN.items() if k != "sasl.password"} | {"sasl.password_env": "KAFKA_PW"},
              environ={"KAFKA_PW": "x"})


# -- where the settings go ------------------------------------------------------------------------------------------
def test_spark_options_are_the_java_names_with_a_jaas_line_and_the_secret_as_a_reference():
    env = {}
    opts = sec.spark_options(PLAIN, environ=env)
    (var,) = env  # the literal password went into the (children's) environment under a harness name
    assert env[var] == "s3cret" and var.startswith("HARNESS_SECRET_")
    assert opts == {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                  'username="app" password="${' + var + '}";',
    }
    assert secrets.expand(opts["kafka.sasl.jaas.config"], env).endswith('password="s3cret";')


def test_scram_jaas_line_quotes_and_a_user_reference_is_kept():
    client = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": 'we"ird',
              "sasl.password_env": "KAFKA_PW", "ssl.ca.location": "/etc/ca.pem",
              "ssl.endpoint.identification.algorithm": "none"}
    env = {}
    assert sec.spark_options(client, environ=env) == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="we\\"ird" password="${KAFKA_PW}";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/ca.pem",
        "kafka.ssl.endpoint.identification.algorithm": "",
    }
    assert env == {}  # nothing literal to export


def test_an_explicit_kafka_option_wins_whatever_its_case():
    derived = {"kafka.sasl.jaas.config": "derived", "kafka.security.protocol": "SASL_SSL"}
    merged = sec.merge_source_options(derived, {"kafka.SASL.jaas.config": "mine"})
    assert merged == {"kafka.security.protocol": "SASL_SSL", "kafka.SASL.jaas.config": "mine"}


def test_backend_hands_out_references_and_keeps_values_for_its_own_clients():
    backend = KafkaSpec(mode="external", bootstrap_servers="h:9092", client=PLAIN).build(None)
    settings = backend.producer_settings()
    assert "s3cret" not in json.dumps(settings)  # what job.json gets
    assert settings["sasl.password"].startswith("${HARNESS_SECRET_") and settings["bootstrap.servers"] == "h:9092"
    assert secrets.expand_all(settings)["sasl.password"] == "s3cret"  # what the producer process does
    assert backend.client_security()["sasl.password"] == "s3cret"
    source = backend.spark_source("events", {"startingOffsets": "earliest"})
    assert "s3cret" not in json.dumps(source.as_job())
    assert source.options["kafka.bootstrap.servers"] == "h:9092" and source.options["subscribe"] == "events"


def test_recorded_scenario_shows_no_secret():
    spec = KafkaSpec(sasl="PLAIN", users={"admin": "a-pw", "app": "${HOME}"},
                     client={"sasl.username": "app"})
    dumped = json.dumps(spec.model_dump(mode="json"))
    assert "a-pw" not in dumped and '"admin": "***"' in dumped and '"app": "${HOME}"' in dumped
    ext = KafkaSpec(mode="external", bootstrap_servers="h:1", client=PLAIN).model_dump(mode="json")
    assert ext["client"]["sasl.password"] == "***" and ext["client"]["sasl.username"] == "app"


def test_embedded_sasl_fills_protocol_mechanism_and_password_from_users():
    spec = KafkaSpec(sasl="PLAIN", users={"admin": "a-pw", "app": "p-pw"}, client={"sasl.username": "app"})
    assert spec.client_settings() == {"sasl.username": "app", "security.protocol": "SASL_PLAINTEXT",
                                      "sasl.mechanism": "PLAIN", "sasl.password": "p-pw"}
    assert sec.principal(spec.client_settings()) == "User:app"


# -- validation through the CLI (exit 2, the field named) ------------------------------------------------------------
def test_sasl_with_an_unknown_user_exits_2(capsys):
    proc = harness(capsys, "validate", "sasl", "--set", "backend.client.sasl.username=bob")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().endswith(
        "backend.kafka: sasl needs backend.client.\"sasl.username\" = one of users (admin, app); got 'bob'")


def test_a_misspelt_client_setting_exits_2(capsys):
    proc = harness(capsys, "validate", "sasl", "--set", "backend.client.sasl.pasword=x")
    assert proc.returncode == 2
    assert "backend.kafka: client: 'sasl.pasword' is not a client security setting" in proc.stderr


def _scenario(tmp_path, backend: str, faults: str = "") -> str:
    path = tmp_path / "s.toml"
    path.write_text(f'name = "s"\n[backend]\n{backend}\n[producers]\nrate = {{ kind = "constant", eps = 10 }}\n'
                    + faults)
    return str(path)


@pytest.mark.parametrize("backend, message", [
    ('mode = "external"\nbootstrap_servers = "h:9092"\nsasl = "PLAIN"\n[backend.users]\nadmin = "x"',
     "backend.kafka: sasl = 'PLAIN' configures the embedded broker (mode = 'embedded'); for mode = 'external' "
     "give the cluster's settings in [backend.client]"),
    ('[backend.client]\n"security.protocol" = "SASL_SSL"\n"sasl.mechanism" = "PLAIN"\n"sasl.username" = "u"\n'
     '"sasl.password" = "p"',
     "backend.kafka: client: security.protocol = 'SASL_SSL' but the embedded broker listens in PLAINTEXT; set "
     "sasl = 'PLAIN', 'SCRAM-SHA-256' or 'SCRAM-SHA-512' for a SASL listener (with security.protocol = 'SASL_SSL' "
     "for TLS)"),
])
def test_security_settings_that_cannot_work_exit_2(tmp_path, backend, message):
    path = _scenario(tmp_path, backend)
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    assert str(err.value) == f"{path}: {message}"


@pytest.mark.parametrize("fault, message", [
    ('kind = "broker"\nat_s = 5', "faults.0 (broker): needs the embedded Kafka backend (backend.mode = \"embedded\"): "
                                  "it stops and starts broker processes"),
    ('kind = "network"\nmode = "latency"\nlatency_ms = 50\nat_s = 5',
     "faults.0 (network): needs backend.kind = 'kafka' with mode = 'embedded' (the proxied listener is added to "
     "its brokers)"),
])
def test_faults_that_need_the_embedded_cluster_are_refused_for_external_through_the_cli(tmp_path, capsys, fault,
                                                                                       message):
    path = _scenario(tmp_path, 'mode = "external"\nbootstrap_servers = "h:9092"', f"[[faults]]\n{fault}\n")
    proc = harness(capsys, "run", path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"error: {path}: {message}"


# -- admin rights ------------------------------------------------------------------------------------------------
def test_faults_declare_the_topic_operations_their_requests_need():
    assert fault_for(DeleteRecordsOptions(at_s=1)).needs() == {"DELETE": "DeleteRecords"}
    assert fault_for(TopicDeleteOptions(at_s=1)).needs() == {"DELETE": "DeleteTopics",
                                                             "DESCRIBE_CONFIGS": "DescribeConfigs"}
    assert fault_for(TopicDeleteOptions(at_s=1, recreate=True)).needs()["CREATE"] == "CreateTopics"


def test_refusals_name_fault_operation_request_and_principal():
    required = [("faults.0 (topic_delete)", {"DELETE": "DeleteTopics", "DESCRIBE_CONFIGS": "DescribeConfigs"}),
                ("faults.1 (retention)", {"ALTER_CONFIGS": "IncrementalAlterConfigs"})]
    allowed = {"READ", "WRITE", "DESCRIBE", "CREATE", "DESCRIBE_CONFIGS"}
    assert refusals(allowed, "events", required, "User:app") == [
        "faults.0 (topic_delete) needs DELETE on topic 'events' (DeleteTopics), which User:app is not allowed",
        "faults.1 (retention) needs ALTER_CONFIGS on topic 'events' (IncrementalAlterConfigs), which User:app is "
        "not allowed"]
    assert refusals(allowed | {"DELETE", "ALTER_CONFIGS"}, "events", required, "User:app") == []
    assert refusals({"ALL"}, "events", required, "User:app") == []
    assert refusals(None, "events", required, "User:app") == []  # no authorizer: the broker does not say


def test_literal_secrets_are_in_the_environment_as_soon_as_the_backend_exists(monkeypatch):
    """The query's driver starts beside the broker, before it learns its source options: the secret its options
    will reference must already be in the environment it inherits."""
    import os

    # a clean copy: other tests of the same session (the plugin's runs, the sasl scenario's) leave their own
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_SECRET_")})
    KafkaSpec(mode="external", bootstrap_servers="h:9092", client=PLAIN).build(None)
    assert [v for k, v in os.environ.items() if k.startswith("HARNESS_SECRET_")] == ["s3cret"]
