"""gpuframe's modules import each other in one direction only: no circle, counting imports inside
functions too (a lazy import that hides a circle is still a circle) and the subpackage
``__init__`` that importing a submodule runs first."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gpuframe"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Each gpuframe module's gpuframe imports, as module names (``from .x import name``
    counts as an import of ``x.name`` where that is a module, else of ``x``)."""
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    packages = {module_name(p, root) for p in root.rglob("__init__.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name if name in packages else name.rsplit(".", 1)[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.startswith("gpuframe"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                if not base.startswith("gpuframe"):
                    continue
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    targets.add(candidate if candidate in modules else base)
        graph[name] = {t for t in _with_parents(targets, packages, name) if t in modules}
    return graph


def _with_parents(targets: set[str], packages: set[str], importer: str) -> set[str]:
    """Importing ``a.b.c`` runs ``a.b``'s ``__init__`` first, unless the importer lies in
    ``a.b`` (whose ``__init__`` ran before it) or is it. The root package is left aside: every
    module needs it, and it only gathers the public API."""
    result = set(targets)
    for target in targets:
        parts = target.split(".")
        for end in range(2, len(parts)):
            parent = ".".join(parts[:end])
            if parent in packages:
                result.add(parent)
    return {t for t in result if t != "gpuframe" and t != importer
            and not importer.startswith(t + ".")}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (its modules in order, the first repeated at the end),
    or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def test_gpuframe_has_no_import_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_check_finds_a_circle_through_a_lazy_import(tmp_path):
    package = tmp_path / "gpuframe"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("")
    (package / "low" / "base.py").write_text("def f():\n    from ..top import g\n")
    (package / "top.py").write_text("from .low.base import f\n")
    assert find_cycle(import_graph(package)) == ["gpuframe.low.base", "gpuframe.top",
                                                 "gpuframe.low.base"]


def test_the_check_counts_a_subpackage_init(tmp_path):
    package = tmp_path / "gpuframe"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("from ..top import g\n")
    (package / "low" / "base.py").write_text("x = 1\n")
    (package / "top.py").write_text("from .low.base import x\n")
    assert find_cycle(import_graph(package)) is not None


@pytest.mark.parametrize("module", ["gpuframe.errors", "gpuframe.cudf_direct"])
def test_the_lowest_modules_import_nothing_of_the_engine(module):
    assert not import_graph()[module]


@pytest.mark.parametrize("module", ["gpuframe.backend", "gpuframe.config"])
def test_the_lowest_layers_import_only_the_lowest_modules(module):
    """errors, and the pylibcudf calls beside cuDF's backend (:mod:`gpuframe.cudf_direct`)."""
    assert import_graph()[module] <= {"gpuframe.errors", "gpuframe.cudf_direct"}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@pytest.mark.parametrize("lower, higher", [
    ("gpuframe.diagnostics.stages", "gpuframe.cluster"),
    ("gpuframe.cluster.engine", "gpuframe.frame"),
    ("gpuframe.diagnostics.jobs", "gpuframe.operators"),
    ("gpuframe.io.planning.plan", "gpuframe.cluster"),
    ("gpuframe.runtime.runner", "gpuframe.plan"),
    ("gpuframe.exchange.splitters", "gpuframe.runtime"),
    ("gpuframe.plan.optimize", "gpuframe.operators.join"),
    ("gpuframe.operators.join", "gpuframe.frame"),
])
def test_layers_stay_in_order(lower, higher):
    assert higher not in reachable(import_graph(), lower)


BELOW_IO = {"gpuframe.errors", "gpuframe.config", "gpuframe.backend", "gpuframe.cudf_direct",
            "gpuframe.units"}


def test_io_imports_only_itself_and_what_lies_below_it():
    """Reading knows nothing of the cluster, the runner, the plan or the frame: the read
    operator drives it."""
    graph = import_graph()
    above = {module: sorted(t for t in reachable(graph, module)
                            if not t.startswith("gpuframe.io") and t not in BELOW_IO)
             for module in graph if module.startswith("gpuframe.io")}
    assert {m: a for m, a in above.items() if a} == {}
