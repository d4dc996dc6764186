"""The references for the producer benches: a plain confluent-kafka loop with the harness's client settings and
nothing else (no pacer, locust, history or statistics).

- flat out (`harness bench producers`' efficiency): produces as fast as it goes, serving reports with poll(0)
  after every 1,000;
- paced (`harness bench footprint`): the steady traffic (rate, record size, keys, batch); wakes once per batch
  (every `batch / rate` seconds), produces what is due, serves the reports with poll(0) and sleeps until the next
  batch is due: what a careful hand-written producer does.

Run as its own process by a bench: `python -m harness.bench.raw_producer SETTINGS_JSON TOPIC SECONDS SIZE
[RATE BATCH]`; prints one JSON line {"sent", "delivered", "seconds", "cpu_s"} (cpu_s: the process's CPU over the
sending loop, all its threads, as the harness's stats rows count it).
"""
from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Producer

from harness.backends.kafka.sender import DEFAULTS


def main(settings: dict, topic: str, seconds: float, size: int, rate: float | None = None, batch: int = 1) -> None:
    producer = Producer(dict(DEFAULTS, **settings))
    keys = [f"k{i}".encode() for i in range(1000)]
    value = b"x" * size
    delivered = [0]

    def on_delivery(err, msg):
        if err is None:
            delivered[0] += 1

    def produce(count: int) -> int:
        done = 0
        while done < count:
            try:
                producer.produce(topic, value, keys[(sent + done) % 1000], callback=on_delivery)
                done += 1
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
        return done

    sent = 0
    cpu0 = time.process_time()  # the whole process (its client's threads too), as the harness's stats rows count
    t0 = time.time()
    if rate is None:  # flat out
        while time.time() < t0 + seconds:
            sent += produce(1000)
    else:
        total = int(rate * seconds)
        while sent < total:
            sent += produce(min(total, int((time.time() - t0) * rate)) - sent)
            wake = t0 + min(total, sent + batch) / rate  # when the next whole batch is due
            time.sleep(max(0.0, wake - time.time()))
    elapsed = time.time() - t0
    cpu = time.process_time() - cpu0
    producer.flush(30)
    print(json.dumps({"sent": sent, "delivered": delivered[0], "seconds": elapsed, "cpu_s": cpu}))


if __name__ == "__main__":
    args = sys.argv[1:]
    paced = (float(args[4]), int(args[5])) if len(args) > 4 else (None, 1)
    main(json.loads(args[0]), args[1], float(args[2]), int(args[3]), *paced)
