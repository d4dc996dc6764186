"""The reference for `harness bench eh-producers`: a plain azure-eventhub send loop, the unmodified SDK and
nothing else (no pacer, locust, history or statistics), sending a scenario's traffic as a careful hand-written
producer would: wakes once per batch (every `batch / rate` seconds), and for each partition with events due
creates a batch for that partition id, adds the events and sends it; one send at a time.

Run as its own process by the bench: `python -m harness.bench.raw_eh_producer CONNECTION_STRING HUB PARTITIONS
SECONDS SIZE RATE BATCH`; prints one JSON line {"sent", "delivered", "seconds", "cpu_s"} (cpu_s: the process's CPU
over the sending loop, all its threads, as the harness's stats rows count it).
"""
from __future__ import annotations

import json
import sys
import time

from azure.eventhub import EventData, EventHubProducerClient


def main(conn: str, hub: str, partitions: int, seconds: float, size: int, rate: float, batch: int) -> None:
    client = EventHubProducerClient.from_connection_string(conn, eventhub_name=hub)
    value = b"x" * size
    for p in range(partitions):  # links open before the clock starts, as the harness's connect does
        client.send_batch([EventData(value)], partition_id=str(p))
    sent = delivered = 0
    total = int(rate * seconds)
    cpu0, t0 = time.process_time(), time.time()
    while sent < total:
        due = min(total, int((time.time() - t0) * rate)) - sent
        for p in range(partitions):
            n = due // partitions + (1 if p < due % partitions else 0)
            if not n:
                continue
            events = client.create_batch(partition_id=str(p))
            for _ in range(n):
                events.add(EventData(value))
            client.send_batch(events)
            delivered += n
        sent += due
        wake = t0 + min(total, sent + batch) / rate  # when the next whole batch is due
        time.sleep(max(0.0, wake - time.time()))
    elapsed, cpu = time.time() - t0, time.process_time() - cpu0
    client.close()
    print(json.dumps({"sent": sent, "delivered": delivered, "seconds": elapsed, "cpu_s": cpu}))


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), float(a[3]), int(a[4]), float(a[5]), int(a[6]))
