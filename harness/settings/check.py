"""Setting names in a scenario's pass-through tables, judged by the software they are handed to.

A misspelt setting is the quietest bad input there is: Spark ignores an unknown `spark.*` key, Kafka's Java clients
log a warning nobody reads, and the run PASSes having measured something other than what was asked. So, at
validate time:

- `spark.conf`: `spark.*` keys Spark knows (harness.settings.catalogue), or a user's own listed in
  `spark.conf_allow` (an entry ending in `*` allows a prefix). A key that does not start with `spark.` names no
  Spark setting (Spark's own all do; Hadoop's go under `spark.hadoop.`): it is a misplaced prefix or a typo more
  often than a key the user's code reads, so it is refused unless listed there too.
- `spark.source_options` on Kafka: a `kafka.<name>` option goes to the consumer (Spark strips `kafka.`): <name>
  must be a consumer setting of the kafka-clients Spark's Kafka source runs.
- `stream.config` on Kafka: topic configs (LogConfig); `backend.broker`: broker configs (KafkaConfig).
- `producers.client` and `backend.client` on Kafka: librdkafka judges each name and value itself
  (harness.settings.librdkafka); on Event Hubs, the sender's own settings.

Values too (harness.settings.values): each known setting's value against the type Spark or Kafka gave it, so
`spark.sql.adaptive.enabled = "maybe"`, `spark.network.timeout = "1 secnd"` or `retention.ms = "abc"` is refused
now, not when the query plans or the topic is made.

Each message starts with the setting's full field path (`spark.conf.spark.sql.shufle.partitions: ...`), so
harness.config can tell a `--set` of that key from the file (and blames the one that gave it).

Each check runs only when its table has something to check, so a scenario without such keys never needs the JVM.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from harness.secrets import REDACTED, is_secret_key
from harness.settings.librdkafka import knows, refusal
from harness.settings.catalogue import CatalogueError, kafka_names, spark_missing, spark_names
from harness.settings.values import kafka_value_problem, spark_value_problem
from harness.text.suggest import did_you_mean, quote

# Java client configs Kafka takes under a prefix: config providers (`config.providers.<name>.class`, `.param.`)
JAVA_PREFIXES = ("config.providers.",)
# broker configs per listener: `listener.name.<listener>.<config>` (and `.<mechanism>.sasl.jaas.config`)
BROKER_PREFIXES = JAVA_PREFIXES + ("listener.name.",)
ALLOW_ENTRY = re.compile(r"[^*\s]+\*?")  # spark.conf_allow: a key, or a prefix ending in *


def _allowed(key: str, allow: Iterable[str]) -> bool:
    return any(key.startswith(a[:-1]) if a.endswith("*") else key == a for a in allow)


def _unknown(field: str, what: str, key: str, known: Iterable[str], hint: str = "") -> str:
    return f"{field}.{key}: unknown {what} {quote(key)}{did_you_mean(key, known)}{hint}"


def _shown(key: str, value: Any) -> str:
    """The value as an error message may show it: never a secret's (the message is printed and logged)."""
    return REDACTED if is_secret_key(key) else quote(str(value).lower() if isinstance(value, bool) else value)


def _refused_value(field: str, key: str, value: Any, why: str, software: str) -> str:
    return f"{field}.{key}: {software} refuses {_shown(key, value)}: {why}"


def _kafka_values(field: str, config: Mapping[str, Any], types: Mapping[str, Any], software: str,
                  strip: int = 0) -> list[str]:
    found = []
    for key, value in config.items():
        kafka_type = types.get(key[strip:])
        why = kafka_value_problem(value, kafka_type) if kafka_type else None
        if why:
            found.append(_refused_value(field, key, value, why, software))
    return found


def allow_problems(allow: Iterable[str]) -> list[str]:
    """`spark.conf_allow` entries that are neither a key nor a prefix (judged with or without Spark at hand)."""
    for i, entry in enumerate(allow):
        if not ALLOW_ENTRY.fullmatch(entry):
            return [f"spark.conf_allow.{i}: {quote(entry)} is not a key or a prefix; allowed: a key "
                    "(\"spark.myapp.flag\") or a prefix ending in * (\"spark.myteam.*\"), no space and no other *"]
    return []


def spark_conf_problems(conf: Mapping[str, Any], allow: Iterable[str]) -> list[str]:
    allow = list(allow)
    found = allow_problems(allow)
    if found:
        return found
    keys = [k for k in conf if not _allowed(k, allow)]
    if not keys:
        return []
    names = spark_names()
    spark = f"Spark {names.version.split('-')[0]}"
    found = []
    for key in keys:
        if not key.startswith("spark."):
            near = did_you_mean(key, names.keys)
            found.append(f"spark.conf.{key}: {quote(key)} is not a {spark} setting{near + ' ' if near else ': '}"
                         "Spark's own start with 'spark.' (Hadoop's go under 'spark.hadoop.'); a key your own code "
                         "reads: list it in spark.conf_allow")
            continue
        if not names.knows(key):
            found.append(_unknown("spark.conf", f"{spark} setting", key, names.keys,
                                  " (a key of your own: list it in spark.conf_allow)"))
        elif key in names.types:
            why = spark_value_problem(conf[key], names.types[key])
            if why:
                found.append(_refused_value("spark.conf", key, conf[key], why, spark))
    return found


def consumer_option_problems(options: Mapping[str, Any]) -> list[str]:
    names = spark_names()
    return _client_option_problems("spark.source_options", options, names.consumer, names.consumer_types,
                                   "consumer", "option")


