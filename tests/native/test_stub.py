"""gpuframe/_core.pyi, the types mypy checks the native core's callers against, names what the
compiled module has: its functions, classes, constants and members, and each function's
parameters (from nanobind's own signatures), so a change to the binding shows here."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from gpuframe import _core

STUB = Path(__file__).resolve().parents[2] / "gpuframe" / "_core.pyi"
ALIASES = {"Buffer", "Column", "KeyOrder"}
"""Names the stub defines for its annotations alone."""


def stub_tree() -> dict[str, ast.AST]:
    """The stub's top-level names (its type aliases aside), each with its definition."""
    names: dict[str, ast.AST] = {}
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    return {name: node for name, node in names.items() if name not in ALIASES}


def members(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}


def parameters(function: Any) -> list[str]:
    """A nanobind function's parameter names, from its first signature's text."""
    text = function.__nb_signature__[0][0]
    inside = text[text.index("(") + 1:]
    names, depth, start = [], 0, 0
    for i, char in enumerate(inside):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                names.append(inside[start:i])
                break
            depth -= 1
        elif char == "," and depth == 0:
            names.append(inside[start:i])
            start = i + 1
    return [name.split(":")[0].split("=")[0].strip() for name in names if name.strip()]


def stub_parameters(node: ast.FunctionDef) -> list[str]:
    return [arg.arg for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]


def public(namespace: object) -> set[str]:
    return {name for name in dir(namespace) if not name.startswith("_")}


def test_the_stub_names_what_the_module_has():
    assert set(stub_tree()) == public(_core)


@pytest.mark.parametrize("name", sorted(n for n in public(_core)
                                        if isinstance(getattr(_core, n), type)
                                        and hasattr(getattr(_core, n), "scatter")))
def test_each_partition_class_has_the_stubs_members_and_parameters(name):
    cls, node = getattr(_core, name), stub_tree()[name]
    assert isinstance(node, ast.ClassDef)
    stub = members(node)
    assert set(stub) - {"__init__"} == public(cls)
    for member, function in stub.items():
        value = getattr(cls, member)
        if not isinstance(value, property):
            assert stub_parameters(function) == parameters(value), member


@pytest.mark.parametrize("name", sorted(n for n in public(_core)
                                        if hasattr(getattr(_core, n), "__nb_signature__")))
def test_each_function_has_the_stubs_parameters(name):
    node = stub_tree()[name]
    assert isinstance(node, ast.FunctionDef)
    assert stub_parameters(node) == parameters(getattr(_core, name))
