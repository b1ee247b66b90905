"""What a join's tasks run on their workers, where the lowering (:mod:`~.join`) placed them.

The join task itself (:class:`LocalJoin`: keys cast to their hash types, pandas' merge, the
join's schema, ``validate=`` and unhashable keys refused); a task submitted before its sample
was weighed, which joins once its verdict has passed (:func:`join_after`); and a broadcast's
copied side, gathered on each worker that joins with it (:func:`gather_side`), with its size
checked and the count of its most repeated key where it was copied unsampled
(:func:`gather_unsampled`), by which each join task checks that its output fits
(:func:`join_copied`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from dask.sizeof import sizeof

from ..backend import get_backend
from ..cluster.memory import this_worker_memory
from ..errors import SpeculationError
from ..exchange.digest import UnhashableKeyError, holds_objects, unhashable_type
from ..exchange.mailbox import arrivals
from ..exchange.row_hashes import hash_rows, longest_repeat
from ..exchange.splitters import cast_keys
from ..sent_schemas import SendsSchemas
from ..units import byte_text
from .join_decision import OUTPUT_COPIES, SIDES
from .join_schema import KeysNotUniqueError, KeyTypes, conform
from .steps import CopyStep, apply_steps


@dataclass(frozen=True)
class LocalJoin(SendsSchemas):
    """What each join task does with the rows it holds of both sides: cast the keys to their
    hash types (rows that arrived by an exchange already are), join as pandas would, and give
    the result the join's schema, ``meta``. ``schemas``: each side's empty frame with keys in
    their hash types, standing in for a side that sent no rows. ``unique``: the sides whose keys
    validate= asks to be unique, checked on the rows the task holds, which the lowering makes
    all of that side's rows of their keys."""

    how: str
    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    suffixes: tuple[str, str]
    types: KeyTypes
    schemas: tuple[pd.DataFrame, pd.DataFrame]
    meta: pd.DataFrame
    backend: str
    indicator: str | None = None
    unique: tuple[bool, bool] = (False, False)
    steps: tuple[Any, ...] = ()
    """A per-partition chain above the join, run on each joined part (:mod:`~.steps`)."""

    def __call__(self, left: list[Any], right: list[Any], copies: Sequence[Any] = ()) -> Any:
        frames = get_backend(self.backend)
        sides = [_keys_cast(_concat_or_empty(arrivals(parts), schema, frames), casts, schema, keys)
                 for parts, schema, casts, keys in zip(
                     (left, right), self.schemas, (self.types.left, self.types.right),
                     (self.left_keys, self.right_keys))]
        if frames.holds_objects:
            for side, frame, keys in zip(SIDES, sides, (self.left_keys, self.right_keys)):
                check_hashable(frame, keys, side)
        check_unique(sides[0], sides[1], self.left_keys, self.right_keys, self.unique)
        joined = frames.join(sides[0], sides[1], self.how, list(self.left_keys),
                             list(self.right_keys), self.suffixes, self.indicator)
        return apply_steps(conform(joined, self.meta, frames), self.steps, copies)


def check_unique(left: Any, right: Any, left_keys: Sequence[str], right_keys: Sequence[str],
                 unique: tuple[bool, bool]) -> None:
    """Raise :class:`KeysNotUniqueError` with pandas' message where a side that ``unique``
    names repeats a key among the rows given."""
    repeats = [side for side, frame, keys, wanted in (("left", left, left_keys, unique[0]),
                                                       ("right", right, right_keys, unique[1]))
               if wanted and len(frame) and bool(frame.duplicated(subset=list(keys)).any())]
    if not repeats:
        return
    kind = {(True, True): "one-to-one", (True, False): "one-to-many",
            (False, True): "many-to-one"}[unique]
    where = "either left or right" if len(repeats) == 2 else repeats[0]
    raise KeysNotUniqueError(f"Merge keys are not unique in {where} dataset; not a {kind} "
                             "merge")


def check_hashable(frame: Any, keys: Sequence[str], side: str) -> None:
    """Raise :class:`UnhashableKeyError` naming the column where an object key of ``frame``
    holds a value with no hash (a list): pandas joins such keys in some cases only, and which
    rows meet in one join task depends on the path the join takes, so every path refuses
    them."""
    for key in keys:
        if holds_objects(frame[key].dtype):
            kind = unhashable_type(frame[key].to_numpy())
            if kind is not None:
                raise UnhashableKeyError(
                    f"{side} key column {key!r} holds a {kind.__name__}, which has no hash and "
                    "cannot be joined on: convert such keys to a hashable type (tuples, say)")


