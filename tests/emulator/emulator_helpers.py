"""Helpers shared by the emulator tests (imported by module name: pytest puts this directory on sys.path)."""

from __future__ import annotations

import threading
import time

from azure.eventhub import EventHubConsumerClient, EventHubProducerClient

FAST = dict(retry_total=1, retry_backoff_factor=0.05, retry_backoff_max=1)


def producer(emu, hub, **kw):
    return EventHubProducerClient.from_connection_string(emu.connection_string(hub), **{**FAST, **kw})


def consumer(emu, hub, cg="$Default", **kw):
    return EventHubConsumerClient.from_connection_string(
        emu.connection_string(hub), consumer_group=cg, **{**FAST, **kw}
    )


def collect(consumer, n: int, timeout: float = 15.0, stop_on_error: bool = False, **receive_kwargs) -> list:
    """Run ``consumer.receive`` in a thread until ``n`` events arrived (or timeout, or the first error with
    ``stop_on_error``); returns the events.

    Errors passed to on_error are collected under ``collect.errors`` of the returned list.
    """
    events: list = []
    errors: list = []
    done = threading.Event()

    def on_event(ctx, event):
        if event is None:
            return
        events.append((ctx, event))
        if len(events) >= n:
            done.set()

    def on_error(ctx, err):
        errors.append((ctx, err))
        if stop_on_error:
            done.set()

    receive_kwargs.setdefault("on_error", on_error)
    t = threading.Thread(target=consumer.receive, kwargs=dict(on_event=on_event, **receive_kwargs), daemon=True)
    t.start()
    done.wait(timeout)
    consumer.close()
    t.join(10)
    result = _Events(ev for _, ev in events)
    result.contexts = [ctx for ctx, _ in events]
    result.errors = errors
    return result


class _Events(list):
    contexts: list
    errors: list


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


