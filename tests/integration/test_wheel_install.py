"""The wheel, installed into a fresh virtual environment outside the repository, works on its own: the scenarios
ship inside it, `harness --version` reads the installed metadata, `harness list` and `harness validate steady`
run from any directory, and runs go under the current directory.

The new environment gets the project's dependencies without the project: a .pth file naming the project venv's
site-packages. A directory a .pth adds is not itself scanned for .pth files, so the editable install's finder
(__editable__*.pth there) stays inactive; the test checks `import harness` fails before the wheel is installed.
Built with the project venv's setuptools (--no-build-isolation: nothing downloaded) from a copy of the sources,
so the shared checkout gets no build/ or egg-info from it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "harness", "producers", "reports", "scenarios")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")


def _run(argv, cwd, env, timeout=120) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _shipped_files() -> set[str]:
    """Every file the wheel must carry, as its name inside the wheel: the packages' files (sources and data), with
    producers/ and reports/ as harness/producers/ and harness/reports/, and the scenarios as harness/scenarios/."""
    out = set()
    for top, inside in (("harness", "harness"), ("producers", "harness/producers"), ("reports", "harness/reports")):
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                out.add(f"{inside}/{path.relative_to(ROOT / top).as_posix()}")
    out |= {f"harness/scenarios/{p.name}" for p in (ROOT / "scenarios").glob("*.toml")}
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("wheel-src")
    for name in SOURCES:
        (shutil.copytree(ROOT / name, src / name, ignore=SKIP) if (ROOT / name).is_dir()
         else shutil.copy2(ROOT / name, src / name))
    dist = tmp_path_factory.mktemp("dist")
    # an absolute path: a bare name would be looked up on the package index
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
          "-w", str(dist), str(src.resolve())], cwd=src, env=dict(os.environ))
    (built,) = dist.glob("spark_stream_harness-*.whl")
    return built


def test_the_wheel_carries_every_package_file_the_scenarios_and_the_license(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(_shipped_files() - names)
    assert not missing, f"files of the source tree not in the wheel (pyproject.toml's packages/package-data): " \
                        f"{missing}"
    tops = {n.split("/", 1)[0] for n in names if "/" in n and ".dist-info/" not in n}
    assert tops == {"harness"}, f"the wheel claims more than `harness` in site-packages: {sorted(tops)}"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "License-Expression: Apache-2.0" in text and "Requires-Dist: pyspark<4.4,>=4.3" in text
    assert "Description-Content-Type: text/markdown" in text


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """A fresh venv outside the repository with the wheel installed (its dependencies from the project venv):
    (venv, site-packages, the environment to run it with)."""
    tmp_path = tmp_path_factory.mktemp("installed")
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", None) or shutil.which("python3.11")
    _run([base, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path, env=dict(os.environ))
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp_path, env=dict(os.environ)).stdout.strip())
    deps = next(p for p in map(Path, sys.path) if p.name == "site-packages" and (p / "pyspark").is_dir())
    (site / "project-deps.pth").write_text(f"{deps}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARNESS_RUNS", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"

    before = subprocess.run([str(python), "-c", "import harness"], cwd=tmp_path, env=env, capture_output=True,
                            text=True)
    assert before.returncode != 0 and "No module named 'harness'" in before.stderr, \
        "the repository must not be importable in the fresh venv (else the test proves nothing)"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
          str(wheel)], cwd=tmp_path, env=env)
    return venv, site, env


def test_the_wheel_in_a_fresh_venv_outside_the_repo_lists_validates_and_writes_runs_under_the_cwd(installed,
                                                                                                  tmp_path):
    venv, site, env = installed
    python = venv / "bin" / "python"
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    where = _run([str(python), "-c", "import harness, harness.files.paths as p; print(harness.__file__); "
                  "print(p.SCENARIOS_DIR); print(p.runs_dir())"], cwd=cwd, env=env).stdout.split("\n")
    assert Path(where[0]).is_relative_to(site) and not Path(where[0]).is_relative_to(ROOT), where
    assert Path(where[1]) == site / "harness" / "scenarios", where
    assert Path(where[2]) == cwd.resolve() / "runs", where  # runs under the current directory

    harness = str(venv / "bin" / "harness")
    version = _run([harness, "--version"], cwd=cwd, env=env).stdout
    from importlib.metadata import version as installed_version  # the project venv's copy: same pyproject.toml
    assert version.startswith(f"spark-stream-harness {installed_version('spark-stream-harness')} ("), version
    assert str(site / "harness") in version

    import json

    names = [r["name"] for r in json.loads(_run([harness, "list", "--json"], cwd=cwd, env=env).stdout)]
    assert names == [p.stem for p in sorted((ROOT / "scenarios").glob("*.toml"))] and "steady" in names

    validated = _run([harness, "validate", "steady"], cwd=cwd, env=env).stdout
    assert validated.startswith(f"{site / 'harness' / 'scenarios' / 'steady.toml'}: ok"), validated
    assert not (cwd / "runs").exists()  # validate writes nothing


def test_harness_init_in_an_empty_directory_writes_a_starter_whose_test_passes(installed, tmp_path):
    """Issue 32: from an empty directory outside this checkout, with the harness installed from the wheel,
    `harness init` writes a team's starter (a query module, its scenario, a pytest test through the plugin and
    two workflows) and the generated test passes: a short run of the starter scenario on the embedded Kafka."""
    import yaml

    venv, _site, env = installed
    repo = tmp_path / "team-repo"
    repo.mkdir()
    said = _run([str(venv / "bin" / "harness"), "init", "--query", "team_jobs.enrich:build"], cwd=repo, env=env)
    assert "wrote scenarios/enrich.toml" in said.stdout
    written = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file())
    assert written == [".github/workflows/streaming-harness-nightly.yml", ".github/workflows/streaming-harness.yml",
                       "pytest.ini", "scenarios/enrich.toml", "team_jobs/__init__.py", "team_jobs/enrich.py",
                       "tests/test_enrich_harness.py"]
    for workflow in (repo / ".github" / "workflows").glob("*.yml"):
        steps = yaml.safe_load(workflow.read_text())["jobs"]
        assert steps and "@@" not in workflow.read_text()
    _run([str(venv / "bin" / "harness"), "validate", "scenarios/enrich.toml"], cwd=repo, env=env)
    test = _run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "tests/test_enrich_harness.py"], cwd=repo, env=env, timeout=600)
    assert "1 passed" in test.stdout, test.stdout[-3000:]
