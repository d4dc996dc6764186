"""The reference for `harness bench footprint`: a plain confluent-kafka loop sending the steady traffic (the same
rate, record size, keys, batch and client settings as the harness's producer process) and nothing else.

It wakes once per batch (every `batch / rate` seconds), produces the batch, serves the client's reports with poll(0)
and sleeps until the next batch is due: what a careful hand-written producer does, without the harness's pacer,
locust, history or statistics. Run as its own process by the bench; prints one JSON line {"sent", "delivered",
"seconds", "cpu_s"} (cpu_s: the process's CPU over the sending loop, all its threads, as the harness's stats rows
count it).
"""
from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Producer

from harness.backends.kafka.sender import DEFAULTS


def main(settings: dict, topic: str, rate: float, seconds: float, size: int, batch: int) -> None:
    producer = Producer(dict(DEFAULTS, **settings))
    keys = [f"k{i}".encode() for i in range(1000)]
    value = b"x" * size
    delivered = [0]

    def on_delivery(err, msg):
        if err is None:
            delivered[0] += 1

    sent = 0
    total = int(rate * seconds)
    cpu0 = time.process_time()
    t0 = time.time()
    while sent < total:
        due = min(total, int((time.time() - t0) * rate))
        while sent < due:
            try:
                producer.produce(topic, value, keys[sent % 1000], callback=on_delivery)
                sent += 1
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
        wake = t0 + min(total, sent + batch) / rate  # when the next whole batch is due
        time.sleep(max(0.0, wake - time.time()))
    producer.flush(30)
    elapsed = time.time() - t0
    cpu = time.process_time() - cpu0
    print(json.dumps({"sent": sent, "delivered": delivered[0], "seconds": elapsed, "cpu_s": cpu}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]),
         int(sys.argv[6]))
