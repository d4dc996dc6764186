"""An external Kafka cluster (already running, by definition) named by an address where nothing listens is said
within seconds, not after the 30 s a slow cluster's metadata may take; a list of bootstrap servers whose first is
down still reaches the others."""
import socket
import time

import pytest

from harness.backends.kafka import admin
from harness.backends.kafka.external import UNREACHABLE_S, ExternalKafka
from harness.backends.base import BackendError


def dead_port() -> int:
    with socket.socket() as s:  # bound, closed: nothing listens there afterwards
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_is_said_after_the_unreachable_bound_naming_the_address(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(admin.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(admin.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    address = f"127.0.0.1:{dead_port()}"
    with pytest.raises(BackendError) as err:
        ExternalKafka(address).wait_ready(1, timeout=30, unreachable_s=UNREACHABLE_S)
    assert address in str(err.value) and "no bootstrap server accepted a connection in 10s" in str(err.value)
    assert UNREACHABLE_S <= clock[0] < UNREACHABLE_S + 1  # each refused look costs 0.2 s of the fake clock


def test_without_the_bound_it_waits_out_the_whole_timeout(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(admin.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(admin.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    with pytest.raises(BackendError, match="not ready after 30s"):
        ExternalKafka(f"127.0.0.1:{dead_port()}").wait_ready(1, timeout=30)
    assert clock[0] >= 30


def test_any_listening_bootstrap_server_counts():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        up = listening.getsockname()[1]
        started = time.monotonic()
        assert admin._accepts(f"127.0.0.1:{dead_port()},127.0.0.1:{up}")
        assert not admin._accepts(f"127.0.0.1:{dead_port()}, 127.0.0.1:{dead_port()}")
        assert time.monotonic() - started < 5  # refused at once on loopback, not after the 1 s connect timeout
