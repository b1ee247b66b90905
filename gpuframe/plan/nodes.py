"""The logical plan: what a lazy frame will compute, as a tree of nodes.

Every node knows its schema (``meta``: an empty pandas frame with the columns and dtypes that
``to_pandas()`` of its result has) and its children; nothing runs when one is built. The
optimizer (:mod:`~gpuframe.plan.optimize`) rewrites trees, the executor lowers them to operators
(:mod:`gpuframe.operators`), and ``explain()`` prints them (:mod:`~gpuframe.plan.explain`).

Leaves hold data or say where to read it: :class:`Scan` (files, planned by the readers),
:class:`FromPandas`, :class:`FromDask` and :class:`Persisted` (partitions already on the
workers). Inner nodes transform: :class:`Select`, :class:`Filter`, :class:`Assign`,
:class:`Rename`, :class:`AsType` and :class:`MapPartitions` work partition by partition;
:class:`Join` moves rows between workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..backend import get_backend
from ..config import JoinOptions
from ..errors import ExpressionError, JoinError, OptionError, UnknownColumnError
from ..exchange.placement import Partitioning
from ..operators.join_schema import HOWS, KeyTypes, join_keys, join_schema, unique_sides
from ..remembered import column_names, remembered, schema_key
from .expr import Expr, evaluate_mask

if TYPE_CHECKING:
    from ..io.formats.base import FileFormat
    from ..io.planning.plan import ValueRanges
    from ..io.planning.sources import DatasetSource
    from ..io.storage.base import StorageOptions
    from ..runtime.runner import Partitions


class Node:
    """A plan node; subclasses are dataclasses whose first fields are their children."""

    meta: pd.DataFrame

    @property
    def children(self) -> tuple[Node, ...]:
        return ()

    def with_children(self, children: Sequence[Node]) -> Node:
        """This node over other children (of the same columns, or fewer where it allows)."""
        return self

    def describe(self) -> str:
        """One line for ``explain()``: the operator and its arguments."""
        raise NotImplementedError

    @property
    def columns(self) -> list[str]:
        return list(column_names(self.meta))


def every_node(root: Node) -> list[Node]:
    """Every node under ``root`` (itself too), each once: a node several parents read is one."""
    found: dict[int, Node] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) not in found:
            found[id(node)] = node
            stack.extend(node.children)
    return list(found.values())


def check_columns(names: Sequence[Any], meta: pd.DataFrame, what: str) -> None:
    """Raise :class:`UnknownColumnError` naming the first of ``names`` not in ``meta``."""
    missing = [name for name in names if name not in meta.columns]
    if missing:
        raise UnknownColumnError(f"{what}: column(s) {missing} not among the frame's columns "
                                 f"{list(meta.columns)}")


def selected(meta: pd.DataFrame, names: Sequence[str], what: str) -> pd.DataFrame:
    """``meta[list(names)]``, the names checked first (:func:`check_columns`), taken by
    position (pandas' selection by label over an index of Arrow strings takes three times as
    long) and remembered (:mod:`~gpuframe.remembered`)."""
    check_columns(names, meta, what)
    return remembered(("select", tuple(names), schema_key(meta)), lambda: _taken(meta, names))


def _taken(meta: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    columns = meta.columns.tolist()
    positions = {name: i for i, name in enumerate(columns)}
    if len(positions) != len(columns):  # a name twice: pandas selects each of its columns
        return meta[list(names)]
    return meta.take([positions[name] for name in names], axis=1)


# --- leaves ----------------------------------------------------------------------------------

@dataclass(eq=False)
class ReadSource:
    """What a read needs to plan again at run time with the columns and filters pushed into
    it: the source, its format and options; ``full_meta`` is the schema of every column."""

    source: DatasetSource
    format: FileFormat
    storage: StorageOptions
    partition_bytes: int | None
    full_meta: pd.DataFrame
    rows: int | None
    """Rows of the whole dataset, where the format says (Parquet, ORC)."""
    bytes: int
    """Bytes of the whole dataset's column data."""
    ranges: ValueRanges | None = field(default=None, repr=False)
    """Each column's least and greatest value, where the files' metadata says."""

    def text(self) -> str:
        source = self.source if isinstance(self.source, (str, bytes)) else (
            f"{len(self.source)} sources" if isinstance(self.source, (list, tuple))
            else str(self.source))
        return f"{self.format.name} {source}"


