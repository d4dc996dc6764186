"""The network between the query and the brokers misbehaves: latency, a bandwidth cap, connection resets, a
blackhole. It happens in a TCP proxy (harness.netproxy, its own supervised process, started by `prepare` before
the brokers so that their QUERY listener can advertise its ports; the same one `backend.proxy = true` starts without
any fault); the query's consumers and admin client bootstrap there, producers and the harness's admin use the direct
listener and are never touched.

The effect declared is none: the query may stall and reconnect, but nothing acked may be lost or duplicated and
the query must not fail. That is only certain while a cut (blackhole, reset with keep_resetting) stays below the
query's Kafka timeouts (`kafkaConsumer.pollTimeoutMs`, `kafka.default.api.timeout.ms`): beyond them a task reading
at the time fails and one not reading does not, so `check` refuses such a cut rather than guess.

Every inject and heal records the proxy's counts per client role (executor consumers, the driver's admin client);
the heal adds what changed since the inject, and a reset which clients it cut and which came back. A new client.id
means a new Kafka client instance: that is how consumer re-creation shows (services/proxy/connections.jsonl has
every connection: time, client id, role, broker index).
"""
from __future__ import annotations

import uuid
from typing import Literal

from pydantic import Field, model_validator

from harness.faults import register
from harness.backends.capabilities import ProxiedListener
from harness.faults.base import Fault, FaultError, FaultOptions

MODE_FIELDS = {"latency": "latency_ms", "bandwidth": "bytes_per_s"}


class NetworkOptions(FaultOptions):
    kind: Literal["network"] = Field("network", description="network: the network between the query and the brokers "
                                                            "misbehaves (a TCP proxy)")
    mode: Literal["latency", "bandwidth", "reset", "blackhole"] = Field(description="latency (latency_ms added), "
                                                                                    "bandwidth (bytes_per_s cap), "
                                                                                    "reset (connections reset) or "
                                                                                    "blackhole (bytes dropped)")
    latency_ms: float | None = Field(None, gt=0, le=600_000, description="mode latency: added to every chunk, "
                                                                         "each direction")
    bytes_per_s: int | None = Field(None, ge=1024, description="mode bandwidth: cap per direction")
    keep_resetting: bool = Field(False, description="mode reset: also reset every new connection until healed")

    @model_validator(mode="after")
    def _mode_fields(self):
        return check_mode_fields(self, MODE_FIELDS)


def check_mode_fields(options, mode_fields: dict[str, str]):
    """A proxy fault's options (this one's, and `checkpoint_storage`'s in front of the object store): each mode's
    own field given for its mode and for no other, `keep_resetting` only with `reset`."""
    need = mode_fields.get(options.mode)
    if need and getattr(options, need) is None:
        raise ValueError(f"mode = {options.mode!r} needs {need}")
    for mode, name in mode_fields.items():
        if mode != options.mode and getattr(options, name) is not None:
            raise ValueError(f"{name} belongs to mode = {mode!r}, not {options.mode!r}")
    if options.keep_resetting and options.mode != "reset":
        raise ValueError(f"keep_resetting belongs to mode = 'reset', not {options.mode!r}")
    return options


