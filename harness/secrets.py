"""Secrets in a scenario's option tables: handed to the processes that need them, never written or printed.

Every option table a scenario passes through verbatim (spark.source_options, spark.conf, producers.client,
backend.client, backend.broker, stream.config) and the connection strings the harness makes itself can hold a
credential. Why one module: a rule kept per table is a table forgotten, and the issue that asked for this found
four files carrying a JAAS password. The rules:

- **Which values are secret.** A value whose key names a secret (`is_secret_key`: password, secret, jaas, token,
  credential, access/account/SAS keys, private keys; a key that only *points* at one, such as `...token.endpoint
  .url` or `...credentials.provider`, is not), and inside any text the part that is a secret whatever its key:
  a connection string's `SharedAccessKey=...`/`SharedAccessSignature=...`, a JAAS line's `password="..."`, a URL's
  `user:password@` (`scrub`).
- **Processes get the real value.** Files handed to a child process (the query's job.json and source.json, the
  producers' job.json, a broker's server.properties) carry `${VAR}` references only (`referenced`): a literal
  secret is put into this process's environment as `HARNESS_SECRET_<hash>` (a hash of key and value, never the
  value), which every child inherits, and the child expands the reference (`expand`, `expand_tree`).
- **Records show `***`.** What the harness writes for people (scenario.json, reports, `validate --show`, the
  console and its log) goes through `redacted` (a whole structure) or `scrub` (free text, e.g. an error that
  echoes a value): secrets become `***`; a reference (`${VAR}`, a `*_env` name) is kept, it reveals nothing.
  Literal values met by `referenced` are remembered (`remember`), so free text quoting one is scrubbed too.
- **Spark's own logs.** `spark_redaction_conf` widens Spark's `spark.redaction.regex` (event log, UI, logged conf)
  and `spark.sql.redaction.options.regex` (plans' data source options) to the same key words.
"""
from __future__ import annotations

import hashlib
import os
import re
from typing import Any, Mapping

REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # ${VAR}; Kafka's own ${provider:key} has a colon: untouched
# any reference: ours, or a config provider's (Kafka's `${env:VAR}`, `${file:/path:key}`), resolved by its reader
ANY_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_.-]*(?::[^}]*)?\}")
KAFKA_ENV_PROVIDER = {"config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider"}
ENV_SUFFIX = "_env"
REDACTED = "***"
VAR_PREFIX = "HARNESS_SECRET_"

# Key words naming a secret, matched anywhere in the lower-cased key (Spark's default spark.redaction.regex is
# `secret|password|token|access[.]?key`; Hadoop's sensitive keys add credential and fs.azure.account.key).
SECRET_WORDS = (r"password|passwd|passphrase|secret|jaas|token|credential|access[._-]?key|account[._-]?key"
                r"|sas[._-]?key|sharedaccesskey|sharedaccesssignature|private[._-]?key|ssl[._-]key[._-]pem"
                r"|keystore[._-]key|keystore[._-]certificate[._-]chain[._-]?key")
_SECRET_KEY = re.compile(SECRET_WORDS)
# ...unless the key only points at a secret or describes it: a location, a class, a type, a duration.
_NOT_A_SECRET = ("url", "uri", "endpoint", "location", "path", "file", "dir", "provider", "providers", "class",
                 "type", "method", "mechanism", "mechanisms", "algorithm", "algorithms", "enable", "enabled",
                 ".ms", ".bytes", ".size", ".count", ".regex", "name", "header", ENV_SUFFIX)

# Secret parts of a text whatever its key: connection strings, JAAS options, URL user info.
_CONN_PART = re.compile(r"(?i)\b(SharedAccessKey|AccountKey|Password|Pwd|sig)(\s*=\s*)([^;&\"'\s]+)"
                        r"|\b(SharedAccessSignature)(\s*=\s*)([^;\"']+)")
