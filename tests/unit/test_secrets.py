"""harness.secrets: which values are secrets, how records hide them and how child processes still get them; and
`harness validate --show` / error messages / the console showing none (issue 20, "Secrets never written")."""
import json
import re
import subprocess
import sys

import pytest

from harness import secrets
from harness.console import Console

# Spark's own default `spark.redaction.regex` (SparkConf / internal config SECRET_REDACTION_PATTERN): every key it
# hides, the harness hides too.
SPARK_DEFAULT_REDACTION = re.compile(r"(?i)secret|password|token|access[.]?key")

SECRET_KEYS = [
    "kafka.sasl.jaas.config", "sasl.jaas.config", "sasl.password", "ssl.key.password", "ssl.keystore.password",
    "ssl.truststore.password", "sasl.oauthbearer.client.secret", "spark.hadoop.fs.s3a.secret.key",
    "spark.hadoop.fs.s3a.access.key", "spark.hadoop.fs.azure.account.key.acct.blob.core.windows.net",
    "spark.hadoop.fs.azure.sas.fixed.token", "spark.hadoop.fs.azure.account.oauth2.client.secret",
    "spark.authenticate.secret", "spark.ssl.keyPassword", "ssl.key.pem", "ssl.keystore.key",
    "eventhubs.sas.key", "SharedAccessKey", "spark.kubernetes.authenticate.submission.oauthToken",
    "private.key", "hadoop.security.credential", "spark.conf.spark.hadoop.fs.s3a.secret.key",
]
NOT_SECRET_KEYS = [
    "sasl.username", "sasl.mechanism", "security.protocol", "linger.ms", "ssl.key.location",
    "ssl.keystore.location", "ssl.keystore.type", "sasl.oauthbearer.token.endpoint.url",
    "spark.hadoop.fs.s3a.aws.credentials.provider", "delegation.token.expiry.time.ms", "sasl.password_env",
    "spark.kubernetes.authenticate.submission.oauthTokenFile", "eventhubs.connectionString", "startingOffsets",
    "spark.sql.shuffle.partitions", "maxOffsetsPerTrigger",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_keys_that_name_a_secret(key):
    assert secrets.is_secret_key(key)


@pytest.mark.parametrize("key", NOT_SECRET_KEYS)
def test_keys_that_only_point_at_or_describe_one_are_shown(key):
    assert not secrets.is_secret_key(key)


def test_every_key_spark_itself_redacts_is_redacted_here():
    keys = [k for k in SECRET_KEYS + NOT_SECRET_KEYS if SPARK_DEFAULT_REDACTION.search(k)]
    missed = [k for k in keys if not secrets.is_secret_key(k)
              and not k.lower().endswith(("url", "provider", ".ms", "_env", "file"))]
    assert missed == []


def test_connection_strings_keep_everything_but_the_key():
    conn = ("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
            "SharedAccessKey=k3y/Abc+def=;EntityPath=hub")
    assert secrets.scrub(conn) == ("Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName="
                                   "RootManageSharedAccessKey;SharedAccessKey=***;EntityPath=hub")
    sas = "Endpoint=sb://h/;SharedAccessSignature=SharedAccessSignature sr=x&sig=abc%3D&se=1"
    assert "abc%3D" not in secrets.scrub(sas) and "Endpoint=sb://h/" in secrets.scrub(sas)
    storage = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFy==;EndpointSuffix=core.windows.net"
    assert "Zm9vYmFy" not in secrets.scrub(storage) and "AccountName=acct" in secrets.scrub(storage)
    # whatever the key: a connection string's key is hidden, the rest shown
    assert secrets.redacted({"eventhubs.connectionString": conn})["eventhubs.connectionString"].endswith(
        "SharedAccessKey=***;EntityPath=hub")


def test_jaas_lines_and_urls_lose_their_passwords_only():
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="app" '
            'password="p@ss \\"quoted\\" word";')
    assert secrets.scrub(jaas) == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                   'username="app" password="***";')
    broker = 'PlainLoginModule required user_admin="a-pw" user_app="${env:APP}";'
    assert secrets.scrub(broker) == 'PlainLoginModule required user_admin="***" user_app="${env:APP}";'
    assert secrets.scrub("jdbc:postgresql://bob:hunter2@db:5432/x") == "jdbc:postgresql://bob:***@db:5432/x"


