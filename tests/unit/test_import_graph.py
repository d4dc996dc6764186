"""The project's imports run one way: no circle among its modules (imports inside functions and under
TYPE_CHECKING count: they hide a circle from Python, not from a reader), and no module imports from a layer above
its own. The layers are docs/architecture.md's Layout table, bottom first; a new module must be placed in one."""
import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# folder -> the package it installs as (pyproject.toml's package-dir: producers/ and reports/ live inside harness)
PACKAGES = {"harness": "harness", "producers": "harness.producers", "reports": "harness.reports"}

# bottom first: a module may import from its own layer and the ones before it
LAYERS = [
    ("foundations", ["harness", "harness.files", "harness.records", "harness.samplers", "harness.text",
                     "harness.errors", "harness.console", "harness.loopback", "harness.supervisor",
                     "harness.partitioning", "harness.effects", "harness.jvm", "harness.check"]),
    # the reconciler and the clocks read the file sink's log (harness.sinks.parquet.files): beside the parts
    ("parts", ["harness.producers", "harness.backends", "harness.spark", "harness.emulator", "harness.netproxy",
               "harness.objstore", "harness.queries", "harness.oracles", "harness.faults", "harness.sinks", "harness.reconcile",
               "harness.clocks"]),
    ("scenario model", ["harness.config"]),
    ("run", ["harness.context", "harness.analysis", "harness.schema"]),
    ("rendering", ["harness.reports"]),
    ("judge", ["harness.checkers", "harness.verdict", "harness.soak"]),
    ("pipeline", ["harness.runner"]),
    ("commands", ["harness.commands", "harness.bench"]),
    ("entry points", ["harness.cli", "harness.__main__", "harness.pytest_plugin"]),
]


def modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = package.split(".") + list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> dict[str, int]:
    """The project's modules `name` imports, each with a line it does so on."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                anchor = base[:len(base) - node.level + 1]
                module = ".".join(anchor + ([module] if module else []))
            targets = [module] + [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.setdefault(target, node.lineno)
    return out


def graph() -> tuple[dict[str, Path], dict[str, dict[str, int]]]:
    known = modules()
    return known, {name: imports(name, path, known) for name, path in known.items()}


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected sets of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, {}))))
                elif child in on_stack:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def layer_of(module: str) -> int | None:
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (i, len(prefix))
    return best[0] if best else None


def test_the_circle_finder_sees_imports_inside_functions_and_type_checking(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    from pkg.b import g\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n")
    (tmp_path / "c.py").write_text("import pkg.a\n")
    known = {f"pkg.{n}": tmp_path / f"{n}.py" for n in "abc"}
    edges = {name: imports(name, path, known) for name, path in known.items()}
    assert edges == {"pkg.a": {"pkg.b": 2}, "pkg.b": {"pkg.c": 3}, "pkg.c": {"pkg.a": 1}}
    assert circles(edges) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert circles({"a": {"b": 1}, "b": {}}) == []


def test_no_import_circle():
    known, edges = graph()
    found = circles(edges)
    assert not found, "\n".join(
        "circle: " + "; ".join(f"{known[a].relative_to(ROOT)}:{line} imports {b}"
                               for a in group for b, line in edges[a].items() if b in group) for group in found)


def test_every_module_has_a_layer():
    known, _ = graph()
    assert [m for m in known if layer_of(m) is None] == []


def test_nothing_imports_from_a_layer_above_its_own():
    known, edges = graph()
    upward = defaultdict(list)
    for a, targets in edges.items():
        for b, line in targets.items():
            if layer_of(b) > layer_of(a):
                upward[a].append(f"{known[a].relative_to(ROOT)}:{line} ({LAYERS[layer_of(a)][0]}) imports {b} "
                                 f"({LAYERS[layer_of(b)][0]})")
    assert not upward, "\n".join(x for xs in upward.values() for x in xs)


MEASURE_JUDGE_RENDER = ["harness/analysis", "harness/checkers", "harness/verdict.py", "harness/soak", "reports"]
LONGEST = 60


def test_no_long_function_where_a_run_is_measured_judged_or_rendered():
    """Functions of at most LONGEST lines in the measuring, judging and rendering layers: a longer one mixes
    concerns (issue 33: the judge that also measured, the report kept by hand beside the page)."""
    long = []
    for top in MEASURE_JUDGE_RENDER:
        path = ROOT / top
        for f in [path] if path.is_file() else sorted(path.rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                        node.end_lineno - node.lineno + 1 > LONGEST:
                    long.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name} "
                                f"({node.end_lineno - node.lineno + 1} lines)")
    assert long == []