# `key=value` where the key names a secret (a JAAS option, a `--set`, a properties line); JAAS's broker accounts
_JAAS_PART = re.compile(r"(?i)(?<![\w.-])([\w.-]*(?:" + SECRET_WORDS + r")[\w.-]*|user_[\w.-]+)(\s*=\s*)"
                        r"(\"(?:[^\"\\]|\\.)*\"|[^\s;,\"&]+)")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+):([^@\s/]+)@")
MIN_REMEMBERED = 4  # shorter literals are not scrubbed from free text (they would blank unrelated words)

_remembered: set[str] = set()


def is_secret_key(key: str) -> bool:
    """The key (an option name, or a dotted path ending in one) names a secret value."""
    low = str(key).lower()
    return bool(_SECRET_KEY.search(low)) and not low.endswith(_NOT_A_SECRET)


def is_reference(value: Any) -> bool:
    """A value that is one `${VAR}` reference and nothing else: safe to show."""
    return isinstance(value, str) and bool(ANY_REF.fullmatch(value.strip()))


def remember(value: Any) -> None:
    """A literal secret this process knows: `scrub` hides it in any text from now on."""
    text = _text(value)
    if len(text) >= MIN_REMEMBERED:
        _remembered.add(text)


def _names_secret(key: str) -> bool:
    return key.lower().startswith("user_") or is_secret_key(key)


def _keep_refs(pattern_value: str, hidden: str) -> str:
    return pattern_value if is_reference(pattern_value.strip('"')) else hidden