def test_a_record_shows_stars_for_secrets_at_any_depth_and_keeps_references():
    data = {"spark": {"conf": {"spark.hadoop.fs.s3a.secret.key": "AKIA-s3cret", "spark.executor.cores": 2},
                      "source_options": {"kafka.sasl.jaas.config": 'X required password="pw";'}},
            "producers": {"client": {"sasl.password": "${KAFKA_PW}", "linger.ms": 5}},
            "backend": {"client": {"sasl.password_env": "KAFKA_PW", "ssl.key.password": 1234}},
            "sweep": {"spark.conf.spark.hadoop.fs.s3a.secret.key": ["a-secret", "b-secret"]}}
    shown = secrets.redacted(data)
    assert shown["spark"]["conf"] == {"spark.hadoop.fs.s3a.secret.key": "***", "spark.executor.cores": 2}
    assert shown["spark"]["source_options"]["kafka.sasl.jaas.config"] == "***"
    assert shown["producers"]["client"] == {"sasl.password": "${KAFKA_PW}", "linger.ms": 5}
    assert shown["backend"]["client"] == {"sasl.password_env": "KAFKA_PW", "ssl.key.password": "***"}
    assert shown["sweep"]["spark.conf.spark.hadoop.fs.s3a.secret.key"] == ["***", "***"]
    assert "s3cret" not in json.dumps(shown) and "a-secret" not in json.dumps(shown)
    assert secrets.redacted_override("spark.conf.spark.hadoop.fs.s3a.secret.key=abc") == \
        "spark.conf.spark.hadoop.fs.s3a.secret.key=***"
    assert secrets.redacted_override("producers.rate.eps=5000") == "producers.rate.eps=5000"


def test_children_get_the_real_value_through_a_reference_the_file_carries():
    environ: dict[str, str] = {}
    options = {"kafka.sasl.jaas.config": 'X required username="u" password="pw-123";', "startingOffsets": "earliest",
               "eventhubs.connectionString": "Endpoint=sb://h/;SharedAccessKeyName=n;SharedAccessKey=k-456",
               "sasl.password": "${ALREADY}", "retries": 3, "enable.idempotence": True}
    ref = secrets.referenced(options, environ)
    written = json.dumps(ref)
    assert "pw-123" not in written and "k-456" not in written
    assert ref["startingOffsets"] == "earliest" and ref["sasl.password"] == "${ALREADY}" and ref["retries"] == 3
    assert all(v.startswith("${HARNESS_SECRET_") for v in (ref["kafka.sasl.jaas.config"],
                                                            ref["eventhubs.connectionString"]))
    assert secrets.expand_all(ref, environ)["kafka.sasl.jaas.config"] == options["kafka.sasl.jaas.config"]
    assert secrets.expand_all(ref, environ)["eventhubs.connectionString"] == options["eventhubs.connectionString"]
    # remembered: free text quoting the literal (an error echoing it) is scrubbed
    assert secrets.scrub("failed to log in with pw-123 and k-456") == "failed to log in with *** and ***"


