"""The diagnostics and cluster packages hold no import circle and stay below the frame.

Read from the source, so every import counts: those inside functions and under TYPE_CHECKING,
and the package ``__init__`` that importing a submodule of another package runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gpuframe"
OURS = ("gpuframe.diagnostics", "gpuframe.cluster")


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["gpuframe", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The gpuframe modules that importing ``name`` runs, directly."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1]
            module = ".".join(base) if node.level else ""
            module = ".".join(filter(None, [module, node.module or ""]))
            targets.add(module)
            targets.update(f"{module}.{alias.name}" for alias in node.names)
    found = set()
    for target in targets & known:
        parts = target.split(".")
        found.update(".".join(parts[:end]) for end in range(2, len(parts) + 1))
    # the root package and the importer's own packages are running already
    return {t for t in found if not (t == name or name.startswith(t + "."))}


def import_graph() -> dict[str, set[str]]:
    names = module_names()
    return {name: imports_of(name, path, set(names)) for name, path in names.items()}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def ours(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in OURS)


def test_the_graph_sees_imports_in_functions_and_packages():
    graph = import_graph()
    assert "gpuframe.diagnostics.limits" in graph["gpuframe.diagnostics.attach"]
    assert "gpuframe.cluster" in graph["gpuframe.diagnostics.jobs"]  # cluster.engine's package
    assert "gpuframe.cluster" not in graph["gpuframe.cluster.local"]  # its own package


def test_no_module_of_diagnostics_or_cluster_is_on_an_import_circle():
    graph = import_graph()
    circles = sorted(name for name in graph if ours(name) and name in reachable(graph, name))
    assert circles == []


def test_stages_imports_nothing_of_the_engine_but_its_errors():
    assert import_graph()["gpuframe.diagnostics.stages"] == {"gpuframe.errors"}


def test_diagnostics_and_cluster_stay_below_the_frame():
    graph = import_graph()
    above = {name for name in graph if ours(name)
             and {"gpuframe.frame", "gpuframe.operators", "gpuframe.io"}
             & reachable(graph, name)}
    assert above == set()
    assert graph["gpuframe.diagnostics"] == set()