def join_parts(local: LocalJoin, left: list[Any], right: list[Any],
               copies: Sequence[Any] | None = None) -> Any:
    """The join task: ``local`` over the parts of each side it received, its steps' joins with
    ``copies`` (:class:`CopiedJoinStep`) after it."""
    return local(left, right, copies or ())


@dataclass(frozen=True)
class CopiedJoinStep(CopyStep):
    """A broadcast join run as a step of the task that makes its other side's partition (a
    join's, :func:`~.join._fused`): the partition joined with the ``copied`` side, this
    worker's copy ``slot`` of the task's copies, by ``local`` (no steps of its own); where the
    copy was counted (a :class:`CountedSide`), once its output is found to fit ``fraction``
    of the worker's memory, as :func:`join_copied` finds it."""

    local: LocalJoin
    copied: str
    slot: int
    fraction: float

    def apply_copy(self, frame: Any, copy: Any) -> Any:
        sides = {"left": [frame], "right": [frame]}
        sides[self.copied] = [copy]
        if isinstance(copy, CountedSide):
            return join_copied(self.local, self.copied, self.fraction, sides["left"],
                               sides["right"])
        return self.local(sides["left"], sides["right"])


def _keys_cast(frame: Any, casts: dict[str, Any], schema: pd.DataFrame,
               keys: Sequence[str]) -> Any:
    """``frame`` with its keys in their hash types: those ``casts`` names, and zoned times,
    which cuDF can hand back without their zone (rows that came through an exchange), so that
    both sides' keys compare as the same type."""
    zoned = {k: schema[k].dtype for k in keys if isinstance(schema[k].dtype, pd.DatetimeTZDtype)}
    wanted = {**zoned, **casts}
    return cast_keys(frame, {c: t for c, t in wanted.items() if frame[c].dtype != t})


def _concat_or_empty(parts: list[Any], schema: pd.DataFrame, frames: Any) -> Any:
    return frames.concat(parts) if parts else frames.from_pandas(schema)


def join_after(verdict: bool, local: LocalJoin, left: list[Any], right: list[Any],
               copies: Sequence[Any] | None = None) -> Any:
    """A join task submitted before its sample was weighed (:func:`~.join._speculated`): it
    runs once its verdict task has passed, and fails with it where the sample chose otherwise."""
    return join_parts(local, left, right, copies)


def most_repeats(frame: Any, keys: list[str], side: str, backend: str) -> int:
    """On a worker: the most rows of ``frame`` (None: no rows), the ``side`` a join copies
    without a sample, that share a key tuple (nulls too: they match each other). Each row of
    the other side joins at most that many of them, which bounds a broadcast task's output
    (:func:`join_copied`)."""
    if frame is None or not len(frame):
        return 0
    if get_backend(backend).holds_objects:  # as the join itself refuses them (LocalJoin)
        check_hashable(frame, keys, side)
    # Rows counted by their keys' 64-bit hash, as the exchange hashes them: cuDF's groupby
    # cannot index its groups by decimal keys. A collision only raises the bound.
    return longest_repeat(hash_rows(frame, keys))


@dataclass(frozen=True)
class CountedSide:
    """A side copied without a sample, as its broadcast task made it: the frame, and the most
    rows of it that share a key tuple (:func:`most_repeats`)."""

    frame: Any
    repeats: int


@sizeof.register(CountedSide)
def _sizeof_counted(side: CountedSide) -> int:
    return int(sizeof(side.frame))


def gather_unsampled(parts: list[Any], casts: dict[str, Any], backend: str, side: str,
                     keys: list[str] | None, most_bytes: float | None,
                     fraction: float) -> Any:
    """The broadcast task of a side copied without a sample: the side gathered
    (:func:`gather_side`); with ``most_bytes`` (a side copied by the plan's estimates), once its
    parts are found to hold no more, nor more than ``fraction`` of this worker's memory (which
    every join task holds whole beside its partition), else
    :class:`~gpuframe.errors.SpeculationError` before they are put together; with ``keys`` (a
    side whose keys may repeat), as a :class:`CountedSide`, its repeats counted in the same
    task, a step fewer before the join tasks that check their output by them
    (:func:`join_copied`)."""
    if most_bytes is not None:
        share = _task_share(fraction)
        if share is not None:
            most_bytes = min(most_bytes, share)
        frames = get_backend(backend)
        held = sum(frames.nbytes(part) for part in parts)
        if held > most_bytes:
            raise SpeculationError(
                f"the join's {side} side, copied to every worker unsampled as the plan's "
                f"estimates allowed, holds {byte_text(held)}, past {byte_text(most_bytes)}")
    frame = gather_side(parts, casts, backend)
    return frame if keys is None else CountedSide(frame, most_repeats(frame, keys, side, backend))


