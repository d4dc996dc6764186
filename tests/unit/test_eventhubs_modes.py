"""Event Hubs beyond the project's emulator: Microsoft's emulator's Config.json generated from the scenario, faults
a real namespace (or Microsoft's emulator) cannot carry refused before the run with the reason, those the service
allows kept, and mode = "container" without Docker refused at once (exit 2 through InputError)."""
import pytest

from harness.backends.eventhubs import container
from harness.config import ConfigError, load_scenario
from harness.errors import InputError

NAMESPACE = "Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="
KEY = "c2VjcmV0LWtleS1ub3QtdG8tYmUtZWNob2Vk"


@pytest.fixture(autouse=True)
def namespace_connection_string(monkeypatch):
    """mode = namespace reads its connection string from the environment when the scenario loads."""
    monkeypatch.setenv("EVENTHUBS_CONNECTION_STRING", NAMESPACE + KEY)


CONTROL_FAULTS = {
    "age_out": 'kind = "age_out"\nat_s = 5\nkeep_last = 10',
    "hub_delete": 'kind = "hub_delete"\nat_s = 5\nrecreate = true',
    "throttle": 'kind = "throttle"\nmode = "reject"\nwindow = [5, 8]',
    "epoch_steal": 'kind = "epoch_steal"\nat_s = 5',
}
SERVICE_FAULTS = {
    "driver_kill": 'kind = "driver_kill"\nat_s = 5',
    "checkpoint_tamper": 'kind = "checkpoint_tamper"\nat_s = 5\nmode = "drop_last_commit"',
}


def scenario_file(tmp_path, mode, fault):
    path = tmp_path / f"{mode}.toml"
    path.write_text(f"""
name = "eh-{mode}"
[backend]
kind = "eventhubs"
mode = "{mode}"
[stream]
name = "events"
partitions = 4
[producers]
duration_s = 10
rate = {{ kind = "constant", eps = 100 }}
[[faults]]
{fault}
""")
    return path


def test_config_json_is_microsofts_shape_for_the_scenarios_hub():
    got = container.config_json("events", 8, ["etl", "$Default", "etl", "harness-observer"])
    assert got == {"UserConfig": {
        "NamespaceConfig": [{"Type": "EventHub", "Name": "emulatorNs1", "Entities": [
            {"Name": "events", "PartitionCount": "8",
             "ConsumerGroups": [{"Name": "etl"}, {"Name": "harness-observer"}]}]}],
        "LoggingConfig": {"Type": "File"}}}


def test_config_json_refuses_what_microsofts_emulator_does_not_allow():
    with pytest.raises(ValueError, match="allows 1-32 partitions per hub; the scenario has 33"):
        container.config_json("events", 33, [])
    with pytest.raises(ValueError, match="allows 20 consumer groups per hub; 21 given"):
        container.config_json("events", 4, [f"g{i}" for i in range(21)])


def test_connection_string_is_the_emulators_development_form():
    assert container.connection_string("localhost", 32768) == (
        "Endpoint=sb://localhost:32768;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;"
        "UseDevelopmentEmulator=true")


@pytest.mark.parametrize("kind", sorted(CONTROL_FAULTS))
def test_a_namespace_refuses_faults_that_need_the_emulators_control_api(tmp_path, kind):
    with pytest.raises(ConfigError) as info:
        load_scenario(str(scenario_file(tmp_path, "namespace", CONTROL_FAULTS[kind])))
    message = str(info.value)
    assert f"faults.0 ({kind}): needs the emulator's control API (" in message
    assert "; a real namespace does not allow it (run it with backend.mode = 'emulator')" in message


@pytest.mark.parametrize("kind", sorted(CONTROL_FAULTS))
def test_microsofts_emulator_refuses_them_too(tmp_path, kind):
    with pytest.raises(ConfigError, match=r"Microsoft's emulator \(mode = 'container'\) has none"):
        load_scenario(str(scenario_file(tmp_path, "container", CONTROL_FAULTS[kind])))


@pytest.mark.parametrize("mode", ["namespace", "container"])
@pytest.mark.parametrize("kind", sorted(SERVICE_FAULTS))
def test_faults_on_sparks_side_stay_allowed(tmp_path, mode, kind):
    scenario, _, _ = load_scenario(str(scenario_file(tmp_path, mode, SERVICE_FAULTS[kind])))
    assert scenario.backend.mode == mode and scenario.faults[0].kind == kind


def test_container_mode_takes_no_hub_settings(tmp_path):
    path = scenario_file(tmp_path, "container", SERVICE_FAULTS["driver_kill"])
    path.write_text(path.read_text().replace("partitions = 4", "partitions = 4\n[stream.config]\nRetentionSeconds = 60"))
    with pytest.raises(ConfigError, match="Microsoft's emulator \\(mode = 'container'\\) takes no hub settings"):
        load_scenario(str(path))


def test_container_mode_without_docker_is_refused_at_once(tmp_path, monkeypatch):
    from harness.backends.kafka import container as kafka_container

    monkeypatch.setattr(kafka_container, "docker_available", lambda: (False, "no Docker engine answers (test)"))
    backend = container.ContainerEventHubs("events", 4)
    with pytest.raises(InputError) as info:
        backend.start(tmp_path, supervisor=None)
    assert str(info.value) == ("backend.mode = 'container' runs Microsoft's Event Hubs emulator in Docker: no Docker "
                               "engine answers (test); use mode = 'emulator' (the project's emulator) instead")
    assert not (tmp_path / "services").exists()  # nothing started, nothing written


def test_a_hub_beyond_the_quotas_is_refused_before_docker_is_asked(tmp_path, monkeypatch):
    from harness.backends.kafka import container as kafka_container

    asked = []
    monkeypatch.setattr(kafka_container, "docker_available", lambda: asked.append(1) or (True, "ok"))
    with pytest.raises(InputError, match="allows 1-32 partitions per hub"):
        container.ContainerEventHubs("events", 40).start(tmp_path, supervisor=None)
    assert asked == []


@pytest.mark.parametrize("value, why", [
    (None, "which is unset"),
    ("  ", "which is empty"),
    ("Endpoint=sb://myns.servicebus.windows.net/", "At least one of the SharedAccessKey or SharedAccessSignature"),
    ("Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey",
     "Should be in the format: Endpoint=sb://<FQDN>/;SharedAccessKeyName=<KeyName>;SharedAccessKey=<KeyValue>"),
    (f"SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={KEY}", "blank or malformed"),
])
def test_a_namespace_connection_string_the_sdk_would_refuse_is_refused_at_load(tmp_path, monkeypatch, value, why):
    """Issue 32: only `Endpoint=` was looked for, at start: an unset variable or a string without its keys passed
    `validate` and the run ended in the SDK's `ValueError: Invalid connection string` (exit 1, a run directory).
    Now the SDK's own parser judges it when the scenario loads (exit 2), and the key is never quoted."""
    if value is None:
        monkeypatch.delenv("EVENTHUBS_CONNECTION_STRING")
    else:
        monkeypatch.setenv("EVENTHUBS_CONNECTION_STRING", value)
    with pytest.raises(ConfigError) as info:
        load_scenario(str(scenario_file(tmp_path, "namespace", SERVICE_FAULTS["driver_kill"])))
    message = str(info.value)
    assert "backend.eventhubs: connection_string_env: " in message and "$EVENTHUBS_CONNECTION_STRING" in message, message
    assert why in message and KEY not in message
