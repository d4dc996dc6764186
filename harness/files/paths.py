"""Where things live: the scenarios, the cache outside git, the runs directory.

The same code runs from a repository checkout (an editable install) and from an installed wheel, so nothing here
may assume the repository is there: in a wheel, `REPO` is site-packages. The shipped scenarios are the
repository's top-level scenarios/ folder in a checkout, and the package data `harness/scenarios/` in a wheel
(pyproject.toml maps one onto the other). Runs go under the current directory, as any command-line tool writes
its output: never into site-packages or into the checkout a user happens to have installed from.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent  # harness/, this module being harness/files/paths.py
REPO = PACKAGE.parent  # the checkout's root; site-packages when installed from a wheel


def shipped_scenarios_dir(package: Path = PACKAGE) -> Path:
    """The scenarios the harness ships: inside the installed package (a wheel), else the checkout's scenarios/."""
    installed = package / "scenarios"
    return installed if installed.is_dir() else package.parent / "scenarios"


SCENARIOS_DIR = shipped_scenarios_dir()


def cache_dir() -> Path:
    """JVM artifacts and Maven itself are cached here, outside git, and reused by every clone."""
    base = os.environ.get("HARNESS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "spark-stream-harness")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir() -> Path:
    """$HARNESS_RUNS, else ./runs under the current directory (absolute, so a later chdir changes nothing)."""
    return Path(os.environ.get("HARNESS_RUNS") or Path.cwd() / "runs").absolute()


def pyspark_home() -> Path:
    """The pip-installed PySpark's directory (its SPARK_HOME, with Spark's jars), found without importing it: an
    import is a quarter second of CPU, on the critical path of every run's start."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def switched_off(name: str, environ=None) -> bool:
    """An on-by-default switch in the environment (HARNESS_CDS, HARNESS_SHARED_BROKER) turned off: 0, false, no
    or off, in any case."""
    value = (os.environ if environ is None else environ).get(name, "1")
    return value.strip().lower() in ("0", "false", "no", "off")