@dataclass(eq=False)
class Scan(Node):
    """Read files: only ``columns`` (None: all), only rows passing ``filters`` (DNF, as the
    readers take them), planned when the plan runs."""

    read: ReadSource
    read_columns: tuple[str, ...] | None = None
    filters: list[list[tuple]] | None = None
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.meta = self.read.full_meta if self.read_columns is None else \
            selected(self.read.full_meta, self.read_columns, "read")

    def describe(self) -> str:
        columns = "all" if self.read_columns is None else f"[{', '.join(self.read_columns)}]"
        return f"Scan {self.read.text()} columns={columns} filters={self.filters}"


@dataclass(eq=False)
class FromPandas(Node):
    """A pandas frame from the client, cut into ``npartitions`` row ranges (None: one per
    worker)."""

    data: pd.DataFrame = field(repr=False)
    npartitions: int | None = None
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.npartitions is not None and self.npartitions < 1:
            raise OptionError(f"npartitions={self.npartitions} must be at least 1")
        self.meta = self.data.head(0)

    def describe(self) -> str:
        return f"FromPandas {len(self.data)} rows"


@dataclass(eq=False)
class FromDask(Node):
    """A dask.dataframe collection, computed on the engine's cluster."""

    collection: Any = field(repr=False)
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        meta = self.collection._meta
        self.meta = (meta if isinstance(meta, pd.DataFrame) else meta.to_pandas()).head(0)

    def describe(self) -> str:
        return f"FromDask {self.collection.npartitions} partitions"


@dataclass(eq=False)
class Persisted(Node):
    """Partitions already computed and held on the workers."""

    partitions: Partitions = field(repr=False)
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.meta = self.partitions.meta

    def describe(self) -> str:
        placed = self.partitions.partitioning
        where = f", {placed.describe()}" if placed is not None else ""
        return f"Persisted {len(self.partitions)} partitions{where}"


# --- per-partition nodes -----------------------------------------------------------------------

@dataclass(eq=False)
class Select(Node):
    """Keep ``names``, in that order."""

    child: Node
    names: tuple[str, ...]
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if len(set(self.names)) != len(self.names):
            raise OptionError(f"select: columns {list(self.names)} name one column twice")
        self.meta = selected(self.child.meta, self.names, "select")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def with_children(self, children: Sequence[Node]) -> Node:
        return Select(children[0], self.names)

    def describe(self) -> str:
        return f"Select [{', '.join(self.names)}]"


@dataclass(eq=False)
class Filter(Node):
    """Keep the rows where ``predicate`` holds (a missing result keeps no row)."""

    child: Node
    predicate: Expr
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_columns(sorted(self.predicate.columns()), self.child.meta,
                      f"filter {self.predicate!r}")
        _check_boolean(self.predicate, self.child.meta)
        self.meta = self.child.meta

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def with_children(self, children: Sequence[Node]) -> Node:
        return Filter(children[0], self.predicate)

    def describe(self) -> str:
        return f"Filter {self.predicate!r}"


@dataclass(eq=False)
class Assign(Node):
    """Add or replace columns, each an expression over the columns before it (in order, so a
    later one may use an earlier one)."""

    child: Node
    items: tuple[tuple[str, Expr], ...]
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.meta = _assigned_meta(self.child.meta, self.items)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def with_children(self, children: Sequence[Node]) -> Node:
        return Assign(children[0], self.items)

    def describe(self) -> str:
        return "Assign " + ", ".join(f"{name}={expr!r}" for name, expr in self.items)


def _check_boolean(predicate: Expr, meta: pd.DataFrame) -> None:
    """Raise :class:`~gpuframe.errors.ExpressionError` unless ``predicate`` gives booleans on
    a frame of ``meta``'s columns (remembered: :mod:`~gpuframe.remembered`)."""
    remembered(("filter", predicate.key(), schema_key(meta)),
               lambda: evaluate_mask(predicate, meta).dtype)


def _assigned_meta(meta: pd.DataFrame, items: Sequence[tuple[str, Expr]]) -> pd.DataFrame:
    """``meta`` with ``items`` assigned (:func:`apply_assign`), remembered
    (:mod:`~gpuframe.remembered`)."""
    key = ("assign", tuple((name, expr.key()) for name, expr in items), schema_key(meta))
    return remembered(key, lambda: apply_assign(meta, items))


def apply_assign(frame: Any, items: Sequence[tuple[str, Expr]]) -> Any:
    """``frame`` with ``items`` assigned in order (pandas or cuDF)."""
    result = frame.copy(deep=False)
    for name, expr in items:
        check_columns(sorted(expr.columns()), result, f"assign {name}={expr!r}")
        result[name] = expr.evaluate(result)
    return result


