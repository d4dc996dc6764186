"""The harness's own Python code (and a scenario's query module) as archives Spark ships to its executors.

On a cluster master (spark://, yarn, k8s://) the executors' Python workers must import what the driver uses on
them (the Event Hubs source's reader, normalisers, oracles' executor code, a user's query module) from what the
driver shipped, never from whatever happens to be installed where the executor runs. The driver hands these
archives to `SparkContext.addPyFile`: Spark copies them into each executor's working directory and puts them on
its Python workers' path.

Why a zip of the package files rather than a wheel: a Python worker imports from a zip on its path, and PySpark
puts only `.zip`, `.egg` and `.jar` files there (a `.whl` is copied but left off the path); a wheel's extra
metadata (dist-info, entry points) is nothing an executor uses; and building one runs the build backend, with
its build/ and egg-info directories, in a checkout several people share. The archive holds exactly the packages
pyproject.toml installs (harness, with producers/ and reports/ as harness.producers and harness.reports; .py
files and package data) and is built once per source
state: its name carries a hash of every file in it, under the cache directory (outside git), so an unchanged
tree reuses it and a changed file makes a new one.
"""
from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

from harness.files.paths import REPO, cache_dir

# folder -> its name inside the archive, as pyproject.toml's packages and package-dir install them
PACKAGES = {"harness": "harness", "producers": "harness/producers", "reports": "harness/reports"}
ARCHIVE_PREFIX = "spark_stream_harness-"
_SKIP_DIRS = {"__pycache__", ".pytest_cache"}
_SUFFIXES = {".py", ".xml", ".json", ".toml"}  # sources and package data read at import/run time
_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed member times: the same files give the same bytes


def package_files(root: Path, packages: tuple[str, ...],
                  inside: dict[str, str] | None = None) -> list[tuple[str, Path]]:
    """(name inside the archive, file) of every file the packages (folders under `root`) ship, sorted by name;
    `inside` names a folder's place in the archive when it is not its own name."""
    out = []
    for package in packages:
        base = root / package
        if base.is_file() and base.suffix == ".py":  # a single-module "package" (a user's query module)
            out.append((base.name, base))
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
            for name in filenames:
                path = Path(dirpath) / name
                if path.suffix in _SUFFIXES:
                    name = (inside or {}).get(package, package) + "/" + path.relative_to(base).as_posix()
                    out.append((name, path))
    return sorted(out)


def source_hash(files: list[tuple[str, Path]]) -> str:
    """sha256 over every (name, content): the archive's identity."""
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_archive(files: list[tuple[str, Path]], out_dir: Path, prefix: str = ARCHIVE_PREFIX) -> Path:
    """The archive of `files` in `out_dir`, named by their hash; reused when it exists (written atomically, so a
    concurrent run never sees half of one)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{prefix}{source_hash(files)}.zip"
    if target.exists():
        return target
    tmp = out_dir / f".{target.name}.{os.getpid()}.tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, path in files:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    os.replace(tmp, target)
    return target


def harness_archive() -> Path:
    """The harness's packages as one archive, from the cache when this source state was built before."""
    return build_archive(package_files(REPO, tuple(PACKAGES), PACKAGES), cache_dir() / "pyfiles")


def query_module_archive(query: str, scenario_dir: Path) -> Path | None:
    """A scenario's own query module (`module:function`, looked up next to the scenario file first, as
    harness.queries does) as an archive of its top-level module or package; None for a built-in query or a
    module that does not live there (an installed one travels as the user installs it)."""
    if ":" not in query:
        return None
    top = query.partition(":")[0].split(".")[0]
    for candidate in (scenario_dir / top, scenario_dir / f"{top}.py"):
        if (candidate.is_dir() and (candidate / "__init__.py").exists()) or candidate.is_file():
            files = package_files(scenario_dir, (candidate.name,))
            return build_archive(files, cache_dir() / "pyfiles", prefix=f"query-{top}-")
    return None


def where_imported(_=None) -> dict:
    """Run as a task on an executor (harness.spark.query ships the archives, then maps this over a few
    partitions): where this Python worker found the harness's modules, from which directory it runs and what
    PYTHONPATH it was given. Pickled by reference, so merely running it proves the executor imported this module
    from what it could reach."""
    import importlib
    import os
    import socket
    import sys

    offsets = importlib.import_module("harness.backends.eventhubs.spark_source.offsets")
    return {"harness": os.path.abspath(sys.modules["harness"].__file__),
            "eventhubs_offsets": os.path.abspath(offsets.__file__), "pyfiles": os.path.abspath(__file__),
            "cwd": os.getcwd(), "pythonpath": os.environ.get("PYTHONPATH", ""), "host": socket.gethostname(),
            "pid": os.getpid()}
