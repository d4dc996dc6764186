"""Kafka backends: an embedded KRaft broker (default), a user's cluster (`external`), or testcontainers."""