@dataclass(eq=False)
class Rename(Node):
    """Rename columns by ``mapping`` (names not in the frame are ignored, as in pandas)."""

    child: Node
    mapping: dict[str, str]
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.meta = self.child.meta.rename(columns=self.mapping)
        if self.meta.columns.has_duplicates:
            raise OptionError(f"rename {self.mapping}: the result would name two columns "
                              f"alike: {list(self.meta.columns)}")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def with_children(self, children: Sequence[Node]) -> Node:
        kept = {old: new for old, new in self.mapping.items() if old in children[0].meta}
        return Rename(children[0], kept)

    def describe(self) -> str:
        return f"Rename {self.mapping}"


@dataclass(eq=False)
class AsType(Node):
    """Cast columns: ``dtypes`` maps names to dtypes."""

    child: Node
    dtypes: dict[str, Any]
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_columns(list(self.dtypes), self.child.meta, "astype")
        self.meta = self.child.meta.astype(self.dtypes)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def with_children(self, children: Sequence[Node]) -> Node:
        return AsType(children[0], {c: t for c, t in self.dtypes.items()
                                    if c in children[0].meta})

    def describe(self) -> str:
        return "AsType " + ", ".join(f"{c}: {t}" for c, t in self.dtypes.items())


@dataclass(eq=False)
class MapPartitions(Node):
    """``fn(partition, *args, **kwargs)`` on every partition; ``meta`` is its result's schema.
    The optimizer moves nothing across it: what ``fn`` reads is unknown."""

    child: Node
    fn: Callable[..., Any]
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    declared: pd.DataFrame | None = field(default=None, repr=False)
    """The result's schema as the caller gave it; None: ``fn`` of an empty partition."""
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        meta = self.declared
        if meta is None:
            try:
                meta = self.fn(self.child.meta.copy(), *self.args, **self.kwargs)
            except Exception as exc:
                raise ExpressionError(
                    f"map_partitions could not infer the schema of {_name(self.fn)} from an "
                    f"empty partition ({type(exc).__name__}: {exc}): pass meta=") from exc
        if not isinstance(meta, pd.DataFrame):
            raise ExpressionError(f"map_partitions: meta must be a pandas DataFrame, not "
                                  f"{type(meta).__name__}")
        self.meta = meta.head(0)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def with_children(self, children: Sequence[Node]) -> Node:
        return MapPartitions(children[0], self.fn, self.args, self.kwargs, self.meta)

    def describe(self) -> str:
        return f"MapPartitions {_name(self.fn)}"


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


# --- joins -------------------------------------------------------------------------------------

BROADCASTS = {"right": ("inner", "left", "cross", "left_anti", "leftsemi", "leftanti"),
              "left": ("inner", "right", "cross", "right_anti")}
"""The join types that may copy a side whole to every worker: the side must be one whose
unmatched rows the join drops."""


