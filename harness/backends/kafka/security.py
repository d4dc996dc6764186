"""Kafka client security settings (`[backend.client]`), written once and handed to every client the run makes.

Users write librdkafka names (what confluent-kafka takes), e.g. `security.protocol`, `sasl.mechanism`,
`sasl.username`, `sasl.password`, `ssl.ca.location`. The same settings reach:
- the producers and the harness's own admin/consumer clients (confluent-kafka) as written;
- Spark's Kafka source as Java client names (`kafka.security.protocol`, `kafka.sasl.mechanism`, and a
  `kafka.sasl.jaas.config` derived from username/password for PLAIN and SCRAM), beneath the user's own `kafka.*`
  source options, which win.

Secrets never reach a file the run writes. A secret value is written literally, as `${ENV_VAR}`, or by name with
an `_env` suffix (`sasl.password_env = "KAFKA_PASSWORD"`). Files handed to child processes (the producers'
job.json, the query's source options) carry `${VAR}` references only: a literal secret is put into this process's
environment under a harness name (`HARNESS_SECRET_<n>`, inherited by the children it starts) and the child expands
the reference (`expand`). What is recorded (scenario.json) shows literal secrets as `***` (`redacted`). The rules
are harness.secrets', shared by every option table; this module keeps its names for the client table.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from harness import secrets
from harness.secrets import ENV_SUFFIX, REF, expand

SECRETS = {"sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
           "sasl.oauthbearer.client.secret"}
SETTINGS = {"security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "ssl.ca.location",
            "ssl.certificate.location", "ssl.key.location", "ssl.keystore.location",
            "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification",
            "sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.token.endpoint.url",
            "sasl.oauthbearer.scope", "sasl.kerberos.service.name", "sasl.kerberos.principal",
            "sasl.kerberos.keytab"} | SECRETS
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")
LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                 "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                 "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def _name(key: str) -> str:
    """The setting a key stands for: `sasl.password_env` is `sasl.password`."""
    return key[:-len(ENV_SUFFIX)] if key.endswith(ENV_SUFFIX) else key


def mechanism(client: Mapping[str, Any]) -> str | None:
    value = client.get("sasl.mechanism", client.get("sasl.mechanisms"))
    return None if value is None else str(value).upper()


def protocol(client: Mapping[str, Any]) -> str:
    return str(client.get("security.protocol", "PLAINTEXT")).upper()


def check(client: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> None:
    """ValueError naming the setting when the table holds what no client could use; every referenced environment
    variable must be set (a run must not start with a credential that is not there)."""
    environ = os.environ if environ is None else environ
    names = set()
    for key, value in client.items():
        name = _name(key)
        if name not in SETTINGS:
            raise ValueError(f"{key!r} is not a client security setting; allowed (librdkafka names): "
                             + ", ".join(sorted(SETTINGS)))
        if key.endswith(ENV_SUFFIX) and name not in SECRETS:
            raise ValueError(f"{key!r}: the {ENV_SUFFIX} suffix is for secrets ({', '.join(sorted(SECRETS))})")
        if name in names:
            raise ValueError(f"{name!r} is given twice (as {name!r} and {name + ENV_SUFFIX!r})")
        names.add(name)
        if key.endswith(ENV_SUFFIX):
            if not isinstance(value, str) or not REF.fullmatch("${" + value + "}"):
                raise ValueError(f"{key!r} names an environment variable, got {value!r}")
            refs = [value]
        else:
            refs = REF.findall(str(value))
        for var in refs:
            if var not in environ:
                raise ValueError(f"{key!r} needs the environment variable {var}, which is not set")
    if "sasl.mechanism" in client and "sasl.mechanisms" in client:
        raise ValueError("give sasl.mechanism or sasl.mechanisms, not both")
    proto, mech = protocol(client), mechanism(client)
    if proto not in PROTOCOLS:
        raise ValueError(f"security.protocol = {client['security.protocol']!r}; allowed: {', '.join(PROTOCOLS)}")
    if mech is not None and mech not in MECHANISMS:
        raise ValueError(f"sasl.mechanism = {mech!r}; allowed: {', '.join(MECHANISMS)}")
    if proto.startswith("SASL"):
        if mech is None:
            raise ValueError(f"security.protocol = {proto!r} needs sasl.mechanism ({', '.join(MECHANISMS)})")
        if mech in LOGIN_MODULES and not ({"sasl.username"} <= names and "sasl.password" in names):
            raise ValueError(f"sasl.mechanism = {mech!r} needs sasl.username and sasl.password "
                             f"(or sasl.password{ENV_SUFFIX})")
    elif mech is not None or any(n.startswith("sasl.") for n in names):
        raise ValueError(f"sasl.* settings need security.protocol = 'SASL_PLAINTEXT' or 'SASL_SSL' "
                         f"(it is {proto!r})")


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def referenced(client: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings with every secret as a `${VAR}` reference, safe to write into a child's job file. A literal
    secret is exported into `environ` (this process's environment by default, so children inherit it) under a
    name derived from the value's hash (stable within a run, never the value itself)."""
    ref = secrets.referenced(client, environ, env_suffix=True)  # the rules for every option table (harness.secrets)
    return {k: v if isinstance(v, str) else _text(v) for k, v in ref.items()}


