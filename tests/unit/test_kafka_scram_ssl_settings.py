"""SASL_SSL with SCRAM on the embedded broker and `harness kafka up`: what is refused up front, what the broker is
configured with, what is printed to paste.

Expected values are written out by hand from Kafka's documented names (server.properties: listener.security.
protocol.map, listener.name.<l>.<mechanism>.sasl.jaas.config, ssl.keystore.*; the SCRAM login module's class) and
librdkafka's (CONFIGURATION.md), never produced by the functions under test. That the broker really speaks SASL_SSL
with these is proven against the real broker in tests/integration/test_kafka_scram_ssl.py.
"""
import subprocess

import pytest

from harness.backends.kafka import security as sec
from harness.backends.kafka import standalone
from harness.backends.kafka.embedded import EmbeddedKafka, Node
from harness.backends.kafka.spec import KafkaSpec
from harness.backends.kafka.tls import ServerTLS
from harness.config import ConfigError, load_scenario

SCRAM_SSL = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "app"}
USERS = {"admin": "admin-pw", "app": "app-pw"}


def harness(capsys, *args):
    from harness.cli import main

    code = main(list(args))
    return subprocess.CompletedProcess(args, code, *capsys.readouterr())


def test_the_shipped_scenario_asks_for_scram_over_tls():
    scenario, _, _ = load_scenario("sasl-scram-ssl")
    spec = scenario.backend
    assert spec.sasl == "SCRAM-SHA-512"
    assert spec.client_settings() == {**SCRAM_SSL, "sasl.password": "app-secret"}
    backend = spec.build(scenario.stream)
    assert isinstance(backend, EmbeddedKafka) and backend.tls and backend.client_protocol == "SASL_SSL"


