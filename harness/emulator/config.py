"""Emulator configuration in the shape of Microsoft's Event Hubs emulator ``Config.json``.

Accepted file (extensions over Microsoft's shape are marked *)::

    {"UserConfig": {"NamespaceConfig": [{"Type": "EventHub", "Name": "emulatorNs1", "Entities": [
        {"Name": "eh1", "PartitionCount": "2",                 # string (as in Microsoft's samples) or int
         "ConsumerGroups": [{"Name": "cg1"}],                  # $Default always exists
         "MessageRetentionInHours": 1,                         # * retention (default 1 h)
         "RetentionSeconds": 30,                               # * overrides MessageRetentionInHours
         "MaxEventsPerPartition": 1000000,                     # * memory bound (oldest dropped first)
         "MaxBytesPerPartition": 67108864}]}],                 # * memory bound
     "LoggingConfig": {"Type": "File"}},                        # accepted, ignored
     "Emulator": {"SharedAccessKeys": [{"Name": "RootManageSharedAccessKey", "Key": "..."}],   # * SAS keys
                  "AcceptAnyCredential": false,    # * true: every SAS token passes (no check at all)
                  "MaxMessageSizeBytes": 1048576,                                              # *
                  "MaxReceiversPerPartition": 5,   # * non-epoch readers per partition and consumer group
                  "MaxConnections": 5000,          # * open AMQP connections (the service's per-namespace quota)
                  "IdleTimeoutSeconds": 240,       # * close a connection silent this long (0 = never)
                  "MaxFrameSizeBytes": 4194304,    # * max-frame-size advertised in open (and enforced)
                  "MaxIncompleteFrameBytes": 67108864,  # * bytes held for unfinished frames, all connections
                  "ProducerIdExpirationMs": 86400000,  # * Kafka endpoint: an idempotent producer's state
                  "OffsetsRetentionMs": 604800000}}  # * Kafka endpoint: an empty consumer group's offsets

Without a file (``default_config()``): namespace ``emulatorNs1`` with hub ``eh1``, 4 partitions, consumer groups
``$Default`` and ``cg1``, retention 1 h, at most 1,000,000 events / 64 MiB per partition, 1 MiB message size
limit, and the limits above.

Credentials are checked by default, as Azure checks them: a CBS token must be signed with one of
``Emulator.SharedAccessKeys``; without any, ``RootManageSharedAccessKey`` with Microsoft's emulator's well-known
key ``SAS_KEY_VALUE`` (a random one when ``harness emulator serve --generate-key`` asks for it), printed in the
connection string. A token signed with an unknown key name or a wrong key is
refused with status 401 (the SDK raises ``AuthenticationError``). ``AcceptAnyCredential`` (or the command line's
``--accept-any-credential``) turns the check off, for clients whose key cannot be set.

The limits bound what a client (or a crowd of them) can make the emulator hold. A connection above
``MaxConnections`` is answered with open then close ``amqp:resource-limit-exceeded``; one that sends nothing for
``IdleTimeoutSeconds`` is closed with ``amqp:connection:forced`` and the service's "inactive for more than the
allowed ... milliseconds" text (the emulator advertises half of it as its idle-time-out, so a client that
heartbeats stays open); when the bytes held for incomplete frames and unfinished multi-frame messages of all
connections (on the Kafka endpoint also the requests read ahead and the responses a client has not read) pass
``MaxIncompleteFrameBytes``, the connection holding the most is closed with ``amqp:resource-limit-exceeded`` (a
Kafka connection is dropped: Kafka has no goodbye). State the Kafka endpoint keeps for clients expires as a Kafka
broker's does: an idempotent producer's sequence numbers ``ProducerIdExpirationMs`` after its last write
(``producer.id.expiration.ms``), an empty consumer group's committed offsets ``OffsetsRetentionMs`` after it
became empty or last committed (``offsets.retention.minutes``), and then the group itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from harness.errors import InputError
from harness.text.nesting import too_deep
from harness.text.suggest import did_you_mean

DEFAULT_KEY_NAME = "RootManageSharedAccessKey"
DEFAULT_KEY = "SAS_KEY_VALUE"
DEFAULT_RETENTION_S = 3600.0
DEFAULT_MAX_EVENTS = 1_000_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024
DEFAULT_MAX_RECEIVERS = 5  # the service's limit of concurrent non-epoch readers per partition and consumer group
DEFAULT_MAX_CONNECTIONS = 5000  # Event Hubs Standard tier: AMQP connections per namespace
DEFAULT_IDLE_TIMEOUT_S = 240.0  # Event Hubs closes a connection inactive for 240,000 ms
DEFAULT_MAX_FRAME_SIZE = 4 * 1024 * 1024  # the SDK then sends a full 1 MB batch in one frame
DEFAULT_MAX_INCOMPLETE_FRAME_BYTES = 64 * 1024 * 1024  # 64 senders of 1 MB batches at the same moment
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # Kafka's producer.id.expiration.ms (one day)
DEFAULT_OFFSETS_RETENTION_MS = 7 * 24 * 3600 * 1000  # Kafka's offsets.retention.minutes (seven days), in ms
MAX_PARTITIONS = 1024

EMULATOR_FIELDS = ("SharedAccessKeys", "AcceptAnyCredential", "MaxMessageSizeBytes", "MaxReceiversPerPartition",
                   "MaxConnections", "IdleTimeoutSeconds", "MaxFrameSizeBytes", "MaxIncompleteFrameBytes",
                   "ProducerIdExpirationMs", "OffsetsRetentionMs")
ENTITY_FIELDS = ("Name", "PartitionCount", "ConsumerGroups", "MessageRetentionInHours", "RetentionSeconds",
                 "MaxEventsPerPartition", "MaxBytesPerPartition")

_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,254}[A-Za-z0-9])?$")
_CG_RE = re.compile(r"^(\$Default|[A-Za-z0-9](?:[A-Za-z0-9._-]{0,48}[A-Za-z0-9])?)$")


class ConfigError(ValueError, InputError):
    """Bad emulator configuration; the message names the file, the field and what is allowed."""


@dataclass(frozen=True)
class HubConfig:
    name: str
    partition_count: int = 4
    consumer_groups: tuple[str, ...] = ("$Default",)
    retention_s: float = DEFAULT_RETENTION_S
    max_events_per_partition: int = DEFAULT_MAX_EVENTS
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES


@dataclass(frozen=True)
class EmulatorConfig:
    namespace: str = "emulatorNs1"
    hubs: tuple[HubConfig, ...] = ()
    sas_keys: dict[str, str] = field(default_factory=dict)  # key name -> key (EmulatorCore adds one when empty)
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_receivers_per_partition: int = DEFAULT_MAX_RECEIVERS
    accept_any_credential: bool = False
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S  # 0 = connections are never closed for silence
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    max_incomplete_frame_bytes: int = DEFAULT_MAX_INCOMPLETE_FRAME_BYTES
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS  # Kafka endpoint: idempotent producers
    offsets_retention_ms: int = DEFAULT_OFFSETS_RETENTION_MS  # Kafka endpoint: an empty group's offsets

    def hub(self, name: str) -> HubConfig | None:
        for h in self.hubs:
            if h.name == name:
                return h
        return None

    @classmethod
    def from_dict(cls, data, source: str = "<config>") -> "EmulatorConfig":
        return _parse(data, source)


def default_config() -> EmulatorConfig:
    return EmulatorConfig(hubs=(HubConfig("eh1", 4, ("$Default", "cg1")),))


def load_config(path: str | None) -> EmulatorConfig:
    """Load ``path`` (or the defaults when None). Raises ConfigError naming the file and field."""
    if path is None:
        return default_config()
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")  # a BOM, as Windows editors write one, is not an error
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save it as UTF-8 JSON"
        ) from None
    deep = too_deep(text)
    if deep:  # before the parser, which would recurse once per level and crash
        raise ConfigError(f"{path}: {deep}; a Config.json is a few levels deep")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    return _parse(data, path)


def _err(source: str, where: str, what: str) -> ConfigError:
    return ConfigError(f"{source}: {where}: {what}")


def _int(value, source, where, lo, hi, *, allow_str=False) -> int:
    if isinstance(value, bool):
        ok = False
    elif isinstance(value, int):
        ok = True
    elif isinstance(value, str) and allow_str and value.strip().isdigit():
        value, ok = int(value.strip()), True
    else:
        ok = False
    if not ok or not lo <= value <= hi:
        kind = "an integer (or a string of digits)" if allow_str else "an integer"
        raise _err(source, where, f"must be {kind} between {lo} and {hi}, got {value!r}")
    return value


def _number(value, source, where, lo) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= lo:
        raise _err(source, where, f"must be a number greater than {lo}, got {value!r}")
    return float(value)


def _obj(value, source, where) -> dict:
    if value is None:
        raise _err(source, where, "is required (a JSON object)")
    if not isinstance(value, dict):
        raise _err(source, where, f"must be a JSON object, got {type(value).__name__}")
    return value


def _list(value, source, where) -> list:
    if value is None:
        raise _err(source, where, "is required (a JSON array)")
    if not isinstance(value, list):
        raise _err(source, where, f"must be a JSON array, got {type(value).__name__}")
    return value


def _known(obj: dict, allowed: tuple, source: str, where: str) -> None:
    """A misspelt optional field would silently fall back to its default: name it instead."""
    for key in obj:
        if key not in allowed:
            raise _err(source, f"{where}.{key}", f"unknown field{did_you_mean(str(key), allowed)} "
                                                 f"(allowed: {', '.join(allowed)})")


def _bool(value, source, where) -> bool:
    if not isinstance(value, bool):
        raise _err(source, where, f"must be true or false, got {value!r}")
    return value


def _parse(data, source: str) -> EmulatorConfig:
    root = _obj(data, source, "(top level)")
    user = _obj(root.get("UserConfig"), source, "UserConfig")
    namespaces = _list(user.get("NamespaceConfig"), source, "UserConfig.NamespaceConfig")
    if not namespaces:
        raise _err(source, "UserConfig.NamespaceConfig", "must hold one namespace")
    hubs: list[HubConfig] = []
    ns_name = "emulatorNs1"
    for i, ns in enumerate(namespaces):
        where = f"UserConfig.NamespaceConfig[{i}]"
        ns = _obj(ns, source, where)
        ns_type = ns.get("Type", "EventHub")
        if ns_type != "EventHub":
            raise _err(source, f"{where}.Type", f"must be 'EventHub', got {ns_type!r}")
        if i == 0 and isinstance(ns.get("Name"), str):
            ns_name = ns["Name"]
        entities = _list(ns.get("Entities"), source, f"{where}.Entities")
        for j, ent in enumerate(entities):
            hubs.append(_parse_entity(ent, source, f"{where}.Entities[{j}]", hubs))
    if not hubs:
        raise _err(source, "UserConfig.NamespaceConfig[0].Entities", "must define at least one event hub")
    emu = root.get("Emulator", {})
    emu = _obj(emu, source, "Emulator")
    _known(emu, EMULATOR_FIELDS, source, "Emulator")
    keys: dict[str, str] = {}
    for k, item in enumerate(_list(emu.get("SharedAccessKeys", []), source, "Emulator.SharedAccessKeys")):
        where = f"Emulator.SharedAccessKeys[{k}]"
        item = _obj(item, source, where)
        name, key = item.get("Name"), item.get("Key")
        if not isinstance(name, str) or not name:
            raise _err(source, f"{where}.Name", "must be a non-empty string")
        if not isinstance(key, str) or not key:
            raise _err(source, f"{where}.Key", "must be a non-empty string")
        keys[name] = key
    max_msg = _int(
        emu.get("MaxMessageSizeBytes", DEFAULT_MAX_MESSAGE_SIZE), source, "Emulator.MaxMessageSizeBytes",
        1024, 16 * 1024 * 1024,
    )
    max_receivers = _int(
        emu.get("MaxReceiversPerPartition", DEFAULT_MAX_RECEIVERS), source, "Emulator.MaxReceiversPerPartition",
        1, 1000,
    )
    idle = emu.get("IdleTimeoutSeconds", DEFAULT_IDLE_TIMEOUT_S)
    if isinstance(idle, bool) or not isinstance(idle, (int, float)) or not (idle == 0 or 0.1 <= idle <= 86400):
        raise _err(source, "Emulator.IdleTimeoutSeconds",
                   f"must be 0 (never close for silence) or a number of seconds from 0.1 to 86400, got {idle!r}")
    return EmulatorConfig(
        namespace=ns_name, hubs=tuple(hubs), sas_keys=keys, max_message_size=max_msg,
        max_receivers_per_partition=max_receivers,
        accept_any_credential=_bool(emu.get("AcceptAnyCredential", False), source, "Emulator.AcceptAnyCredential"),
        max_connections=_int(emu.get("MaxConnections", DEFAULT_MAX_CONNECTIONS), source, "Emulator.MaxConnections",
                             1, 1_000_000),
        idle_timeout_s=float(idle),
        max_frame_size=_int(emu.get("MaxFrameSizeBytes", DEFAULT_MAX_FRAME_SIZE), source,
                            "Emulator.MaxFrameSizeBytes", 512, 64 * 1024 * 1024),
        max_incomplete_frame_bytes=_int(
            emu.get("MaxIncompleteFrameBytes", DEFAULT_MAX_INCOMPLETE_FRAME_BYTES), source,
            "Emulator.MaxIncompleteFrameBytes", 64 * 1024, 1 << 40),
        producer_id_expiration_ms=_int(
            emu.get("ProducerIdExpirationMs", DEFAULT_PRODUCER_ID_EXPIRATION_MS), source,
            "Emulator.ProducerIdExpirationMs", 1000, 1 << 40),
        offsets_retention_ms=_int(
            emu.get("OffsetsRetentionMs", DEFAULT_OFFSETS_RETENTION_MS), source,
            "Emulator.OffsetsRetentionMs", 1000, 1 << 40),
    )


def check_hub_settings(settings: dict) -> None:
    """A hub's settings given elsewhere (a scenario's [stream.config]) checked as Config.json's entity keys are,
    before anything starts: ValueError "<key>: <what is allowed>, got <value>"."""
    try:
        _parse_entity({"Name": "hub", "PartitionCount": 1, **settings}, "@", "@", [])
    except ConfigError as exc:
        raise ValueError(str(exc).removeprefix("@: @.")) from None


def _parse_entity(ent, source: str, where: str, seen: list[HubConfig]) -> HubConfig:
    ent = _obj(ent, source, where)
    _known(ent, ENTITY_FIELDS, source, where)
    name = ent.get("Name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise _err(
            source, f"{where}.Name",
            f"must be 1-256 letters, digits, '.', '-', '_' starting and ending with a letter or digit, got {name!r}",
        )
    if any(h.name.lower() == name.lower() for h in seen):
        raise _err(source, f"{where}.Name", f"duplicate event hub name {name!r}")
    if "PartitionCount" not in ent:
        raise _err(source, f"{where}.PartitionCount", f"is required (1..{MAX_PARTITIONS})")
    count = _int(ent["PartitionCount"], source, f"{where}.PartitionCount", 1, MAX_PARTITIONS, allow_str=True)
    groups = ["$Default"]
    for k, cg in enumerate(_list(ent.get("ConsumerGroups", []), source, f"{where}.ConsumerGroups")):
        cg = _obj(cg, source, f"{where}.ConsumerGroups[{k}]")
        cg_name = cg.get("Name")
        if not isinstance(cg_name, str) or not _CG_RE.match(cg_name):
            raise _err(
                source, f"{where}.ConsumerGroups[{k}].Name",
                f"must be 1-50 letters, digits, '.', '-', '_' (or '$Default'), got {cg_name!r}",
            )
        if cg_name.lower() not in (g.lower() for g in groups):
            groups.append(cg_name)
    retention = DEFAULT_RETENTION_S
    if "MessageRetentionInHours" in ent:
        retention = 3600.0 * _number(ent["MessageRetentionInHours"], source, f"{where}.MessageRetentionInHours", 0)
    if "RetentionSeconds" in ent:
        retention = _number(ent["RetentionSeconds"], source, f"{where}.RetentionSeconds", 0)
    max_events = _int(
        ent.get("MaxEventsPerPartition", DEFAULT_MAX_EVENTS), source, f"{where}.MaxEventsPerPartition", 1, 10**9
    )
    max_bytes = _int(
        ent.get("MaxBytesPerPartition", DEFAULT_MAX_BYTES), source, f"{where}.MaxBytesPerPartition",
        1024, 1 << 40,
    )
    return HubConfig(name, count, tuple(groups), retention, max_events, max_bytes)
