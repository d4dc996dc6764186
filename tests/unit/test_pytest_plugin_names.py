"""The plugin's fixtures live in the `harness_` namespace: pytest has one fixture namespace for every installed
plugin, and a plain name (`spark_session`, pytest-spark's) is silently replaced by whichever plugin loads last.
Read from pytest's own `--fixtures` listing of what harness.pytest_plugin defines, in a directory outside the
project (no conftest of ours), with a stand-in for pytest-spark loaded beside it."""
from __future__ import annotations

import os
import re
import subprocess
import sys

PYTEST_SPARK_LIKE = '''
import pytest

@pytest.fixture(scope="session")
def spark_session():
    return "pytest-spark's session"
'''


def test_every_plugin_fixture_is_namespaced_and_spark_session_stays_the_other_plugins(tmp_path):
    (tmp_path / "other_spark_plugin.py").write_text(PYTEST_SPARK_LIKE)
    (tmp_path / "test_theirs.py").write_text(
        "def test_spark_session_is_theirs(spark_session):\n"
        "    assert spark_session == \"pytest-spark's session\"\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    argv = [sys.executable, "-m", "pytest", "-p", "other_spark_plugin", "-p", "no:cacheprovider", "-q",
            "--rootdir", str(tmp_path), "-c", os.devnull]
    listing = subprocess.run([*argv, "--fixtures", "test_theirs.py"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120)
    assert listing.returncode == 0, listing.stdout + listing.stderr
    section = listing.stdout.split("fixtures defined from harness.pytest_plugin", 1)[1].split("fixtures defined "
                                                                                            "from", 1)[0]
    names = re.findall(r"^(\w+)(?: \[\w+ scope\])? -- ", section, re.M)
    assert {"harness_spark_session", "harness_kafka_cluster", "harness_run"} <= set(names), names
    assert [n for n in names if not n.startswith("harness_")] == []
    ran = subprocess.run([*argv, "test_theirs.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout + ran.stderr
