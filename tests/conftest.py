import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytest_plugins = ["pytester"]  # the pytest plugin's own tests run pytest sessions (tests/integration/test_plugin_*)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """`make test` runs two pytest-xdist workers (`-n 2 --dist loadgroup`): the integration tests one after the
    other on one of them (each wants the machine's two cores, and they share session fixtures: one broker, one
    steady run, one browser), the unit and emulator tests beside them on the other, mostly waiting on sockets."""
    for item in items:
        group = "integration" if "integration" in item.path.relative_to(REPO).parts else "light"
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def python():
    return sys.executable


@pytest.fixture
def harness_env(tmp_path):
    """Environment for a `python -m harness` subprocess: runs go under tmp, quiet output."""
    env = dict(os.environ)
    env.update({"HARNESS_RUNS": str(tmp_path / "runs"), "CI": "true", "PYTHONUNBUFFERED": "1"})
    return env