def scrub(text: str) -> str:
    """Free text with every secret part as `***`: remembered literals, connection strings' keys, JAAS passwords,
    URL passwords. References (`${VAR}`) stay."""
    if not isinstance(text, str) or not text:
        return text
    for value in sorted(_remembered, key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    text = _CONN_PART.sub(lambda m: _conn_name(m) + _conn_eq(m) + _keep_refs(_conn_value(m), REDACTED), text)
    text = _JAAS_PART.sub(lambda m: m.group(0) if not _names_secret(m.group(1)) else m.group(1) + m.group(2)
                          + _keep_refs(m.group(3), '"***"' if m.group(3).startswith('"') else REDACTED), text)
    return _URL_USERINFO.sub(lambda m: f"{m.group(1)}:{_keep_refs(m.group(2), REDACTED)}@", text)


def _conn_name(m: re.Match) -> str:
    return m.group(1) or m.group(4)


def _conn_eq(m: re.Match) -> str:
    return m.group(2) if m.group(1) else m.group(5)


def _conn_value(m: re.Match) -> str:
    return m.group(3) if m.group(1) else m.group(6)


def secret_parts(text: str) -> list[str]:
    """The literal secret parts of a text (a connection string's key, a JAAS password, a URL's password)."""
    if not isinstance(text, str):
        return []
    parts = [_conn_value(m) for m in _CONN_PART.finditer(text)]
    parts += [m.group(3)[1:-1] if m.group(3).startswith('"') else m.group(3) for m in _JAAS_PART.finditer(text)
              if _names_secret(m.group(1))]
    parts += [m.group(2) for m in _URL_USERINFO.finditer(text)]
    return [p for p in parts if p and not is_reference(p)]


def has_secret_part(text: str) -> bool:
    """The text holds a literal secret part (`scrub` would change it, remembered literals aside)."""
    return bool(secret_parts(text))


def redact_value(key: str, value: Any) -> Any:
    """One option's value as a record may show it."""
    if str(key).endswith(ENV_SUFFIX) and is_secret_key(str(key)[:-len(ENV_SUFFIX)]):
        return value  # the name of an environment variable
    if is_secret_key(key):
        if isinstance(value, list):
            return [redact_value(key, v) for v in value]
        if isinstance(value, dict):
            return redacted(value)
        return value if is_reference(value) else REDACTED
    return redacted(value)


def kafka_properties(props: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A broker's server.properties entries with every literal secret as Kafka's own `${env:VAR}` (resolved by its
    EnvVarConfigProvider, which this adds to `config.providers`): the file the broker reads holds no secret."""
    ref = referenced(props, environ)
    out = {k: REF.sub(lambda m: "${env:" + m.group(1) + "}", v) if isinstance(v, str) and v != props.get(k) else
           _text(v) for k, v in ref.items()}
    if out != {k: _text(v) for k, v in props.items()}:
        providers = [p.strip() for p in str(out.get("config.providers", "")).split(",") if p.strip()]
        if "env" not in providers:
            out["config.providers"] = ",".join([*providers, "env"])
            out.update(KAFKA_ENV_PROVIDER)
    return out


def redacted(data: Any) -> Any:
    """A structure (a scenario's dump, a job, a record) with every secret as `***`, at any depth."""
    if isinstance(data, Mapping):
        return {k: redact_value(k, v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [redacted(v) for v in data]
    if isinstance(data, str):
        return scrub(data)
    return data


def scrubbed(data: Any) -> Any:
    """A structure with `scrub` applied to every string in it (keys too), before it is serialised: scrubbing the
    JSON text instead would misread its escaped quotes."""
    if isinstance(data, Mapping):
        return {scrub(k) if isinstance(k, str) else k: scrubbed(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [scrubbed(v) for v in data]
    return scrub(data) if isinstance(data, str) else data


def hidden_paths(data: Any, prefix: str = "") -> list[str]:
    """Where a record (`redacted`) shows `***` instead of a value: dotted paths, for a message."""
    if isinstance(data, Mapping):
        return [p for k, v in data.items() for p in hidden_paths(v, f"{prefix}{k}.")]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in hidden_paths(v, f"{prefix}{i}.")]
    return [prefix[:-1]] if isinstance(data, str) and REDACTED in data else []


def redacted_override(text: str) -> str:
    """A `--set dotted.key=value` as a record may show it."""
    key, sep, value = str(text).partition("=")
    if not sep:
        return scrub(text)
    if is_secret_key(key.strip()) and not is_reference(value.strip().strip("\"'")):
        return f"{key}={REDACTED}"
    return f"{key}={scrub(value)}"


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def secret_var(name: str, value: str) -> str:
    """The environment variable a literal secret travels in: derived from a hash, stable within a run."""
    return VAR_PREFIX + hashlib.sha256(f"{name}\0{value}".encode()).hexdigest()[:12].upper()


def referenced(options: Mapping[str, Any], environ: Mapping[str, str] | None = None, *,
               env_suffix: bool = False) -> dict[str, Any]:
    """The options with every literal secret as a `${VAR}` reference, safe to write into a child's job file; the
    literal is exported into `environ` (this process's environment by default, so children inherit it). Values
    stay as they were (a number stays a number) unless moved. `env_suffix`: `<secret key>_env = "VAR"` stands for
    `<secret key> = "${VAR}"` (backend.client's convention)."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for key, value in options.items():
        if env_suffix and key.endswith(ENV_SUFFIX) and is_secret_key(key[:-len(ENV_SUFFIX)]):
            out[key[:-len(ENV_SUFFIX)]] = "${" + str(value) + "}"
            continue
        if isinstance(value, (dict, list)) or value is None:
            out[key] = value
            continue
        text = _text(value)
        literal = (is_secret_key(key) and not ANY_REF.search(text)) or has_secret_part(text)
        if literal:
            var = secret_var(key, text)
            environ[var] = text  # type: ignore[index]
            for literal_part in [text, *secret_parts(text)]:
                remember(literal_part)
            out[key] = "${" + var + "}"
        else:
            if is_secret_key(key):
                for ref in REF.findall(text):  # a secret given as ${VAR}: its value is hidden from free text too
                    if ref in environ:
                        remember(environ[ref])
            out[key] = value
    return out


# A secret that appears after a child started (a source handed to a driver already running) cannot travel in its
# environment: it is sealed with a key the child got in its environment when it started (`ensure_key`), a SHA-256
# keystream under a fresh nonce (stdlib only), and written as `${HARNESS_SEALED_<nonce><ciphertext>}`.
KEY_ENV = "HARNESS_SECRET_KEY"
SEALED_PREFIX = "HARNESS_SEALED_"
_NONCE = 16


def ensure_key(environ: Mapping[str, str] | None = None) -> None:
    """This process's sealing key, made once and inherited by every child started after this call."""
    environ = os.environ if environ is None else environ
    if KEY_ENV not in environ:
        environ[KEY_ENV] = os.urandom(32).hex()  # type: ignore[index]


def _keystream(key: bytes, nonce: bytes, n: int) -> bytes:
    blocks = (hashlib.sha256(key + nonce + i.to_bytes(8, "big")).digest() for i in range((n + 31) // 32))
    return b"".join(blocks)[:n]


def seal(value: str, environ: Mapping[str, str] | None = None) -> str:
    """A `${...}` reference only a child holding this process's key (`ensure_key`) can expand."""
    environ = os.environ if environ is None else environ
    ensure_key(environ)
    data, nonce = value.encode(), os.urandom(_NONCE)
    cipher = bytes(a ^ b for a, b in zip(data, _keystream(bytes.fromhex(environ[KEY_ENV]), nonce, len(data))))
    return "${" + SEALED_PREFIX + (nonce + cipher).hex() + "}"


def _unseal(name: str, environ: Mapping[str, str]) -> str | None:
    if not name.startswith(SEALED_PREFIX) or KEY_ENV not in environ:
        return None
    raw = bytes.fromhex(name[len(SEALED_PREFIX):])
    nonce, cipher = raw[:_NONCE], raw[_NONCE:]
    stream = _keystream(bytes.fromhex(environ[KEY_ENV]), nonce, len(cipher))
    try:
        return bytes(a ^ b for a, b in zip(cipher, stream)).decode()
    except UnicodeDecodeError:  # sealed under another key: not ours to open
        return None


def sealed_for(options: Mapping[str, Any], known: Mapping[str, str],
               environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`options` (references already, `referenced`) for a child that started with the environment `known`: a
    harness secret's reference the child's environment lacks is sealed instead (`seal`)."""
    environ = os.environ if environ is None else environ

    def one(m: re.Match) -> str:
        var = m.group(1)
        if var.startswith(VAR_PREFIX) and var not in known and var in environ:
            return seal(environ[var], environ)
        return m.group(0)
    return {k: REF.sub(one, v) if isinstance(v, str) else v for k, v in options.items()}


def expand(value: str, environ: Mapping[str, str] | None = None) -> str:
    """`${VAR}` replaced by the environment's value (left as is when the variable is not set); a sealed value
    opened with the key this process inherited."""
    environ = os.environ if environ is None else environ

    def one(m: re.Match) -> str:
        if m.group(1) in environ:
            return environ[m.group(1)]
        opened = _unseal(m.group(1), environ)
        return m.group(0) if opened is None else opened
    return REF.sub(one, value)


def expand_all(settings: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every string value expanded (what a child process does with the settings its job file carries)."""
    return {k: expand(v, environ) if isinstance(v, str) else v for k, v in settings.items()}


def expand_tree(data: Any, environ: Mapping[str, str] | None = None) -> Any:
    """`expand_all` at any depth (a job file's nested tables)."""
    if isinstance(data, Mapping):
        return {k: expand_tree(v, environ) for k, v in data.items()}
    if isinstance(data, list):
        return [expand_tree(v, environ) for v in data]
    return expand(data, environ) if isinstance(data, str) else data


def spark_redaction_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """Spark's redaction regexes widened to these key words (a user's own regex kept, joined with ours): Spark
    then shows `*********(redacted)` for them in its event log, its UI and the conf it logs."""
    ours = "(?i:" + SECRET_WORDS + "|connection[._-]?string)"
    out = {}
    for key, default in (("spark.redaction.regex", r"(?i)secret|password|token|access[.]?key"),
                         ("spark.sql.redaction.options.regex", r"(?i)url")):
        user = conf.get(key, default)
        # a leading (?i) scoped to its own group: the same meaning in Java, and the whole stays one valid regex
        user = f"(?i:{user[4:]})" if user.startswith("(?i)") else f"(?:{user})"
        out[key] = f"{user}|{ours}"
    return out
