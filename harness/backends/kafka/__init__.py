"""Kafka backends: an embedded KRaft broker (default), a user's cluster (`external`), or testcontainers.

The package is the backend kind `kafka`: `SPEC` is its `[backend]` model (harness.backends finds it by the
package's name), which builds the backend, names its producer sender and key placement, the Spark source's jars
and the capabilities it offers faults."""
from harness.backends.kafka.spec import KafkaSpec as SPEC

__all__ = ["SPEC"]