def _task_share(fraction: float) -> float | None:
    """The bytes one join task may hold on this worker: ``fraction`` of its memory limit;
    None outside a worker or without a limit."""
    memory = this_worker_memory()
    return fraction * memory.limit if memory is not None and memory.limit else None


def join_copied(local: LocalJoin, copied: str, fraction: float, left: list[Any],
                right: list[Any], copies: Sequence[Any] | None = None) -> Any:
    """A broadcast join task whose copied side (a :class:`CountedSide`) repeats a key up to
    ``repeats`` times: its join, where its output fits ``fraction`` of its worker's memory as
    the join's tasks are sized (:data:`~.join_decision.OUTPUT_COPIES` times over); else
    :class:`~gpuframe.errors.SpeculationError`, which fails the job and runs the action again
    in one that samples the copied side, estimating the output. The output takes at most
    ``repeats`` rows a row of the task's partition; where that bound is past the share, also at
    most as many rows a copied row as the partition repeats a key, and the partition's own
    rows unmatched (counted only then: a fact table's foreign keys, copied, repeat many times
    each, while the dimension they join repeats none)."""
    parts = {"left": left, "right": right}
    counted: CountedSide = parts[copied][0]
    parts[copied] = [counted.frame]
    left, right, repeats = parts["left"], parts["right"], counted.repeats
    share = _task_share(fraction) if repeats > 1 else None
    if share is not None:
        big_side = "left" if copied == "right" else "right"
        frames = get_backend(local.backend)
        whole, big = parts[copied][0], parts[big_side][0]
        held_per_row = (frames.nbytes(big) / max(len(big), 1)
                        + frames.nbytes(whole) / max(len(whole), 1)) * OUTPUT_COPIES
        rows = len(big) * repeats
        if rows * held_per_row > share:
            big_keys = local.left_keys if big_side == "left" else local.right_keys
            rows = min(rows, len(whole) * most_repeats(big, list(big_keys), big_side,
                                                       local.backend) + len(big))
        if rows * held_per_row > share:
            raise SpeculationError(
                f"the join's {copied} side, copied to every worker unsampled, repeats a key "
                f"up to {repeats} times: a task's output may take "
                f"{byte_text(rows * held_per_row)}, past {byte_text(share)} "
                f"({fraction:g} of its worker's memory)")
    return join_parts(local, left, right, copies)


def gather_side(parts: list[Any], casts: dict[str, Any], backend: str) -> Any:
    """The broadcast task: one side's partitions as one frame, keys in their hash types (None
    for a side without partitions: the join's schema stands in)."""
    return cast_keys(get_backend(backend).concat(parts), casts) if parts else None


def gather_each(calls: list[tuple[Callable[..., Any], tuple[Any, ...]]]) -> list[Any]:
    """The broadcast task of the sides that joins run in a join's tasks copy
    (:class:`CopiedJoinStep`): each gathered in turn by its call, one task a worker for all."""
    return [fn(*args) for fn, args in calls]


def join_gathering(join: Callable[..., Any], copied: str | None,
                   call: tuple[Callable[..., Any], tuple[Any, ...]] | None,
                   copy_calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] | None,
                   *args: Any) -> Any:
    """A join task that gathers its copies itself: ``join`` (:func:`join_parts`,
    :func:`join_after`, :func:`join_copied`) on ``args``, which end with the left parts, the
    right parts and the steps' copies. With ``call``, the ``copied`` side is the one frame it
    gathers (in place of that side's parts); with ``copy_calls``, the steps' copies are what
    they gather (:func:`gather_each`). The lowering asks for it where the task is its worker's
    only one of the join and the copies' parts lie on that worker: a broadcast task there
    would move nothing, and cost a round trip through the scheduler before the join starts."""
    *head, left, right, copies = args
    sides = {"left": left, "right": right}
    if call is not None and copied is not None:
        gather, gather_args = call
        sides[copied] = [gather(*gather_args)]
    if copy_calls is not None:
        copies = gather_each(copy_calls)
    return join(*head, sides["left"], sides["right"], copies)


def gather_side_after(verdict: bool, parts: list[Any], casts: dict[str, Any], backend: str
                      ) -> Any:
    """The broadcast task of a side copied before its sample was weighed
    (:func:`~.join._speculated`): it gathers the side once its verdict task has passed."""
    return gather_side(parts, casts, backend)
