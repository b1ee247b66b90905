"""Operations that order rows or take them whole across partitions: sort, top-k, distinct rows
and concatenation, as functions of :class:`~gpuframe.frame.DistributedFrame` (whose methods of
the same names call them).

Each builds a plan node (:mod:`gpuframe.plan`) over its inputs' plans. This module builds on
the frame without importing it (:class:`~gpuframe.lazy.LazyFrame` says what it needs), so
that the frame's methods may delegate here.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import OptionError
from .lazy import F
from .plan.concat import Concat
from .plan.distinct import Distinct
from .plan.sort import Sort, SortKeys
from .plan.topk import TopK, selection


def sort_values(frame: F, by: str | Sequence[str], ascending: bool | Sequence[bool] = True,
                na_position: str = "last", npartitions: int | None = None) -> F:
    """``frame`` ordered as ``pandas.DataFrame.sort_values(by, ascending=, na_position=,
    kind="stable")`` orders it: ``to_pandas()`` gives the rows in that order, and partition i
    holds rows that order before partition i + 1's. ``npartitions``: the output's partitions
    (None: by the data's size, at least one per worker)."""
    keys = SortKeys.of(frame.meta, by, ascending, na_position, "sort_values")
    return frame._derive(Sort(frame.plan, keys, npartitions))


def top_k(frame: F, n: int, by: str | Sequence[str], ascending: bool | Sequence[bool] = True,
          na_position: str = "last") -> F:
    """``sort_values(frame, by, ascending, na_position).head(n)`` as one partition, without
    sorting or moving the whole frame: what ``head(n)`` of a sorted frame becomes."""
    keys = SortKeys.of(frame.meta, by, ascending, na_position, "top_k")
    return frame._derive(TopK(frame.plan, n, keys))


def nlargest(frame: F, n: int, columns: str | Sequence[str], keep: str = "first") -> F:
    """``pandas.DataFrame.nlargest(n, columns, keep=)`` for ``keep`` 'first' or 'last': the
    ``n`` rows of largest ``columns``, largest first. Rows whose keys are missing come last,
    where ``n`` reaches them (pandas' own order of those rows varies)."""
    return frame._derive(selection(frame.meta, n, columns, True, keep, frame.plan))


def nsmallest(frame: F, n: int, columns: str | Sequence[str], keep: str = "first") -> F:
    """``pandas.DataFrame.nsmallest(n, columns, keep=)``, as :func:`nlargest` does it."""
    return frame._derive(selection(frame.meta, n, columns, False, keep, frame.plan))


def drop_duplicates(frame: F, subset: str | Sequence[str] | None = None,
                    keep: str | bool = "first", npartitions: int | None = None) -> F:
    """``pandas.DataFrame.drop_duplicates(subset, keep=)``: the same rows kept (``keep``
    'first', 'last' or False), placed by the hash of ``subset`` into ``npartitions`` (None:
    one per worker), each partition in input order; the order across partitions is the
    hash's, not the input's."""
    return frame._derive(Distinct.of(frame.plan, subset, keep, npartitions))


def concat(frames: Sequence[F]) -> F:
    """The rows of ``frames`` one after another, as ``pandas.concat(frames)`` (rows) gives them:
    the union of their columns, each in the type pandas gives it; the partitions are the
    frames' partitions, in order (see :class:`~gpuframe.plan.concat.Concat`)."""
    frames = list(frames)
    if not frames:
        raise OptionError("concat: give at least one frame")
    engine = frames[0].engine
    if any(frame.engine is not engine for frame in frames):
        raise OptionError("concat: every frame must live on the same engine")
    plan = Concat(tuple(frame.plan for frame in frames), engine.backend.name)
    return frames[0]._derive(plan)
