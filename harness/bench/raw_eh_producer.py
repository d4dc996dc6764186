"""The reference for `harness bench eh-producers`: a plain azure-eventhub send loop, the unmodified SDK and
nothing else (no pacer, locust, history or statistics), sending a scenario's traffic as a careful hand-written
producer would: wakes once per batch (every `batch / rate` seconds) and sends what is due the way the scenario's
`send` mode addresses events:
- `partition_id`: one batch per partition with events due (the partition from the key's hash, as the service
  hashes it), each created for that partition id;
- `partition_key`: one batch per run of consecutive events with the same key (a batch carries one partition
  key, as the service requires), each created with that key.
Keys are drawn as the harness draws them (producers.keys, the scenario's key spec); one send at a time.

Run as its own process by the bench: `python -m harness.bench.raw_eh_producer JOB_JSON` with connection_string,
hub, partitions, seconds, size, rate, batch, send, keys (a key spec) and seed; prints one JSON line {"sent",
"delivered", "seconds", "cpu_s"} (cpu_s: the process's CPU over the sending loop, all its threads, as the
harness's stats rows count it).
"""
from __future__ import annotations

import json
import sys
import time

from azure.eventhub import EventData, EventHubProducerClient
from pydantic import TypeAdapter

from harness.partitioning import eventhubs_partition_for_key
from harness.producers.keys import make_key_chooser
from harness.producers.spec import KeysSpec


def batches(keys: list[bytes], send: str, partitions: int) -> list[tuple[dict, int]]:
    """(create_batch's keyword, events) for each batch the due events make, in order."""
    if send == "partition_key":
        out: list[tuple[dict, int]] = []
        for key in keys:
            if out and out[-1][0]["partition_key"] == key.decode():
                out[-1] = (out[-1][0], out[-1][1] + 1)
            else:
                out.append(({"partition_key": key.decode()}, 1))
        return out
    counts = [0] * partitions
    for key in keys:
        counts[eventhubs_partition_for_key(key.decode(), partitions)] += 1
    return [({"partition_id": str(p)}, n) for p, n in enumerate(counts) if n]


def main(job: dict) -> None:
    client = EventHubProducerClient.from_connection_string(job["connection_string"], eventhub_name=job["hub"])
    value = b"x" * int(job["size"])
    partitions, rate, send = int(job["partitions"]), float(job["rate"]), job["send"]
    chooser = make_key_chooser(TypeAdapter(KeysSpec).validate_python(job["keys"]), partitions, int(job["seed"]),
                               backend="eventhubs")
    for p in range(partitions):  # links open before the clock starts, as the harness's connect does
        client.send_batch([EventData(value)], partition_id=str(p))
    sent = delivered = 0
    total = int(rate * float(job["seconds"]))
    cpu0, t0 = time.process_time(), time.time()
    while sent < total:
        due = min(total, int((time.time() - t0) * rate)) - sent
        if due:
            for kwargs, n in batches(chooser.keys_for_ids(chooser.next_ids(due)), send, partitions):
                events = client.create_batch(**kwargs)
                for _ in range(n):
                    events.add(EventData(value))
                client.send_batch(events)
                delivered += n
        sent += due
        wake = t0 + min(total, sent + int(job["batch"])) / rate  # when the next whole batch is due
        time.sleep(max(0.0, wake - time.time()))
    elapsed, cpu = time.time() - t0, time.process_time() - cpu0
    client.close()
    print(json.dumps({"sent": sent, "delivered": delivered, "seconds": elapsed, "cpu_s": cpu}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
