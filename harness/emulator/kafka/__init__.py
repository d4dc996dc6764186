"""The emulator's Kafka endpoint: the Event Hubs namespace as Kafka clients see it through the service's Kafka
head (``<namespace>.servicebus.windows.net:9093``), over the same hubs and partition logs as the AMQP listeners.

What it is: a Kafka broker front (one node, id 0) for real Kafka clients -- librdkafka (confluent-kafka), the Java
client (Spark's Kafka source and sink, Kafka's command-line tools) -- on its own loopback ports: ``kafka_port``
with SASL_PLAINTEXT, as Microsoft's emulator on 9092, and ``kafka_tls_port`` with SASL_SSL and the emulator's own
certificate, as the service on 9093. A hub is a topic and its partitions the topic's partitions; a Kafka offset is
the event's sequence number, so AMQP positions and Kafka offsets are the same numbers; an event sent over AMQP is
read over Kafka and the other way round, mapped as the service maps them (mapping.py). Login is SASL PLAIN with
the user name ``$ConnectionString`` and a connection string checked against the configured keys. Faults of the
control API (hub delete/recreate, age-out, throttle, dropped connections, latency) act on this path too.

What it is not: a Kafka broker. There is no replication, no log compaction, no transactions, no KIP-848 consumer
groups and no topic administration through Kafka (CreateTopics, DeleteTopics, AlterConfigs are absent, as hubs
are made in the emulator's configuration, like the service's portal/ARM). Only the APIs in ``apis.py`` are
offered, at the versions listed there; anything else closes the connection, as a broker does for an API it does
not know.

Layout: ``wire.py`` (primitive types, ``Api``), ``errors.py`` (error codes), ``server.py`` (connections, shared
endpoint state), ``apis.py`` (the API table), ``handlers_*.py`` (one concern each), ``records.py`` (record batch
v2), ``mapping.py`` (Kafka record <-> stored event), ``groups.py`` (classic consumer-group coordinator).
"""
