"""One broker for a sweep's or a capacity search's runs (harness.commands.shared_broker): shared only when the runs
cannot tell, each run handed its own view of it, the decision recorded."""
import json
from contextlib import contextmanager

import pytest

from harness.commands import shared_broker, sweep
from harness.config import load_scenario
from harness.console import Console
from harness.runner import RunOutcome
from test_config import MINIMAL, write


def _load(tmp_path, text, *overrides):
    return load_scenario(write(tmp_path, MINIMAL + text), list(overrides))[0]


def test_plain_embedded_kafka_runs_share(tmp_path):
    runs = [_load(tmp_path, "", f"stream.partitions={n}") for n in (1, 4)]  # topics differ: each run makes its own
    assert shared_broker.reason_not_shared(runs, environ={}) is None


@pytest.mark.parametrize("text,overrides,why", [
    ("", ["backend.heap_mb=256"], "the [backend] settings differ between the runs (backend.heap_mb)"),
    ('[backend]\nkind = "eventhubs"\n', [], "only the embedded Kafka broker is shared"),
    ('[backend]\nmode = "external"\nbootstrap_servers = "127.0.0.1:9092"\n', [], "mode external"),
    ('[[faults]]\nkind = "driver_kill"\nat_s = 5\n', [], "the runs have faults (driver_kill)"),
    ("[backend]\nproxy = true\n", [], "backend.proxy"),
])
def test_runs_that_could_tell_get_their_own_broker(tmp_path, text, overrides, why):
    first = _load(tmp_path, text)
    second = _load(tmp_path, text, *overrides)
    reason = shared_broker.reason_not_shared([first, second], environ={})
    assert reason is not None and why in reason


def test_the_switch_turns_it_off(tmp_path):
    reason = shared_broker.reason_not_shared([_load(tmp_path, "")], environ={"HARNESS_SHARED_BROKER": "0"})
    assert reason == "HARNESS_SHARED_BROKER=0 in the environment"


def test_a_sweep_hands_every_run_its_own_view_of_one_broker(tmp_path, monkeypatch):
    """The pipeline and the broker stood in for (both are run for real in the integration tests): the sweep
    enters the shared broker once, each run gets a fresh backend from it, and sweep.json says it was shared."""
    entered, given, asked = [], [], []

    @contextmanager
    def one_broker(scenarios, out_dir, console, what):
        entered.append((len(scenarios), what))

        def backend():
            given.append(object())
            return given[-1]
        yield backend

    def fake_run(scenario, path, overrides, out, console, backend=None):
        asked.append(backend)
        return RunOutcome(out, {"verdict": "pass", "checks": [], "latency_ms": {"p99": 1.0}}, 0)

    monkeypatch.setattr(sweep, "shared_broker", one_broker)
    monkeypatch.setattr("harness.runner.run_loaded", fake_run)
    path = write(tmp_path, MINIMAL + '[sweep]\n"stream.partitions" = [1, 2, 3]\n')
    scenario, _, _ = load_scenario(path)
    sweep.run_sweep(scenario, path, [], tmp_path / "out", Console(quiet=True))
    assert entered == [(3, "sweep")]
    assert asked == given and len(set(map(id, asked))) == 3
    assert json.loads((tmp_path / "out" / "sweep.json").read_text())["broker"] == {"shared": True, "why_not": None}
    assert "One Kafka broker for every run" in (tmp_path / "out" / "sweep.md").read_text()


def test_sweep_md_says_why_each_run_had_its_own_broker(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_SHARED_BROKER", "0")
    monkeypatch.setattr("harness.runner.run_loaded", lambda scenario, path, overrides, out, console, backend=None:
                        RunOutcome(out, {"verdict": "pass", "checks": [], "latency_ms": {"p99": 1.0}}, 0))
    path = write(tmp_path, MINIMAL + '[sweep]\n"stream.partitions" = [1, 2]\n')
    scenario, _, _ = load_scenario(path)
    sweep.run_sweep(scenario, path, [], tmp_path / "out", Console(quiet=True))
    assert "A broker per run: HARNESS_SHARED_BROKER=0 in the environment." in \
        (tmp_path / "out" / "sweep.md").read_text()
