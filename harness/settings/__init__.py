"""Setting names checked against the software that reads them (Spark, Kafka, librdkafka, the Event Hubs sender).

`catalogue` asks Spark and Kafka for the names they know and each one's value type (a short JVM run, cached per
version outside git); `values` judges a value by that type;
`librdkafka` asks confluent-kafka; `check` applies them to a scenario's pass-through tables, for the Scenario
validator in harness.config.
"""
from __future__ import annotations

from harness.settings.check import check_setting_names

__all__ = ["check_setting_names"]