def test_a_secret_known_after_a_child_started_travels_sealed_with_the_childs_key():
    parent: dict[str, str] = {}
    secrets.ensure_key(parent)
    child_env = dict(parent)  # what the child started with
    ref = secrets.referenced({"kafka.sasl.jaas.config": 'X required password="late-789";'}, parent)
    handed = secrets.sealed_for(ref, child_env, parent)
    assert handed["kafka.sasl.jaas.config"].startswith("${HARNESS_SEALED_") and "late-789" not in json.dumps(handed)
    assert secrets.expand_all(handed, child_env) == {"kafka.sasl.jaas.config": 'X required password="late-789";'}
    stranger = {secrets.KEY_ENV: "00" * 32}
    assert "late-789" not in secrets.expand_all(handed, stranger)["kafka.sasl.jaas.config"]
    # a reference the child's environment has stays as it is
    assert secrets.sealed_for(ref, parent, parent) == ref


def test_a_brokers_properties_reference_the_secret_through_kafkas_env_provider():
    environ: dict[str, str] = {}
    props = secrets.kafka_properties({"num.partitions": 1, "ssl.truststore.password": "tp-321"}, environ)
    assert props["num.partitions"] == "1" and "tp-321" not in json.dumps(props)
    var = re.fullmatch(r"\$\{env:(HARNESS_SECRET_\w+)\}", props["ssl.truststore.password"]).group(1)
    assert environ[var] == "tp-321"
    assert props["config.providers"] == "env"
    assert props["config.providers.env.class"] == "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
    assert secrets.kafka_properties({"num.partitions": "1"}, {}) == {"num.partitions": "1"}  # nothing to hide


def test_spark_is_told_to_redact_the_same_keys_and_keeps_a_users_own_regex():
    conf = secrets.spark_redaction_conf({"spark.redaction.regex": "(?i)mykey"})
    assert conf["spark.redaction.regex"].startswith("(?i:mykey)|")
    pattern = re.compile(conf["spark.redaction.regex"])
    assert all(pattern.search(k) for k in ("kafka.sasl.jaas.config", "fs.azure.account.key.a", "mykey"))
    assert re.compile(conf["spark.sql.redaction.options.regex"]).search("kafka.sasl.jaas.config")


def test_the_console_and_its_log_scrub_a_line_that_quotes_a_secret(tmp_path, capsys):
    secrets.remember("console-secret-42")
    console = Console(quiet=True)
    console.log_to(tmp_path / "console.log")
    console.warn("the broker said: bad password console-secret-42 for SharedAccessKey=abc;")
    console.end_log()
    shown = capsys.readouterr().out + (tmp_path / "console.log").read_text()
    assert "console-secret-42" not in shown and "abc" not in shown and "SharedAccessKey=***" in shown


SCENARIO = """
name = "shown"
[backend]
kind = "kafka"
sasl = "PLAIN"
[backend.users]
admin = "USERS-pw-1"
[backend.client]
"sasl.username" = "admin"
"sasl.password" = "BACKEND-pw-1"
[backend.broker]
"ssl.truststore.password" = "BROKER-pw-2"
[producers]
rate = { kind = "constant", eps = 100 }
[producers.client]
"sasl.password" = "PRODUCER-pw-3"
[spark.source_options]
"kafka.sasl.jaas.config" = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="SOURCE-pw-4";'
[spark.conf]
"spark.hadoop.fs.s3a.secret.key" = "SPARK-pw-5"
"""


def _validate(tmp_path, text, *extra):
    path = tmp_path / "s.toml"
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "harness", "validate", str(path), "--show", *extra],
                          capture_output=True, text=True, timeout=120)


def test_validate_show_prints_no_secret(tmp_path):
    proc = _validate(tmp_path, SCENARIO.replace("BACKEND-pw-1", "USERS-pw-1"),
                     "--set", "spark.conf.spark.hadoop.fs.azure.account.key.a.blob.core.windows.net=SET-pw-6")
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout + proc.stderr
    assert re.findall(r"[A-Z]+-pw-\d", shown) == []
    resolved = json.loads(shown[shown.index("{"):])
    assert resolved["producers"]["client"]["sasl.password"] == "***"
    assert resolved["backend"]["client"]["sasl.password"] == "***"
    assert resolved["backend"]["users"]["admin"] == "***"
    assert resolved["spark"]["conf"]["spark.hadoop.fs.s3a.secret.key"] == "***"
    assert resolved["spark"]["conf"]["spark.hadoop.fs.azure.account.key.a.blob.core.windows.net"] == "***"
    assert resolved["spark"]["source_options"]["kafka.sasl.jaas.config"] == "***"
    assert resolved["backend"]["broker"]["ssl.truststore.password"] == "***"


