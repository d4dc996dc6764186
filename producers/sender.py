"""The contract between a producer process (producers.process) and a backend's sender: what a backend package
provides so locust users can send through it (`BackendSpec.sender` names the class, `module:Class`).

A sender runs inside a locust process under gevent: nothing may block the hub (librdkafka's `flush()` and
`poll(timeout > 0)` would; the Event Hubs SDK's blocking sends run on their own greenlets). Every event handed to
`send_many` ends as exactly one row of the history (`AckWriter`): acked with its partition and offset, or failed
with the client's error name, or, after `abandon`, failed when the client reports the purge. Nothing is dropped
without a row: the checker counts on it.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from harness.records.history import AckWriter
from harness.producers.records import SecondStats


@runtime_checkable
class Sender(Protocol):
    name: str  # what locust's statistics call its requests

    @classmethod
    def from_job(cls, job: dict, acks: AckWriter, stats: SecondStats) -> "Sender":
        """The sender for a producer job (harness.runner's job.json: stream, settings, partitions, ...), writing
        each event's outcome to `acks` and per-second figures to `stats`."""

    def send_many(self, values: list[bytes], keys: list[bytes | None] | None, partitions: list[int] | None,
                  headers: list | None = None) -> None:
        """Hand one batch to the client, in order (an event's id and intended time are in its value). May wait
        cooperatively for room; never drops an event."""

    def service(self) -> None:
        """Collect delivery reports that arrived and record them (called often, without blocking)."""

    def outstanding(self) -> int:
        """Events handed over whose outcome is not recorded yet."""

    def abandon(self) -> None:
        """At the end, when reports stopped coming: make the client report every outstanding event as failed."""

    def close(self) -> None:
        """Record whatever is still held; the client is done."""
