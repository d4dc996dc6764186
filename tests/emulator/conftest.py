"""One emulator per test session (plus a SAS-validating one on demand) and SDK helpers.

Each test module works on its own hubs so modules do not see each other's events; faults that are global
(throttle, latency) are reset after every test by the ``emu`` fixture.
"""

from __future__ import annotations

import pytest

from emulator_helpers import collect, wait_for

from harness.emulator import EmulatorConfig, EmulatorServer, HubConfig

CG = ("$Default", "cg1")
HUBS = (
    HubConfig("eh1", 4, CG),
    HubConfig("sendmodes", 4, CG),
    HubConfig("positions", 2, CG),
    HubConfig("epochs", 2, CG),
    HubConfig("metrics", 1, CG),
    HubConfig("faults", 2, CG),
    HubConfig("deleteme", 2, CG),
    HubConfig("ageout", 1, CG),
    HubConfig("retention", 1, CG, retention_s=3.0),  # long enough to see the event before it expires on a busy machine
    HubConfig("bounded", 1, CG, max_events_per_partition=10),
    HubConfig("asynchub", 2, CG),
    HubConfig("lb", 4, CG),
    HubConfig("lb2", 4, CG),
    HubConfig("hostile", 1, CG),
    HubConfig("control", 2, CG),
    HubConfig("big", 1, CG),
    HubConfig("annotations", 1, CG),
    HubConfig("refusals", 2, CG),
    HubConfig("shrink", 4, CG),
    HubConfig("quota", 1, CG),
    HubConfig("idle", 1, CG),
    HubConfig("transports", 2, CG),
    # partition counts of the Azure SDK for JS's published key placements (test_sdk_fidelity.py)
    HubConfig("keys3", 3, CG),
    HubConfig("keys4", 4, CG),
    HubConfig("keys11", 11, CG),
    HubConfig("keys15", 15, CG),
)


@pytest.fixture(scope="session")
def emulator():
    server = EmulatorServer(EmulatorConfig(hubs=HUBS), control_port=0).start()
    yield server
    server.stop()


@pytest.fixture
def emu(emulator):
    yield emulator
    emulator.throttle(False)
    emulator.set_latency(0)


@pytest.fixture
def conn_str(emulator):
    return emulator.connection_string


@pytest.fixture
def collect_events():
    return collect


@pytest.fixture
def wait_until():
    return wait_for
