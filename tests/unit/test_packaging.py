"""Packaging without building: pyproject.toml lists every package on disk and ships every data file, the exact
constraints sit inside pyproject's ranges, the Makefile installs with them, the scenarios and runs are found
where a checkout and a wheel put them, and `harness --version` reads the installed metadata.
(tests/integration/test_wheel_install.py builds the wheel and runs it in a fresh venv.)"""
from __future__ import annotations

import fnmatch
import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness.files import paths
from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def _package_dir(package: str) -> Path:
    mapped = SETUPTOOLS.get("package-dir", {}).get(package)
    return ROOT / mapped if mapped else ROOT / package.replace(".", "/")


def test_every_package_on_disk_is_listed_and_every_listed_one_exists():
    on_disk = {".".join(prefix + p.parent.relative_to(ROOT).parts)
               for top, prefix in (("harness", ()), ("producers", ("harness",)), ("reports", ("harness",)))
               for p in (ROOT / top).rglob("__init__.py") if "__pycache__" not in p.parts}
    listed = set(SETUPTOOLS["packages"])
    assert not on_disk - listed, f"packages missing from pyproject.toml [tool.setuptools] packages: " \
                                 f"{sorted(on_disk - listed)}"
    assert all(_package_dir(p).is_dir() for p in listed), [p for p in listed if not _package_dir(p).is_dir()]
    assert _package_dir("harness.scenarios") == ROOT / "scenarios"
    assert _package_dir("harness.producers") == ROOT / "producers"
    assert _package_dir("harness.reports") == ROOT / "reports"
    assert all(p.split(".")[0] == "harness" for p in listed), "a wheel must claim only `harness` in site-packages"


def test_every_data_file_in_a_package_matches_a_package_data_pattern():
    """What is not a .py file ships only through a package-data pattern of its package or of a parent."""
    data = SETUPTOOLS["package-data"]
    unshipped = []
    for package in SETUPTOOLS["packages"]:
        base = _package_dir(package)
        for path in base.iterdir():
            if not path.is_file() or path.suffix in (".py", ".pyc"):
                continue
            candidates = [(parent, path.relative_to(_package_dir(parent)).as_posix())
                          for parent in data if path.is_relative_to(_package_dir(parent))]
            if not any(fnmatch.fnmatch(rel, pattern) for parent, rel in candidates for pattern in data[parent]):
                unshipped.append(path.relative_to(ROOT).as_posix())
    for nested in (ROOT / "harness" / "jvm").glob("*/*"):  # data dirs without __init__.py, shipped via `harness`
        if nested.is_file() and not any(fnmatch.fnmatch(nested.relative_to(ROOT / "harness").as_posix(), pat)
                                        for pat in data["harness"]):
            unshipped.append(nested.relative_to(ROOT).as_posix())
    assert not unshipped, f"not shipped in a wheel (add a package-data pattern): {unshipped}"


def _pins() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            out[canonicalize_name(name)] = version
    return out


def test_the_constraints_pin_every_dependency_inside_pyprojects_ranges():
    pins = _pins()
    extras = PYPROJECT["project"]["optional-dependencies"]
    reqs = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]
            + extras["dev"] + extras["eventhubs"] + extras["plots"]]
    for req in reqs:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} has no exact version in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject.toml's {req}"
        assert str(req.specifier) and "==" not in str(req.specifier), f"{req}: a range for users, not a pin"
    # the pins are the versions this venv was tested with (the metadata of what pip installed)
    for req in reqs:
        assert metadata.version(req.name) == pins[canonicalize_name(req.name)], req.name


def test_the_makefile_installs_with_the_constraints_and_reinstalls_when_they_change():
    make = (ROOT / "Makefile").read_text()
    stamp_rule = re.search(r"^\$\(STAMP\):(.*)$", make, re.M)
    assert stamp_rule and "constraints.txt" in stamp_rule.group(1).split() and "pyproject.toml" in stamp_rule.group(1)
    dry = subprocess.run(["make", "--no-print-directory", "-n", "-B", ".venv/.installed"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert re.search(r"pip install .*-c constraints\.txt .*-e '\.\[dev,eventhubs,plots\]'", dry), dry


def test_shipped_scenarios_are_the_packages_own_in_a_wheel_and_the_checkouts_otherwise(tmp_path):
    wheel_like = tmp_path / "site-packages" / "harness"
    (wheel_like / "scenarios").mkdir(parents=True)
    assert paths.shipped_scenarios_dir(wheel_like) == wheel_like / "scenarios"
    checkout = tmp_path / "repo" / "harness"
    checkout.mkdir(parents=True)
    assert paths.shipped_scenarios_dir(checkout) == tmp_path / "repo" / "scenarios"
    assert paths.SCENARIOS_DIR == ROOT / "scenarios"  # this checkout


def test_runs_go_under_the_current_directory_unless_harness_runs_says(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESS_RUNS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert paths.runs_dir() == tmp_path.resolve() / "runs"
    monkeypatch.setenv("HARNESS_RUNS", str(tmp_path / "elsewhere"))
    assert paths.runs_dir() == tmp_path / "elsewhere"


def test_version_is_the_installed_metadatas(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"spark-stream-harness {metadata.version('spark-stream-harness')} (")
    assert str(ROOT / "harness") in out and out.count("\n") == 1
