"""io sits below the cluster and the frame, and its modules import one another one way: only
io.submit reaches the cluster and the frame, and only inside its functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gpuframe.io

IO_ROOT = Path(gpuframe.io.__path__[0])
MODULES = {
    ".".join(("gpuframe", "io", *path.relative_to(IO_ROOT).with_suffix("").parts))
    .removesuffix(".__init__"): path
    for path in sorted(IO_ROOT.rglob("*.py"))
}
BELOW_IO = ("gpuframe.errors", "gpuframe.config", "gpuframe.backend")
"""What io may import of gpuframe besides itself."""
SUBMIT = "gpuframe.io.submit"


def imports(name: str, at_import_time: bool) -> list[str]:
    """The gpuframe modules ``name`` imports, absolute: all of them, or (``at_import_time``)
    those its import runs, outside functions and ``if TYPE_CHECKING:``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    nodes = list(ast.walk(tree)) if not at_import_time else _import_time_nodes(tree.body)
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                found.append(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES
                             else base)
    return [module for module in found if module.split(".")[0] == "gpuframe"]


def _import_time_nodes(body: list[ast.stmt]) -> list[ast.stmt]:
    nodes = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            nodes.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            nodes.extend(_import_time_nodes(node.body + node.orelse))
        elif isinstance(node, ast.Try):
            nodes.extend(_import_time_nodes(node.body + node.orelse + node.finalbody))
    return nodes


@pytest.mark.parametrize("module", sorted(set(MODULES) - {SUBMIT}))
def test_planning_layers_import_no_cluster_code(module):
    """Every io module but submit imports only io and what lies below it, even lazily."""
    above = [m for m in imports(module, at_import_time=False)
             if not m.startswith("gpuframe.io") and not m.startswith(BELOW_IO)]
    assert not above, f"{module} imports {above}"


def test_submit_reaches_the_cluster_and_the_frame_only_when_a_read_runs():
    at_import = [m for m in imports(SUBMIT, at_import_time=True)
                 if not m.startswith("gpuframe.io") and not m.startswith(BELOW_IO)]
    assert not at_import, at_import
    later = set(imports(SUBMIT, at_import_time=False)) - set(imports(SUBMIT, True))
    assert {m.split(".")[1] for m in later if not m.startswith("gpuframe.io")} == {
        "cluster", "frame"}


def test_io_modules_import_one_another_without_circles():
    graph = {name: {m for m in imports(name, at_import_time=True) if m in MODULES}
             for name in MODULES}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join(path[path.index(name):] + (name,))
        if name in done:
            return
        for other in sorted(graph[name]):
            visit(other, path + (name,))
        done.add(name)

    for name in sorted(graph):
        visit(name, ())
