"""The baseline for producer efficiency: a plain confluent-kafka loop, as fast as it goes, same settings.

Run as its own process by the benchmark; prints one JSON line {"sent": n, "delivered": n, "seconds": s, "cpu_s": s}
(cpu_s: the process's CPU over the sending loop, all threads).
"""
from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Producer

from harness.backends.kafka.sender import DEFAULTS


def main(bootstrap: str, topic: str, seconds: float, size: int) -> None:
    producer = Producer(dict(DEFAULTS, **{"bootstrap.servers": bootstrap}))
    keys = [f"k{i}".encode() for i in range(1000)]
    value = b"x" * size
    delivered = [0]

    def on_delivery(err, msg):
        if err is None:
            delivered[0] += 1

    sent = 0
    cpu0 = time.process_time()  # the whole process (its client's threads too), as the harness's stats rows count
    t0 = time.time()
    end = t0 + seconds
    while True:
        for _ in range(1000):
            try:
                producer.produce(topic, value, keys[sent % 1000], callback=on_delivery)
                sent += 1
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
        if time.time() >= end:
            break
    elapsed = time.time() - t0
    cpu = time.process_time() - cpu0
    producer.flush(30)
    print(json.dumps({"sent": sent, "delivered": delivered[0], "seconds": elapsed, "cpu_s": cpu}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
