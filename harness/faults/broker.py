"""One broker of the embedded three-node cluster killed (SIGKILL), frozen (SIGSTOP) or restarted gracefully.

With replication 3, `min.insync.replicas = 2` and producers on `acks = all` (idempotent), an acknowledged record
is on every in-sync replica, one broker down leaves two of three replicas and two of three KRaft voters, so
nothing acked may be lost and the idempotent producer keeps the log free of duplicates: the effect declares no
loss. Sends: librdkafka retries every retriable error (leader gone, NOT_ENOUGH_REPLICAS, request timeouts) until
`message.timeout.ms` (default 300 s) runs out, and leadership moves within `broker.session.timeout.ms` (9 s) of a
broker dying or freezing (a frozen follower leaves the ISR after `replica.lag.time.max.ms`, 30 s), so with the
default no send fails; a scenario that shortens `message.timeout.ms` below 60 s gets failed sends allowed.

kill: SIGKILL the node's JVM, heal = start it again; pause: SIGSTOP its process group, heal = SIGCONT; restart:
graceful stop (SIGTERM, controlled shutdown), heal = start it again. The node stays down or frozen for at least
`duration_s` (window) even when a slow moment delayed the injection past its scheduled heal, so a fault is never
healed before it had its effect. Healing waits until the broker is registered again (an error if not) and for the
ISR to be full again (recorded). `node` is 1-based; without it a node is chosen with the scenario's seed.
"""
from __future__ import annotations

import os
import random
import signal
import time
from typing import Literal

from pydantic import Field

from harness.faults import register
from harness.backends.capabilities import BrokerProcesses
from harness.faults.base import Fault, FaultError, FaultOptions

MIN_NODES = 3
SEND_TIMEOUT_FLOOR_MS = 60_000  # below this message.timeout.ms, sends may outlive their timeout during a failover
REJOIN_TIMEOUT_S = 120.0
ISR_TIMEOUT_S = 90.0
ISR_STABLE_S = 3.0  # a broker just resumed answers metadata from its stale cache for a moment: full ISR must hold


class BrokerOptions(FaultOptions):
    kind: Literal["broker"] = Field("broker", description="broker: one broker of the embedded cluster killed, frozen "
                                                          "or restarted")
    mode: Literal["kill", "pause", "restart"] = Field("kill", description="kill (SIGKILL), pause (SIGSTOP, then "
                                                                          "SIGCONT at the heal) or restart (a "
                                                                          "graceful stop and start)")
    node: int | None = Field(None, ge=1, description="1-based node to hit; default: chosen with the seed")


def _client_setting(client: dict, *names: str):
    for name in names:
        if name in client:
            return client[name]
    return None


