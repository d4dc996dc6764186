"""examples/team-project, a team's own repository, tested as the team tests it: pytest in that directory, with
the harness's plugin coming from the installed package (no conftest there) and its own query module, oracle and
scenario file."""
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from harness.files.paths import REPO

pytestmark = pytest.mark.integration

EXAMPLE = REPO / "examples" / "team-project"


@pytest.mark.slow  # `make test-slow`: keeps `make test` within its time budget (the plugin's fixtures and
# failure messages stay in `make test`: test_plugin_fixtures.py, test_plugin_failure_message.py)
def test_the_example_projects_tests_pass_through_the_plugin(tmp_path):
    junit = tmp_path / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'basetemp'}", f"--junitxml={junit}"],
                          cwd=EXAMPLE, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    cases = {c.get("name"): [child.tag for child in c] for c in ET.parse(junit).getroot().iter("testcase")}
    assert cases == {"test_enrich_scenario_passes": [], "test_enrich_tags_each_partition_with_its_region": [],
                     "test_the_next_version_restarts_on_the_current_versions_checkpoint": []}
    assert not (EXAMPLE / ".pytest_cache").exists()