def resolved(client: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """librdkafka settings with the secrets' values, for clients in this process (admin, watermarks, faults)."""
    scratch = dict(os.environ if environ is None else environ)  # literal secrets land here, not in the process
    return {name: expand(value, scratch) for name, value in referenced(client, scratch).items()}


def redacted(client: Mapping[str, Any]) -> dict[str, Any]:
    """What a record may show: literal secrets as `***`; references (`${VAR}`, `*_env`) as written."""
    return secrets.redacted(dict(client))


def _jaas_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def spark_options(client: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The same settings as Spark Kafka source options (Java client names, `kafka.` prefix), secrets as
    `${VAR}` references the query process expands. PLAIN/SCRAM get their JAAS line from username/password;
    `ssl.ca.location` (a PEM file) becomes a PEM truststore; librdkafka's `ssl.endpoint.identification.algorithm
    = none` is Java's empty value. Other settings have no one Java equivalent: give them as
    `spark.source_options."kafka.<java name>"`."""
    ref = referenced(client, environ)
    out: dict[str, str] = {}
    if "security.protocol" in ref:
        out["kafka.security.protocol"] = ref["security.protocol"].upper()
    mech = mechanism(client)
    if mech is not None:
        out["kafka.sasl.mechanism"] = mech
    if mech in LOGIN_MODULES and "sasl.username" in ref and "sasl.password" in ref:
        out["kafka.sasl.jaas.config"] = (f"{LOGIN_MODULES[mech]} required username={_jaas_quote(ref['sasl.username'])}"
                                         f" password={_jaas_quote(ref['sasl.password'])};")
    if "sasl.kerberos.service.name" in ref:
        out["kafka.sasl.kerberos.service.name"] = ref["sasl.kerberos.service.name"]
    if "ssl.ca.location" in ref:
        out["kafka.ssl.truststore.type"] = "PEM"
        out["kafka.ssl.truststore.location"] = ref["ssl.ca.location"]
    if "ssl.endpoint.identification.algorithm" in ref:
        algo = ref["ssl.endpoint.identification.algorithm"]
        out["kafka.ssl.endpoint.identification.algorithm"] = "" if algo.lower() == "none" else algo
    return out


def merge_source_options(derived: Mapping[str, str], user: Mapping[str, str]) -> dict[str, str]:
    """The user's source options over the derived ones; Spark reads option names case-insensitively, so a user's
    `kafka.SASL.jaas.config` replaces the derived `kafka.sasl.jaas.config` rather than sitting beside it."""
    given = {k.lower() for k in user}
    out = {k: v for k, v in derived.items() if k.lower() not in given}
    out.update(user)
    return out


def principal(client: Mapping[str, Any]) -> str:
    """The principal the broker will see for these settings, as Kafka's ACLs name it (best effort for SSL)."""
    if protocol(client).startswith("SASL") and "sasl.username" in client:
        return f"User:{expand(str(client['sasl.username']))}"
    if protocol(client).startswith("SASL"):
        return f"the {mechanism(client)} principal"
    if protocol(client) == "SSL":
        return "the client certificate's principal"
    return "User:ANONYMOUS"


# -- the embedded broker's own listener (KAFKASEC): what a client table may ask of it ---------------------------
EMBEDDED_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")  # the embedded CLIENT listener's, with `sasl`
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
CLIENT_CERTIFICATE = ("ssl.certificate.location", "ssl.key.location", "ssl.keystore.location", "ssl.key.password",
                      "ssl.keystore.password")


def tls_problem(client: Mapping[str, Any]) -> str | None:
    """Why `ssl.*` settings cannot apply: without TLS (security.protocol PLAINTEXT or SASL_PLAINTEXT) no client
    reads them, so a pasted CA or certificate would silently do nothing."""
    given = sorted(n for n in map(_name, client) if n.startswith("ssl.") or n == "enable.ssl.certificate.verification")
    if given and protocol(client) not in TLS_PROTOCOLS:
        return (f"{given[0]} is a TLS setting but security.protocol = {protocol(client)!r} has no TLS: use "
                f"{' or '.join(repr(p) for p in TLS_PROTOCOLS)}, or leave the ssl.* settings out")
    return None


def embedded_problem(sasl: str, client: Mapping[str, Any]) -> str | None:
    """Why these settings cannot reach the embedded broker's SASL listener (None when they can). Its listener is
    SASL_PLAINTEXT or SASL_SSL with the one mechanism `sasl`; with SASL_SSL its certificate is made per run and the
    harness hands its CA to every client (`ssl.ca.location`), and it asks no client for a certificate."""
    proto, mech = protocol(client), mechanism(client)
    if proto not in EMBEDDED_PROTOCOLS or mech != sasl:
        return (f"with sasl = {sasl!r} the embedded listener is SASL_PLAINTEXT or SASL_SSL (TLS with a certificate "
                f"the harness makes) with {sasl}: backend.client says security.protocol = {proto!r}, "
                f"sasl.mechanism = {mech!r}")
    names = {_name(k) for k in client}
    if proto == "SASL_SSL" and "ssl.ca.location" in names:
        return ("ssl.ca.location: the embedded broker's certificate is made for each run and its CA handed to every "
                "client by the harness; leave ssl.ca.location out")
    certificate = sorted(names & set(CLIENT_CERTIFICATE))
    if certificate:
        return (f"{certificate[0]}: the embedded broker asks no client for a certificate (ssl.client.auth = none); "
                "clients authenticate with SASL: leave the client certificate settings out")
    return None