@register
class Broker(Fault):
    kind = "broker"
    capabilities = (BrokerProcesses,)
    Options = BrokerOptions
    requires = "the embedded Kafka backend with nodes >= 3"

    @classmethod
    def pinned(cls, detail: dict) -> dict:
        return {"node": detail["node"]} if detail.get("node") else {}

    def __init__(self, options):
        super().__init__(options)
        self.node = None
        self.paused_pid: int | None = None
        self.injected_at: float | None = None  # monotonic

    def check(self, scenario) -> str | None:
        b = scenario.backend
        if b.nodes < MIN_NODES:
            return (f"needs backend.nodes >= {MIN_NODES} (got {b.nodes}): with one broker down the rest must still "
                    "hold two replicas (min.insync.replicas = 2) and a KRaft quorum")
        if self.options.node is not None and self.options.node > b.nodes:
            return f"node = {self.options.node} but the cluster has {b.nodes} nodes (1..{b.nodes})"
        acks = _client_setting(scenario.producers.client, "acks", "request.required.acks")
        if acks is not None and str(acks).lower() not in ("all", "-1"):
            return (f"producers.client acks = {acks!r}: a leader killed with acks other than \"all\" can lose "
                    "acknowledged events, a loss this fault cannot declare exactly; use acks = \"all\"")
        return None

    # -- inject ------------------------------------------------------------------------------------------------
    def inject(self, ctx) -> dict:
        backend = ctx.backend
        down = [n.node_id for n in backend.nodes if not _up(n)]
        if down:
            raise FaultError(f"broker(s) {down} already down or paused: a second one would leave fewer than "
                             "min.insync.replicas = 2 replicas and no KRaft quorum")
        t0 = time.monotonic()
        if self._wait_isr_full(ctx, t0, stable_s=0) is None:  # a replica still catching up counts as one down
            raise FaultError(f"the ISR of {ctx.stream} is not full ({self._isr(ctx)}): one more broker down would "
                             "leave fewer than min.insync.replicas = 2 replicas")
        node = self._choose(ctx)
        self.node = node
        self.effect.send_failures = self._sends_may_fail(ctx)
        leading = self._leading(ctx, node.node_id)
        mode, child = self.options.mode, node.child
        self.injected_at = time.monotonic()
        if mode == "pause":
            os.killpg(child.pid, signal.SIGSTOP)
            self.paused_pid = child.pid
        else:
            backend.stop_node(node, hard=mode == "kill")
        return {"mode": mode, "node": node.node_id, "pid": child.pid, "leader_of": leading,
                "exit_code": child.proc.returncode, "waited_for_full_isr_s": round(self.injected_at - t0, 2)}

    def _choose(self, ctx):
        nodes = ctx.backend.nodes
        if self.options.node is not None:
            return nodes[self.options.node - 1]
        n = ctx.fault_memory["broker_fault_picks"] = ctx.fault_memory.get("broker_fault_picks", 0) + 1
        return random.Random(f"{ctx.scenario.seed}:broker:{n}").choice(nodes)

    @staticmethod
    def _sends_may_fail(ctx) -> bool:
        client = ctx.scenario.producers.client
        timeout = _client_setting(client, "message.timeout.ms", "delivery.timeout.ms")
        return timeout is not None and int(timeout) < SEND_TIMEOUT_FLOOR_MS

    @staticmethod
    def _leading(ctx, node_id: int) -> list[int]:
        try:
            md = ctx.backend.admin().list_topics(ctx.stream, timeout=10).topics[ctx.stream]
            return sorted(p for p, pm in md.partitions.items() if pm.leader == node_id)
        except Exception:  # noqa: BLE001 - informational only
            return []

    # -- heal --------------------------------------------------------------------------------------------------
    def heal(self, ctx) -> dict:
        node = self.node
        if node is None:
            return {}
        detail: dict = {"node": node.node_id}
        hold = (self.options.heal_after_s or 0.0) - (time.monotonic() - (self.injected_at or 0.0))
        if hold > 0 and (self.paused_pid is not None or node.child is None or not node.child.alive()):
            time.sleep(hold)  # the schedule ran late: give the fault its full duration
            detail["held_s"] = round(hold, 2)
        detail["down_s"] = round(time.monotonic() - (self.injected_at or 0.0), 2)
        try:  # asked of the other nodes: a frozen one would leave the request hanging
            detail["isr_before_heal"] = {str(k): v for k, v in self._isr(ctx, without=node.node_id).items()}
        except Exception as exc:  # noqa: BLE001 - informational only
            detail["isr_before_heal"] = f"unknown: {exc}"
        t0 = time.monotonic()
        if self.paused_pid is not None:
            try:
                os.killpg(self.paused_pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.paused_pid = None
            detail["resumed"] = True
        elif node.child is None or not node.child.alive():
            ctx.backend.start_node(node)
            detail["started_pid"] = node.child.pid
        else:
            return {"node": node.node_id, "already_up": True}
        own = _admin_at(f"127.0.0.1:{node.broker_port}")
        try:
            ctx.wait_for(lambda: self._serving(own, node.node_id), REJOIN_TIMEOUT_S,
                         f"broker {node.node_id} to serve again", interval=0.5)
        except TimeoutError as exc:
            raise FaultError(f"{exc} (see services/kafka/node-{node.node_id}/server.log)") from None
        detail["serving_after_s"] = round(time.monotonic() - t0, 2)
        detail["isr_full_after_s"] = self._wait_isr_full(ctx, t0)
        if detail["isr_full_after_s"] is None:
            detail["isr"] = self._isr(ctx)
        return detail

    @staticmethod
    def _serving(admin, node_id: int) -> bool:
        """The node answers a metadata request itself (a restarted broker opens its port only once it is back in
        the cluster, unfenced) and lists itself."""
        try:
            return node_id in admin.list_topics(timeout=5).brokers
        except Exception:  # noqa: BLE001 - not yet answering: keep waiting
            return False

    def _wait_isr_full(self, ctx, t0: float, stable_s: float = ISR_STABLE_S) -> float | None:
        """Seconds after t0 the ISR became full (and stayed so for `stable_s`); None if it did not."""
        full_since: list[float] = []

        def isr_full_for_a_while() -> bool:
            if not self._isr_full(ctx):
                full_since.clear()
                return False
            full_since[:] = full_since or [time.monotonic()]
            return time.monotonic() - full_since[0] >= stable_s

        try:
            ctx.wait_for(isr_full_for_a_while, ISR_TIMEOUT_S, "full ISR", interval=0.25)
        except TimeoutError:
            return None
        return round(full_since[0] - t0, 2)

    @staticmethod
    def _isr(ctx, without: int | None = None) -> dict[int, list[int]]:
        admin = ctx.backend.admin()
        if without is not None:  # a fresh client bootstrapped at the other nodes asks one of them
            admin = _admin_at(",".join(f"127.0.0.1:{n.broker_port}" for n in ctx.backend.nodes
                                       if n.node_id != without))
        md = admin.list_topics(ctx.stream, timeout=10).topics[ctx.stream]
        return {p: sorted(pm.isrs) for p, pm in md.partitions.items()}

    @classmethod
    def _isr_full(cls, ctx) -> bool:
        try:
            md = ctx.backend.admin().list_topics(ctx.stream, timeout=5).topics[ctx.stream]
        except Exception:  # noqa: BLE001
            return False
        return all(set(pm.isrs) == set(pm.replicas) for pm in md.partitions.values())


def _up(node) -> bool:
    """Running and not frozen."""
    import psutil

    if node.child is None or not node.child.alive():
        return False
    try:
        return psutil.Process(node.child.pid).status() != psutil.STATUS_STOPPED
    except psutil.NoSuchProcess:
        return False


def _admin_at(bootstrap: str):
    """A client of its own, bootstrapped at these nodes only, so its first requests go to one of them."""
    from confluent_kafka.admin import AdminClient

    from harness.backends.kafka.admin import client_config

    return AdminClient(client_config(bootstrap))