@register
class Network(Fault):
    kind = "network"
    capabilities = (ProxiedListener,)
    Options = NetworkOptions
    requires = "an embedded Kafka backend (the harness adds the proxied listener to its brokers)"

    def __init__(self, options: FaultOptions):
        super().__init__(options)
        self.entry = uuid.uuid4().hex[:12]  # this injection's knobs in the proxy, cleared by its heal
        self.before: dict | None = None  # the proxy's counts at the inject
        self.cut: set[str] = set()  # clients whose connections a reset cut

    def check(self, scenario) -> str | None:
        o = self.options
        if o.mode == "blackhole" or o.keep_resetting:
            what = "blackhole" if o.mode == "blackhole" else "reset with keep_resetting"
            held = o.heal_after_s
            if held is None:
                return f"a {what} needs duration_s or window (else it lasts until the drain)"
            limit = _cut_off_limit_ms(scenario.spark.source_options)
            if held * 1000 >= limit:
                return (f"a {held:g} s {what} reaches the query's {limit:.0f} ms Kafka timeouts (kafkaConsumer."
                        f"pollTimeoutMs, kafka.default.api.timeout.ms): a task reading then would fail, one not "
                        f"reading would not, so the outcome cannot be judged; shorten it or raise those options")
        return None

    @classmethod
    def prepare(cls, ctx, options) -> None:
        """The proxy starts before the brokers: its ports are what the brokers' QUERY listener advertises. The
        same proxy `backend.proxy = true` starts (harness.netproxy.put_in_front: once per run)."""
        from harness.netproxy import put_in_front

        try:
            put_in_front(ctx)
        except RuntimeError as exc:
            raise FaultError(f"the network fault: {exc}") from None

    def _call(self, ctx, op: str, **fields) -> dict:
        from harness.netproxy import control

        info = ctx.netproxy
        if not info:
            raise FaultError("no network proxy in this run (Network.prepare did not run)")
        return control(info["control"], {"op": op, **fields})

    def inject(self, ctx) -> dict:
        o = self.options
        detail: dict = {"mode": o.mode}
        if o.mode == "latency":
            reply = self._call(ctx, "set", id=self.entry, latency_ms=o.latency_ms)
            detail["latency_ms"] = o.latency_ms
        elif o.mode == "bandwidth":
            reply = self._call(ctx, "set", id=self.entry, bytes_per_s=o.bytes_per_s)
            detail["bytes_per_s"] = o.bytes_per_s
        elif o.mode == "blackhole":
            reply = self._call(ctx, "set", id=self.entry, blackhole=True)
        else:
            if o.keep_resetting:
                self._call(ctx, "set", id=self.entry, reset_new=True)
            reply = self._call(ctx, "reset")
            self.cut = {c for c in reply["reset_clients"] if c}
            detail.update(reset_connections=reply["reset"], keep_resetting=o.keep_resetting,
                          reset_clients=reply["reset_clients"], reset_by_role=_by_role(reply["reset_clients"]))
        self.before = reply["stats"]
        detail["proxy"] = _summary(self.before)
        return detail

    def heal(self, ctx) -> dict:
        stats = self._call(ctx, "clear", id=self.entry)["stats"]
        detail = {"proxy": _summary(stats)}
        if self.before is not None:
            detail["since_inject"] = since = _since(self.before, stats)
            if self.options.mode == "reset":
                back = sorted(c for c in self.cut if stats["by_client"].get(c, 0) > self.before["by_client"].get(c, 0))
                since["reconnected_clients"] = back
                since["reconnected_by_role"] = _by_role(dict.fromkeys(back, 1))
        return detail


def _summary(stats: dict) -> dict:
    """Per role (executor, driver, other, unidentified): connections forwarded to a broker, distinct client ids
    among them, connection attempts refused (reset on arrival); open connections, resets so far, bytes."""
    return {"connections": stats["connections"], "clients": stats["clients"], "refused": stats["refused_by_role"],
            "open": stats["open"], "reset": stats["reset"], "bytes": stats["bytes"]}


def _since(before: dict, after: dict) -> dict:
    """What changed while the fault was on: new connections and refused attempts per role, new client ids
    (new Kafka client instances: a consumer Spark created afresh), bytes forwarded."""
    def diff(key: str) -> dict:
        return {k: after[key][k] - before[key].get(k, 0) for k in after[key]}

    new_clients = sorted(set(after["by_client"]) - set(before["by_client"]))
    return {"connections": diff("connections"), "refused": diff("refused_by_role"), "new_clients": new_clients,
            "new_clients_by_role": _by_role(dict.fromkeys(new_clients, 1)), "bytes": diff("bytes")}


def _by_role(counts: dict[str, int]) -> dict[str, int]:
    from harness.netproxy import role

    out: dict[str, int] = {}
    for client_id, n in counts.items():
        r = role(client_id or None)
        out[r] = out.get(r, 0) + n
    return out


def _cut_off_limit_ms(source_options: dict) -> float:
    """How long the query's clients wait on a silent network before giving up: an executor's poll
    (kafkaConsumer.pollTimeoutMs, Spark's default spark.network.timeout = 120 s) and a driver admin call
    (kafka.default.api.timeout.ms, Kafka's default 60 s); option names are case-insensitive as in Spark."""
    opts = {k.lower(): v for k, v in source_options.items()}
    return min(float(opts.get("kafkaconsumer.polltimeoutms", 120_000)),
               float(opts.get("kafka.default.api.timeout.ms", 60_000)))