def test_an_error_that_echoes_a_value_hides_its_secret(tmp_path):
    text = ('name = "bad"\n[producers]\nrate = { kind = "constant", eps = 100 }\n[spark.source_options]\n'
            '"kafka.sasl.jaas.config" = [\'X required username="u" password="ECHOED-pw-7";\']\n'
            '[producers.client]\n"sasl.password" = ["ECHOED-pw-8"]\n')
    proc = _validate(tmp_path, text, "--set", "spark.conf.spark.hadoop.fs.s3a.secret.key=[\"ECHOED-pw-9\"]")
    assert proc.returncode == 2, proc.stderr
    assert "kafka.sasl.jaas.config" in proc.stderr and "producers.client.sasl.password" in proc.stderr
    assert "spark.hadoop.fs.s3a.secret.key" in proc.stderr
    assert re.findall(r"ECHOED-pw-\d", proc.stdout + proc.stderr) == []


def test_a_soak_keeps_the_backends_secret_and_a_record_with_stars_is_not_replayed(tmp_path):
    from harness.config import ConfigError, load_scenario
    from harness.soak.plan import replayed, resolve

    path = tmp_path / "soak.toml"
    path.write_text(SCENARIO)
    scenario = resolve(load_scenario(str(path))[0])
    assert scenario.backend.client["sasl.password"] == "BACKEND-pw-1"  # what the run's clients log in with
    assert scenario.soak is not None
    run = tmp_path / "run"
    run.mkdir()
    (run / "scenario.json").write_text(json.dumps({"file": str(path), "overrides": [],
                                                   "resolved": secrets.redacted(scenario.model_dump(mode="json"))}))
    with pytest.raises(ConfigError, match=r"backend\.client\.sasl\.password.*never written"):
        replayed(run)


def test_free_text_with_a_secret_setting_shows_the_setting_not_its_value():
    assert secrets.scrub("sweep run 1/2: spark.conf.spark.hadoop.fs.s3a.secret.key=abc, producers.rate.eps=9") == \
        "sweep run 1/2: spark.conf.spark.hadoop.fs.s3a.secret.key=***, producers.rate.eps=9"
    kept = "sasl.oauthbearer.token.endpoint.url=https://login.example/token"
    assert secrets.scrub(kept) == kept
    assert secrets.scrub("password=${PW} ok") == "password=${PW} ok"


def test_every_record_written_hides_a_secret_an_error_text_quoted(tmp_path):
    """result.json's error texts, timeline lines: whatever path a secret took into a record, it is written as ***;
    a private file (a key, mode given) is written as it is."""
    from harness.files import atomic
    from harness.files.jsonl import append_jsonl

    secrets.remember("quoted-in-an-error-77")
    atomic.write_json(tmp_path / "result.json", {"error": "auth failed for password quoted-in-an-error-77"})
    append_jsonl(tmp_path / "timeline.jsonl", {"detail": "Endpoint=sb://x/;SharedAccessKey=abcd1234efgh;"})
    written = (tmp_path / "result.json").read_text() + (tmp_path / "timeline.jsonl").read_text()
    assert "quoted-in-an-error-77" not in written and "abcd1234efgh" not in written
    assert json.loads((tmp_path / "result.json").read_text())["error"].endswith("***")
    atomic.write_text(tmp_path / "key.pem", "quoted-in-an-error-77", mode=0o600)
    assert (tmp_path / "key.pem").read_text() == "quoted-in-an-error-77"
