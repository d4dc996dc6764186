"""The same paced producer process sends to Event Hubs (the project's emulator) through the real SDK."""
import time
import uuid

import pytest
from azure.eventhub import EventHubConsumerClient

from harness.backends.eventhubs.spec import EventHubsSpec
from harness.records.history import load_acks
from harness.emulator.config import EmulatorConfig, HubConfig
from harness.emulator.server import EmulatorServer
from harness.partitioning import eventhubs_partition_for_key
from harness.producers.event import decode
from harness.producers.fleet import ProducerFleet
from harness.producers.keys import make_key_chooser
from harness.producers.spec import KeysSpec
from pydantic import TypeAdapter

pytestmark = pytest.mark.integration


def test_fleet_sends_the_schedule_with_service_key_placement(supervisor, tmp_path):
    hub = "h" + uuid.uuid4().hex[:6]
    with EmulatorServer(EmulatorConfig(hubs=(HubConfig(hub, 4),))).start() as emu:
        conn = emu.connection_string()
        job = {"backend": "eventhubs", "sender": EventHubsSpec.model_construct().sender, "stream": hub, "partitions": 4,
               "settings": {"connection_string": conn}, "processes": 2, "users": 2, "batch_size": 100,
               "duration_s": 3.0, "max_backlog_s": 10.0, "seed": 5, "rate": {"kind": "constant", "eps": 1000},
               "keys": {"kind": "zipf", "count": 200, "s": 1.1}, "payload": {"size": {"kind": "fixed", "bytes": 200}}}
        fleet = ProducerFleet(tmp_path / "producers", supervisor, job)
        fleet.start(time.time() + 1.5)
        fleet.wait(90)
        assert not fleet.failures(), fleet.failures()
        acks = load_acks(tmp_path / "producers")
        assert len(acks) == 3000 and (acks["error"] == "").all()

        received = {}
        consumer = EventHubConsumerClient.from_connection_string(conn, consumer_group="$Default",
                                                                 eventhub_name=hub, load_balancing_interval=0.5)

        def on_batch(ctx, batch):  # receive() alone crawls once a partition runs dry (an SDK limitation)
            for event in batch:
                e = decode(event.body_as_str().encode())
                received[(e["p"], e["s"])] = int(ctx.partition_id)

        with consumer:
            worker = __import__("threading").Thread(
                target=consumer.receive_batch, kwargs={"on_event_batch": on_batch, "starting_position": "-1",
                                                       "max_batch_size": 300, "max_wait_time": 0.5}, daemon=True)
            worker.start()
            deadline = time.time() + 60
            while len(received) < 3000 and time.time() < deadline:
                time.sleep(0.2)
        assert len(received) == 3000
        by_id = {(r.producer, r.seq): r.partition for r in acks.itertuples()}
        assert received == by_id  # each event sits in the partition its ack names
        # the keys each producer drew (its chooser replayed) hash to the partitions the service would pick
        for producer in (0, 1):
            chooser = make_key_chooser(TypeAdapter(KeysSpec).validate_python(job["keys"]), 4, 5 * 1009 + producer,
                                       backend="eventhubs")
            n = int((acks["producer"] == producer).sum())
            for seq, (key, _) in enumerate(chooser.next_many(n)):
                assert received[(producer, seq)] == eventhubs_partition_for_key(key.decode(), 4)
