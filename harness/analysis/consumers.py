"""Kafka consumer creations per micro-batch, from the TCP proxy's connection records (services/proxy/
connections.jsonl, harness.netproxy: one row per connection with the client.id and correlation id of its first
request) and the query's progress records (each batch's start `timestamp` and `durationMs.triggerExecution`).

Spark's executors keep a pool of Kafka consumers keyed by (group, topic-partition) and reuse them across batches;
a consumer created again shows as a new Kafka client instance. Every instance opens its first connection with the
first request it ever sends (correlation id 0) and a client.id of its own within its JVM
(`consumer-spark-kafka-source-...-executor-N`), so:
  * a connection whose first request has correlation id 0 is an instance's first: one creation;
  * a client.id seen for the first time is one too (the fallback when that first connection was not identified,
    or records from before correlation ids were kept).
Both together count instances even when several executor JVMs hand out the same client.ids (local-cluster: each
JVM numbers its consumers from 1). Which executor created a consumer the proxy cannot tell (every executor
connects from 127.0.0.1). A pure function of the records: no run directory needed but for `read_connections`.

Event Hubs through its Kafka endpoint (protocol = "kafka", the project's emulator) needs no proxy: the emulator
writes the same rows itself (services/eventhubs/kafka-connections.jsonl, `--kafka-connection-log`), one per Kafka
connection with its first request header; they carry no role, so it is derived from the client.id here exactly as
the proxy derives it (harness.netproxy.role).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from harness.files.jsonl import read_jsonl
from harness.analysis.progress import epoch_s
from harness.netproxy import role as client_role

CONNECTIONS = Path("services") / "proxy" / "connections.jsonl"
EMULATOR_CONNECTIONS = Path("services") / "eventhubs" / "kafka-connections.jsonl"  # the Event Hubs emulator's


def connections_file(run_dir: Path) -> Path | None:
    """Where the run's connection records are, relative to the run directory: the proxy's (Kafka with
    backend.proxy or a network fault) or else the Event Hubs emulator's Kafka endpoint's; None when neither."""
    return next((rel for rel in (CONNECTIONS, EMULATOR_CONNECTIONS) if (run_dir / rel).exists()), None)


def read_connections(run_dir: Path) -> list[dict] | None:
    """The records (`connections_file`), each with its role (the emulator's rows have none: derived from the
    client.id as the proxy does); None when the run recorded no connections (no file)."""
    rel = connections_file(run_dir)
    if rel is None:
        return None
    return [row if "role" in row else {**row, "role": client_role(row.get("client_id"))}
            for row in read_jsonl(run_dir / rel)]


def creations(connections: list[dict]) -> list[dict]:
    """The Kafka client instances the records show, in the order they appeared: {t, client_id, role}. A
    connection opens a new instance when its client.id was not seen before or its first request is the
    instance's first (correlation id 0; an instance's later connections carry higher ids)."""
    seen: set[str] = set()
    out = []
    for row in sorted(connections, key=lambda r: (r["t"], r.get("conn", 0))):
        client_id = row.get("client_id")
        if client_id is None:
            continue  # a connection that never said who it is (no complete request header)
        if client_id not in seen or row.get("correlation_id") == 0:
            seen.add(client_id)
            out.append({"t": row["t"], "client_id": client_id, "role": row.get("role")})
    return out


def batch_windows(progress: list[dict]) -> list[tuple[float, float, int, int]]:
    """(start, end, batch id, rows) per progress record, in time order: a batch runs from its trigger's start for
    triggerExecution ms. A batch re-run after a restart has two windows under one id."""
    out = []
    for p in progress:
        if "timestamp" not in p or "batchId" not in p:
            continue
        start = epoch_s(p["timestamp"])
        out.append((start, start + (p.get("durationMs") or {}).get("triggerExecution", 0) / 1000.0,
                    int(p["batchId"]), int(p.get("numInputRows") or 0)))
    return sorted(out)


def _batch_at(windows: list[tuple[float, float, int, int]], t: float) -> int | None:
    for start, end, batch, _ in windows:
        if start <= t <= end:
            return batch
        if start > t:
            break
    return None


def consumer_summary(connections: list[dict], progress: list[dict], role: str = "executor") -> dict[str, Any]:
    """Per batch: the connections `role`'s clients opened (refused ones left out), the client.ids seen for the
    first time and the instances created; totals; and how many were created after the first batch that read
    rows (with the pool warm, ~0 for a query whose ranges are one per partition). What happened outside every
    batch's window (the query starting, between triggers) is counted apart. {} without records."""
    if not connections:
        return {}
    windows = batch_windows(progress)
    batches = sorted({w[2] for w in windows})
    rows_by_batch: Counter = Counter()
    for _, _, batch, rows in windows:
        rows_by_batch[batch] += rows
    per_batch = {b: Counter() for b in batches}
    outside: Counter = Counter()

    def slot(t: float) -> Counter:
        batch = _batch_at(windows, t)
        return outside if batch is None else per_batch[batch]

    mine = [r for r in connections if r.get("role") == role]
    seen: set[str] = set()
    for r in sorted(mine, key=lambda r: (r["t"], r.get("conn", 0))):
        if r.get("refused"):
            continue
        slot(r["t"])["connections"] += 1
        if r.get("client_id") is not None and r["client_id"] not in seen:
            seen.add(r["client_id"])
            slot(r["t"])["client_ids"] += 1
    made = [c for c in creations(connections) if c["role"] == role]
    for c in made:
        slot(c["t"])["created"] += 1

    first = next((w for w in windows if w[3] > 0), None)
    after = [c for c in made if first is not None and c["t"] > first[1]]
    after_batches = {b for c in after if (b := _batch_at(windows, c["t"])) is not None}
    by_role = Counter(r.get("role") for r in connections if not r.get("refused"))
    made_by_role = Counter(c["role"] for c in creations(connections))
    fields = ("connections", "client_ids", "created")
    return {
        "role": role,
        "created": len(made), "connections": sum(1 for r in mine if not r.get("refused")),
        "client_ids": len(seen), "refused": sum(1 for r in mine if r.get("refused")),
        "first_data_batch": None if first is None else first[2],
        "created_in_first_data_batch": 0 if first is None else sum(1 for c in made if first[0] <= c["t"] <= first[1]),
        "created_after_first_data_batch": len(after),
        "batches_creating_after_first": len(after_batches),
        "batches": len(batches),
        "per_batch": {str(b): {"rows": rows_by_batch[b], **{k: per_batch[b][k] for k in fields}} for b in batches},
        "outside_batches": {k: outside[k] for k in fields},
        "all_roles": {r: {"connections": by_role[r], "created": made_by_role[r]}
                      for r in sorted(set(by_role) | set(made_by_role), key=str)},
    }
