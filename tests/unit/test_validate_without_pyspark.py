"""Issue 32: `harness validate` on a machine without PySpark (a light CI job that lints scenario files) ended in a
40-line PackageNotFoundError traceback. Now it checks everything that does not need Spark's own setting names and
says in one line what it left and why; what it can check is still refused (exit 2).

The machine without PySpark is this interpreter with the distribution and the package made invisible before the
harness is imported, so the whole command runs as it would there."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WITHOUT_PYSPARK = """
import importlib.metadata as m, sys
_version = m.version
def version(name):
    if name.lower() == "pyspark":
        raise m.PackageNotFoundError(name)
    return _version(name)
m.version = version
class NoPySpark:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "pyspark":
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, NoPySpark())
from harness.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _validate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_PYSPARK, "validate", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=120)


def test_every_shipped_scenario_validates_and_names_what_it_left():
    for name in ("steady", "eh-steady", "skew-tuning"):
        done = _validate(name)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        line, = done.stdout.splitlines()
        assert line.startswith(str(ROOT / "scenarios" / f"{name}.toml") + ": ok")
    steady = _validate("steady").stdout.strip()
    assert steady.endswith(": ok; not checked here: the names in spark.source_options (PySpark is not installed "
                           "here, and Spark's names are read from its jars; `harness run` checks them before it "
                           "starts)"), steady
    assert _validate("eh-steady").stdout.strip().endswith("eh-steady.toml: ok")  # nothing of Spark's to check


def test_what_needs_no_spark_is_still_refused(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[producers]\nrate = { kind = "constant", eps = 100 }\n'
                   '[producers.client]\n"linger.mss" = 5\n')
    done = _validate(str(bad))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "producers.client.linger.mss: unknown librdkafka setting" in done.stderr, done.stderr