@dataclass(eq=False)
class Join(Node):
    """A join with ``pandas.merge``'s semantics (plus 'leftsemi' and 'leftanti')."""

    left: Node
    right: Node
    how: str
    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    suffixes: tuple[str, str]
    options: JoinOptions
    backend: str
    """The engine's backend, whose partitions' dtypes the schema gives."""
    indicator: str | None = None
    """The name of the ``_merge``-style column to add, if any."""
    validate: str | None = None
    """``pandas.merge``'s validate=: checked by each join task on the rows it holds."""
    sort: bool = False
    """Whether the gathered rows come sorted by the keys (the partitions are not)."""
    types: KeyTypes = field(init=False, repr=False)
    meta: pd.DataFrame = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.how not in HOWS:
            raise JoinError(f"how={self.how!r} is not a join type; choose one of "
                            f"{', '.join(HOWS)}")
        if self.how == "cross" and self.left_keys:
            raise JoinError("how='cross' joins every row with every row: give no on=, "
                            "left_on= or right_on=")
        if self.how != "cross" and not self.left_keys:
            raise JoinError(f"how={self.how!r} needs keys to join on")
        unique = unique_sides(self.validate)
        if any(unique) and self.how in ("cross", "leftsemi", "leftanti"):
            raise JoinError(f"validate= does not apply to how={self.how!r}")
        if self.indicator is not None and self.how in ("leftsemi", "leftanti"):
            raise JoinError(f"indicator= does not apply to how={self.how!r}, which keeps "
                            "the left side's columns only")
        if self.indicator is not None and self.indicator in (*self.left.columns,
                                                             *self.right.columns):
            raise JoinError(f"indicator={self.indicator!r}: a column of that name is in an "
                            "input already")
        # A side already run to no partitions sends no rows at all, whose key dtype pandas
        # then takes from the other side.
        empty = frozenset(side for side, child in (("left", self.left), ("right", self.right))
                          if isinstance(child, Persisted) and not len(child.partitions))
        self.types, self.meta = join_schema(
            self.left.meta, self.right.meta, self.how, list(self.left_keys),
            list(self.right_keys), self.suffixes, get_backend(self.backend), empty,
            self.indicator)

    @classmethod
    def of(cls, left: Node, right: Node, on: Any, left_on: Any, right_on: Any, how: str,
           suffixes: Sequence[str], options: JoinOptions, backend: str,
           indicator: str | None = None, validate: str | None = None,
           sort: bool = False) -> Join:
        """The join of ``left`` and ``right`` as ``pandas.merge`` names its keys (a cross
        join has none)."""
        left_keys: list[str] = []
        right_keys: list[str] = []
        if how != "cross" or (on, left_on, right_on) != (None, None, None):
            left_keys, right_keys = join_keys(left.meta, right.meta, on, left_on, right_on)
        return cls(left, right, how, tuple(left_keys), tuple(right_keys),
                   (suffixes[0], suffixes[1]), options, backend, indicator, validate, sort)

    @property
    def unique(self) -> tuple[bool, bool]:
        """Whether validate= asks the left, and the right, side's keys to be unique."""
        return unique_sides(self.validate)

    def may_copy(self, side: str) -> bool:
        """Whether the join may copy ``side`` whole to every worker: its type drops that
        side's unmatched rows; validate= does not need the other side's keys together (the
        big side of a broadcast is spread over its tasks); and a sorted inner join does not
        copy its left side (which would put a key's rows right-major, pandas' are
        left-major)."""
        other = self.unique[0] if side == "right" else self.unique[1]
        return self.how in BROADCASTS[side] and not other \
            and not (self.sort and self.how == "inner" and side == "left")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    def with_children(self, children: Sequence[Node]) -> Node:
        return Join(children[0], children[1], self.how, self.left_keys, self.right_keys,
                    self.suffixes, self.options, self.backend, self.indicator, self.validate,
                    self.sort)

    def describe(self) -> str:
        if not self.left_keys:
            on = "of every pair of rows"
        elif self.left_keys == self.right_keys:
            on = f"on [{', '.join(self.left_keys)}]"
        else:
            on = f"left_on [{', '.join(self.left_keys)}] right_on [{', '.join(self.right_keys)}]"
        options = "".join(f" {name}={value!r}" for name, value in (
            ("indicator", self.indicator), ("validate", self.validate)) if value is not None)
        return f"Join how={self.how} {on}{options}" + (" sort" if self.sort else "")

    def key_columns(self, side: str) -> list[str]:
        """The output columns that hold ``side``'s keys (a key both sides name alike is one
        column; one whose name the other side has too takes that side's suffix)."""
        own_keys, other_columns, suffix = (
            (self.left_keys, self.right.columns, self.suffixes[0]) if side == "left"
            else (self.right_keys, self.left.columns, self.suffixes[1]))
        shared = {lk for lk, rk in zip(self.left_keys, self.right_keys) if lk == rk}
        return [key if key in shared or key not in other_columns else f"{key}{suffix or ''}"
                for key in own_keys]

    def sources(self) -> dict[str, tuple[str, str]]:
        """Each output column's (side, input column); {} where the names cannot be traced
        (the optimizer then moves nothing through this join)."""
        left, right = column_names(self.left.meta), column_names(self.right.meta)
        in_left, in_right = set(left), set(right)
        shared = {lk for lk, rk in zip(self.left_keys, self.right_keys) if lk == rk}
        semi = self.how in ("leftsemi", "leftanti")
        traced: list[tuple[str, tuple[str, str]]] = []
        for name in left:
            clash = name in in_right and name not in shared and not semi
            traced.append((f"{name}{self.suffixes[0] or ''}" if clash else name,
                           ("left", name)))
        if not semi:
            for name in right:
                if name in shared:
                    continue
                clash = name in in_left
                traced.append((f"{name}{self.suffixes[1] or ''}" if clash else name,
                               ("right", name)))
        if tuple(name for name, _ in traced) != column_names(self.meta):
            return {}
        return dict(traced)


def placement_after(node: Node, placed: Partitioning | None) -> Partitioning | None:
    """The placement a partition keeps through the per-partition ``node``: a filter keeps it,
    a selection while the keys stay, a rename renames the keys; a cast or an assignment of a
    key, or an opaque function, loses it."""
    if placed is None:
        return None
    keys = set(placed.keys)
    if isinstance(node, Filter):
        return placed
    if isinstance(node, Select):
        return placed if keys <= set(node.names) else None
    if isinstance(node, Rename):
        return placed.renamed(node.mapping)
    if isinstance(node, Assign):
        return None if keys & {name for name, _ in node.items} else placed
    if isinstance(node, AsType):
        return None if keys & set(node.dtypes) else placed
    return None