@pytest.mark.parametrize("sasl", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_over_plain_tcp_is_a_sasl_plaintext_listener(sasl):
    spec = KafkaSpec(sasl=sasl, users=USERS, client={"sasl.username": "app"})
    assert spec.client_settings() == {"sasl.username": "app", "security.protocol": "SASL_PLAINTEXT",
                                      "sasl.mechanism": sasl, "sasl.password": "app-pw"}
    backend = spec.build(None)
    assert not backend.tls and backend.client_protocol == "SASL_PLAINTEXT"


def _scenario(tmp_path, backend: str) -> str:
    path = tmp_path / "s.toml"
    path.write_text(f'name = "s"\n[backend]\n{backend}\n[producers]\nrate = {{ kind = "constant", eps = 10 }}\n')
    return str(path)


EMBEDDED = ('sasl = "SCRAM-SHA-512"\n[backend.users]\napp = "p"\nadmin = "a"\n[backend.client]\n'
            '"sasl.username" = "app"\n')


@pytest.mark.parametrize("backend, message", [
    (EMBEDDED + '"security.protocol" = "SASL_SSL"\n"sasl.mechanism" = "PLAIN"',
     "with sasl = 'SCRAM-SHA-512' the embedded listener is SASL_PLAINTEXT or SASL_SSL (TLS with a certificate the "
     "harness makes) with SCRAM-SHA-512: backend.client says security.protocol = 'SASL_SSL', sasl.mechanism = "
     "'PLAIN'"),
    (EMBEDDED + '"security.protocol" = "SSL"',
     "with sasl = 'SCRAM-SHA-512' the embedded listener is SASL_PLAINTEXT or SASL_SSL (TLS with a certificate the "
     "harness makes) with SCRAM-SHA-512: backend.client says security.protocol = 'SSL', sasl.mechanism = "
     "'SCRAM-SHA-512'"),
    (EMBEDDED + '"security.protocol" = "SASL_SSL"\n"ssl.ca.location" = "/etc/ca.pem"',
     "ssl.ca.location: the embedded broker's certificate is made for each run and its CA handed to every client by "
     "the harness; leave ssl.ca.location out"),
    (EMBEDDED + '"security.protocol" = "SASL_SSL"\n"ssl.certificate.location" = "/etc/me.pem"',
     "ssl.certificate.location: the embedded broker asks no client for a certificate (ssl.client.auth = none); "
     "clients authenticate with SASL: leave the client certificate settings out"),
    (EMBEDDED + '"security.protocol" = "SASL_PLAINTEXT"\n"enable.ssl.certificate.verification" = false',
     "client: enable.ssl.certificate.verification is a TLS setting but security.protocol = 'SASL_PLAINTEXT' has no "
     "TLS: use 'SSL' or 'SASL_SSL', or leave the ssl.* settings out"),
    ('mode = "external"\nbootstrap_servers = "h:9093"\n[backend.client]\n"security.protocol" = "SASL_PLAINTEXT"\n'
     '"sasl.mechanism" = "SCRAM-SHA-512"\n"sasl.username" = "u"\n"sasl.password" = "p"\n"ssl.ca.location" = "/c.pem"',
     "client: ssl.ca.location is a TLS setting but security.protocol = 'SASL_PLAINTEXT' has no TLS: use 'SSL' or "
     "'SASL_SSL', or leave the ssl.* settings out"),
    ('[backend.users]\napp = "p"',
     "users are the embedded broker's SASL accounts: they need sasl = 'PLAIN', 'SCRAM-SHA-256' or 'SCRAM-SHA-512'"),
])
def test_combinations_no_listener_can_serve_are_refused(tmp_path, backend, message):
    path = _scenario(tmp_path, backend)
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    assert str(err.value) == f"{path}: backend.kafka: {message}"


def test_an_unknown_mechanism_exits_2_naming_the_field(tmp_path, capsys):
    path = _scenario(tmp_path, EMBEDDED.replace("SCRAM-SHA-512", "SCRAM-SHA-1"))
    proc = harness(capsys, "validate", path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "sasl" in proc.stderr and "SCRAM-SHA-512" in proc.stderr


def test_broker_properties_for_a_scram_sasl_ssl_listener(tmp_path):
    broker = EmbeddedKafka(sasl="SCRAM-SHA-512", users=USERS, super_users=["admin"], tls=True)
    broker.server_tls = ServerTLS(tmp_path / "ca.pem", tmp_path / "server.p12", "not-in-any-file")
    props = broker._sasl_props(Node(1, 9001, 9002, tmp_path, client_port=9003), 0)
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,CLIENT:SASL_SSL"
    assert props["listeners"] == ("PLAINTEXT://127.0.0.1:9001,CONTROLLER://127.0.0.1:9002,"
                                  "CLIENT://127.0.0.1:9003")
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    # SCRAM users live in the cluster's metadata (created through the admin API), not in the JAAS line
    assert props["listener.name.client.scram-sha-512.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    assert props["ssl.keystore.location"] == str(tmp_path / "server.p12")
    assert props["ssl.keystore.password"] == "${env:HARNESS_KAFKA_TLS_PASSWORD}"
    assert "not-in-any-file" not in repr(props) and "not-in-any-file" not in repr(broker.server_tls)
    assert broker._broker_env()["HARNESS_KAFKA_TLS_PASSWORD"] == "not-in-any-file"
    # clients are handed the CA made for the broker; a CA of their own is kept
    broker.set_client({**SCRAM_SSL, "sasl.password": "app-pw"})
    assert broker.client["ssl.ca.location"] == str(tmp_path / "ca.pem")


def test_the_embedded_broker_refuses_tls_without_sasl_and_an_unknown_mechanism():
    with pytest.raises(Exception, match="tls needs sasl"):
        EmbeddedKafka(tls=True)
    with pytest.raises(Exception, match="allowed: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"):
        EmbeddedKafka(sasl="GSSAPI", users=USERS)


def test_spark_gets_the_scram_login_module_and_a_pem_truststore():
    options = sec.spark_options({**SCRAM_SSL, "sasl.password": "${KPW}", "ssl.ca.location": "/run/ca.pem"},
                                environ={})
    assert options == {
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="app" password="${KPW}";',
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": "/run/ca.pem"}


# -- harness kafka up's options ------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--security-protocol", "SASL_SSL"],
     "--security-protocol SASL_SSL needs --sasl-mechanism, --user, --password-env"),
    (["--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512", "--user", "admin",
      "--password-env", "KAFKASEC_UNSET_VAR"],
     "--password-env KAFKASEC_UNSET_VAR: the environment variable KAFKASEC_UNSET_VAR is not set (or empty); export "
     "the password there"),
    (["--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512", "--user", "admin",
      "--password-env", "hunter2!"],
     "--password-env 'hunter2!': the name of an environment variable (letters, digits, '_'), not the password "
     "itself"),
    (["--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512", "--user", "a b",
      "--password-env", "HOME"], "--user 'a b': not a user name"),
    (["--user", "admin"], "--user needs --security-protocol SASL_PLAINTEXT or SASL_SSL (it is PLAINTEXT)"),
])
def test_kafka_up_refuses_incomplete_security_before_starting_anything(capsys, monkeypatch, tmp_path, args,
                                                                       message):
    monkeypatch.setattr(standalone, "up", lambda **kw: pytest.fail("a broker was started"))
    proc = harness(capsys, "kafka", "up", *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith(f"error: {message}")


def test_kafka_status_takes_no_security_options(capsys):
    proc = harness(capsys, "kafka", "status", "--user", "admin")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: harness kafka status: the security options are for `harness kafka up`"


def test_the_settings_printed_to_paste_name_the_variable_never_the_password(monkeypatch):
    monkeypatch.setenv("KAFKASEC_PW", "the-real-password")
    request = standalone.security_request("sasl_ssl", "scram-sha-256", "admin", "KAFKASEC_PW")
    assert request == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                       "sasl.username": "admin", "sasl.password": "${KAFKASEC_PW}"}
    lines = standalone.client_lines({"bootstrap": "127.0.0.1:1234",
                                     "client": {**request, "ssl.ca.location": "/s/ca.pem"}})
    assert lines[:6] == ["bootstrap.servers=127.0.0.1:1234", "security.protocol=SASL_SSL",
                         "sasl.mechanism=SCRAM-SHA-256", "sasl.username=admin", "sasl.password=${KAFKASEC_PW}",
                         "ssl.ca.location=/s/ca.pem"]
    assert "kafka.ssl.truststore.location=/s/ca.pem" in lines
    assert ('kafka.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="admin" password="${KAFKASEC_PW}";') in lines
    assert "the-real-password" not in "\n".join(lines)
    assert standalone.client_lines({"bootstrap": "127.0.0.1:1"}) == ["bootstrap.servers=127.0.0.1:1"]


# -- the TCP proxy in front of a TLS listener ------------------------------------------------------------------------
def _client_hello() -> bytes:
    """A real TLS ClientHello, as Python's own TLS stack (OpenSSL) sends it first on a connection."""
    import ssl

    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_the_proxy_records_a_tls_connection_as_encrypted_not_as_garbage():
    from harness.netproxy import Conn

    conn = Conn(id=1, broker=0, t=0.0, client=None)
    assert conn.feed(_client_hello())
    assert conn.header == {"client_id": None, "error": "TLS: the request is encrypted (no client.id)"}


def test_counting_consumers_through_the_proxy_is_refused_over_tls(tmp_path):
    path = _scenario(tmp_path, 'proxy = true\n' + EMBEDDED + '"security.protocol" = "SASL_SSL"')
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    assert str(err.value) == (
        f"{path}: backend.kafka: proxy = true records each connection's client.id from its first request, which "
        "SASL_SSL encrypts: use security.protocol = 'SASL_PLAINTEXT' to count consumers (network faults still work "
        "over TLS)")
