"""`harness init`: the harness in a team's own repository, in one command.

It writes, into the directory given (the repository's root; default the current one):
- `scenarios/<name>.toml`: a starter scenario for the team's query (`--query package.module:function`), a steady
  load on an embedded Kafka broker, every field commented;
- the query module itself, only when it does not exist yet: a pass-through written to the query contract, to be
  replaced by the team's transformation;
- `tests/test_<name>_harness.py`: a pytest test through the harness's plugin (a short smoke run of the scenario),
  and a `pytest.ini` putting the repository's root on the path when the repository has no pytest configuration
  (pyproject.toml, setup.cfg, tox.ini: pytest then takes the root as rootdir, which the plugin hands to the runs);
- `.github/workflows/streaming-harness.yml` (every pull request: validate the scenarios, the smoke test, the
  reports of a failed run kept) and `.github/workflows/streaming-harness-nightly.yml` (the scenario's full run
  every night against the last passing night as its baseline, JUnit and the report published).
Nothing is overwritten unless `--force`: the files that exist are named and nothing is written (exit 2).
The templates are in harness/templates (shipped in the wheel); `@@name@@` placeholders, because GitHub's
`${{ }}` must stay as it is.
"""
from __future__ import annotations

import keyword
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.files import atomic
from harness.errors import InputError

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
DEFAULT_QUERY = "streaming_job.query:query"
DEFAULT_INSTALL = "spark-stream-harness[plots]"  # the published report draws its figures
_QUERY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):([A-Za-z_][A-Za-z0-9_]*)$")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Planned:
    path: Path  # relative to the target directory
    template: str
    why: str


def parse_query(query: str) -> tuple[str, str]:
    """`package.module:function` -> (module, function); InputError naming what is allowed."""
    m = _QUERY.match(query)
    if not m or any(keyword.iskeyword(part) for part in (*m.group(1).split("."), m.group(2))):
        raise InputError(f"--query {query!r}: package.module:function, e.g. {DEFAULT_QUERY} (Python identifiers)")
    return m.group(1), m.group(2)


def plan(target: Path, module: str, name: str) -> list[Planned]:
    """What `init` writes, relative to `target`; the query module only when neither it nor a package of that
    name exists there."""
    module_path = Path(*module.split("."))
    files = [Planned(Path("scenarios") / f"{name}.toml", "scenario.toml.tmpl", "the starter scenario"),
             Planned(Path("tests") / f"test_{name}_harness.py", "test_harness.py.tmpl", "its pytest smoke test"),
             Planned(Path(".github/workflows/streaming-harness.yml"), "workflow-pr.yml.tmpl",
                     "the pull-request check"),
             Planned(Path(".github/workflows/streaming-harness-nightly.yml"), "workflow-nightly.yml.tmpl",
                     "the nightly run against a baseline")]
    if not any((target / c).exists() for c in ("pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini")):
        files.append(Planned(Path("pytest.ini"), "pytest.ini.tmpl", "so the query imports in the tests and runs"))
    if not (target / module_path.with_suffix(".py")).exists() and not (target / module_path / "__init__.py").exists():
        files.insert(0, Planned(module_path.with_suffix(".py"), "query.py.tmpl", "a starter query to replace"))
        for i in range(1, len(module_path.parts)):  # the packages above it
            init = Path(*module_path.parts[:i]) / "__init__.py"
            if not (target / init).exists():
                files.insert(0, Planned(init, "", "its package"))
    return files


def render(template: str, values: dict[str, str]) -> str:
    if not template:
        return ""
    text = (TEMPLATES / template).read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace(f"@@{key}@@", value)
    left = re.findall(r"@@\w+@@", text)
    if left:
        raise RuntimeError(f"template {template} has placeholders nobody fills: {sorted(set(left))}")
    return text


def init(target: Path, *, query: str = DEFAULT_QUERY, name: str | None = None, install: str = DEFAULT_INSTALL,
         force: bool = False, out=print) -> list[Path]:
    """Write the starter into `target`; the paths written. InputError (exit 2) before anything is written for a
    bad option or files that exist (without `force`)."""
    module, function = parse_query(query)
    name = name or module.split(".")[-1].replace("_", "-")
    if not _NAME.match(name):
        raise InputError(f"--name {name!r}: 1-64 letters, digits, '_' or '-' (the scenario's name)")
    if not install.strip() or any(c in install for c in '"\n\\$`'):
        raise InputError(f"--install {install!r}: what pip installs the harness from (a name, a wheel or a git "
                         "URL), without quotes, backslashes, $ or backticks")
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise InputError(f"{target}: not a directory")
    files = plan(target, module, name)
    existing = [str(f.path) for f in files if (target / f.path).exists()]
    if existing and not force:
        raise InputError(f"{target}: {', '.join(existing)} already exist; nothing written (--force replaces them)")
    values = {"name": name, "query": query, "module": module, "function": function, "install": install.strip(),
              "ident": re.sub(r"\W", "_", name), "python": f"{sys.version_info.major}.{sys.version_info.minor}"}
    written = []
    for f in files:
        path = target / f.path
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, render(f.template, values))
        written.append(path)
        out(f"wrote {f.path}: {f.why}")
    out(f"next: pip install -e . (if this is a package), harness setup, harness validate scenarios/{name}.toml, "
        f"pytest tests/test_{name}_harness.py")
    if install == DEFAULT_INSTALL:
        out(f"the workflows install the harness with `pip install '{DEFAULT_INSTALL}'`: set HARNESS_INSTALL in "
            "them to a wheel or git URL (`spark-stream-harness[plots] @ git+https://...`) if it is not on your index")
    return written