def producer_option_problems(options: Mapping[str, Any]) -> list[str]:
    """`spark.sink_options` of the Kafka sink: a `kafka.<name>` option goes to Spark's Kafka producer without its
    prefix; <name> must be a Java producer setting (the Kafka clients the harness runs know them)."""
    names = kafka_names()
    return _client_option_problems("spark.sink_options", options, names.producer, names.types.get("producer", {}),
                                   "producer", "sink option")


def _client_option_problems(field: str, options: Mapping[str, Any], settings, types, role: str,
                            what: str) -> list[str]:
    """The `kafka.<name>` options of `field` that Spark hands its Kafka `role` (without the prefix): unknown
    names, and known ones whose values that client would refuse."""
    wanted = [k for k in options if k.lower().startswith("kafka.") and not k[6:].startswith(JAVA_PREFIXES)]
    if not wanted:
        return []
    unknown = [_unknown(field, f"Kafka {role} setting", k, [f"kafka.{c}" for c in settings],
                        f" (a kafka.* {what} goes to Spark's Kafka {role} without its prefix)")
               for k in wanted if k[6:] not in settings]
    known = {k: options[k] for k in wanted if k[6:] in settings}
    return unknown + _kafka_values(field, known, types, f"Spark's Kafka {role}", strip=6)


def topic_config_problems(config: Mapping[str, Any]) -> list[str]:
    if not config:
        return []
    names = kafka_names()
    return [_unknown("stream.config", "Kafka topic config", k, names.topic) for k in config if k not in names.topic] \
        + _kafka_values("stream.config", config, names.types["topic"], "Kafka's topic config")


def broker_config_problems(config: Mapping[str, Any]) -> list[str]:
    keys = [k for k in config if not k.startswith(BROKER_PREFIXES)]
    if not keys:
        return []
    names = kafka_names()
    return [_unknown("backend.broker", "Kafka broker config", k, names.broker) for k in keys if k not in names.broker] \
        + _kafka_values("backend.broker", {k: config[k] for k in keys}, names.types["broker"],
                        "the Kafka broker")


def librdkafka_problems(field: str, client: Mapping[str, Any], env_suffix: bool = False) -> list[str]:
    problems = []
    for key, value in client.items():
        name = key[:-4] if env_suffix and key.endswith("_env") else key
        if name != key:
            value = "${" + str(value) + "}"  # an environment variable's name: the value is judged by the producer
        refused = refusal(name, value)
        if refused is None:
            continue
        kind, message = refused
        if kind == "unknown":
            problems.append(f"{field}.{key}: unknown librdkafka setting {quote(key)}{_librdkafka_suggestion(key)} "
                            f"(confluent-kafka: {message})")
        else:
            shown = REDACTED if is_secret_key(name) else quote(value)  # an error message is printed and logged
            problems.append(f"{field}.{key}: librdkafka refuses {key} = {shown} ({message})")
    return problems


def _librdkafka_suggestion(key: str) -> str:
    """librdkafka lists no names, so the suggestion is drawn from the Kafka client names it shares (Java's
    producer and consumer configs), each confirmed by librdkafka before it is offered."""
    try:
        names = kafka_names()
        candidates = names.producer | names.consumer
    except CatalogueError:
        return ""
    return did_you_mean(key, [c for c in candidates if knows(c)])


def min_int_problems(field: str, what: str, client: Mapping[str, Any], allowed: Mapping[str, int]) -> list[str]:
    """A client's own settings when it takes only integers with a floor (`allowed`: name -> the smallest value)."""
    problems = []
    for key, value in client.items():
        if key not in allowed:
            problems.append(_unknown(field, what, key, allowed, f"; allowed: {', '.join(allowed)}"))
        elif isinstance(value, bool) or not isinstance(value, int) or value < allowed[key]:
            problems.append(f"{field}.{key}: an integer of at least {allowed[key]}, got {quote(value)}")
    return problems


def problems(scenario: Any, skipped: list[str] | None = None) -> list[str]:
    """Every refused setting of a validated scenario, each naming its field (a scenario's structure is read by
    attribute: this module does not import harness.config, which calls it): Spark's own here, its clients' by
    the backend's spec (`BackendSpec.setting_problems`, with the checks of this module). Without PySpark, Spark's
    names cannot be read: the tables that need them are left unchecked and named in `skipped`."""
    skipped = [] if skipped is None else skipped
    no_spark = spark_missing()

    def spark_judged(field: str, table: Mapping[str, Any], check, *args) -> list[str]:
        if not table:
            return []
        if no_spark:
            skipped.append(field)
            return []
        return check(table, *args)

    found = allow_problems(scenario.spark.conf_allow) or spark_judged(
        "spark.conf", scenario.spark.conf, spark_conf_problems, scenario.spark.conf_allow)
    # the backend knows which clients take which settings (harness.backends: no kind is named outside it)
    return found + scenario.backend.setting_problems(scenario, spark_judged)


def check_setting_names(scenario: Any) -> str | None:
    """ValueError naming the first refused setting (and how many more), for the Scenario validator; else what
    could not be checked here and why, in one line (None: everything was)."""
    skipped: list[str] = []
    try:
        found = problems(scenario, skipped)
    except CatalogueError as exc:
        raise ValueError(f"cannot check setting names: {exc}") from None
    if found:
        more = f" (and {len(found) - 1} more setting(s) refused: fix this one and validate again)" \
            if len(found) > 1 else ""
        raise ValueError(found[0] + more)
    if not skipped:
        return None
    return (f"not checked here: the names in {' and '.join(skipped)} ({spark_missing()}, and Spark's names are "
            "read from its jars; `harness run` checks them before it starts)")
