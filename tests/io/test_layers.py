"""io sits below the cluster and the frame: only io.submit may reach them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gpuframe.io

WORKERS = ["tcp://w0", "tcp://w1"]
FIXED = {"requests_in_flight": 4}


IO_ROOT = Path(gpuframe.io.__path__[0])


BELOW_THE_CLUSTER = sorted(str(path.relative_to(IO_ROOT)) for path in IO_ROOT.rglob("*.py")
                           if path.name not in ("submit.py", "read.py"))


@pytest.mark.parametrize("module", BELOW_THE_CLUSTER)
def test_planning_layers_import_no_cluster_code(module):
    """io sits below cluster: its modules import nothing of it, even lazily."""
    imported = []
    for node in ast.walk(ast.parse((IO_ROOT / module).read_text())):
        if isinstance(node, ast.ImportFrom):
            imported.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            imported.extend(alias.name for alias in node.names)
    assert imported or module.endswith("__init__.py")
    assert not [m for m in imported if "cluster" in m or "frame" == m.strip(".")]
