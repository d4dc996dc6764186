import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytest_plugins = ["pytester"]  # the pytest plugin's own tests run pytest sessions (tests/integration/test_plugin_*)


@pytest.fixture(scope="session")
def python():
    return sys.executable


@pytest.fixture
def harness_env(tmp_path):
    """Environment for a `python -m harness` subprocess: runs go under tmp, quiet output."""
    env = dict(os.environ)
    env.update({"HARNESS_RUNS": str(tmp_path / "runs"), "CI": "true", "PYTHONUNBUFFERED": "1"})
    return env
