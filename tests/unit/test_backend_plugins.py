"""Backends as plugins: each kind is a package of harness/backends found by its name, its `[backend]` model says
which jars its Spark source needs and which capabilities it offers faults, and a fault needing a capability the
backend lacks is refused at load in the capability's words (no fault compares kind strings)."""
from pathlib import Path

import pytest

from harness.backends import SPECS
from harness.backends.capabilities import (BrokerProcesses, EmulatorControl, EpochReceivers, ProxiedListener,
                                           TopicAdmin)
from harness.config import ConfigError, load_scenario
from harness.faults import FAULTS

OWN_OPTIONS = {"add_partitions": "add = 2\n", "network": 'mode = "latency"\nlatency_ms = 50\n'}  # options a fault cannot go without
BACKENDS = Path(__file__).resolve().parents[2] / "harness" / "backends"



@pytest.fixture(autouse=True)
def namespace_connection_string(monkeypatch):
    """mode = namespace reads its connection string from the environment when the spec is built."""
    monkeypatch.setenv("EVENTHUBS_CONNECTION_STRING",
                       "Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v")

def spec(kind="kafka", **backend):
    return SPECS[kind].model_validate({"kind": kind, **backend})


def test_every_backend_package_is_a_kind_found_by_its_name():
    packages = sorted(p.name for p in BACKENDS.iterdir() if (p / "__init__.py").exists())
    assert sorted(SPECS) == packages == ["eventhubs", "kafka"]
    assert list(SPECS)[0] == "kafka"  # the default kind, first in every message listing the kinds
    assert all(SPECS[k].model_fields["kind"].annotation.__args__ == (k,) for k in SPECS)


def test_the_spec_names_its_spark_jars_and_capabilities_per_mode():
    assert spec().spark_jars == ("spark-kafka",) and spec(kind="eventhubs").spark_jars == ()
    assert spec().capabilities() == {TopicAdmin, BrokerProcesses, ProxiedListener}
    assert spec(mode="external", bootstrap_servers="127.0.0.1:9092").capabilities() == {TopicAdmin}
    assert spec(kind="eventhubs").capabilities() == {EmulatorControl, EpochReceivers}
    assert spec(kind="eventhubs", protocol="kafka").capabilities() == {EmulatorControl}
    assert spec(kind="eventhubs", protocol="kafka").spark_jars == ("spark-kafka",)
    assert spec(kind="eventhubs", mode="namespace").capabilities() == frozenset()


def test_no_fault_compares_backend_kinds():
    for path in (BACKENDS.parent / "faults").glob("*.py"):
        text = path.read_text()
        assert "backend.kind" not in text and 'kind != "kafka"' not in text and 'b.kind' not in text, path.name


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_a_fault_is_refused_where_its_backend_lacks_a_capability(kind, tmp_path):
    """For every fault: on a backend offering nothing (a real Event Hubs namespace) a fault that needs a capability
    is refused naming it; one that needs none is not refused for its backend."""
    fault = FAULTS[kind]
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\n[backend]\nkind = "eventhubs"\nmode = "namespace"\n'
                    '[producers]\nrate = { kind = "constant", eps = 100 }\n'
                    f'[[faults]]\nkind = "{kind}"\nat_s = 1\n' + OWN_OPTIONS.get(kind, ""))
    if not fault.capabilities:
        return  # its own options decide (a missing option is its own refusal)
    with pytest.raises(ConfigError) as err:
        load_scenario(str(path))
    assert f"faults.0 ({kind}): {fault.capabilities[0].refusal(spec(kind='eventhubs', mode='namespace'), fault)}" \
        in str(err.value)
