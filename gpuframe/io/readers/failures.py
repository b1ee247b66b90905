"""Read failures named: bytes that do not decode at read time (a file cut, rewritten or
corrupted since planning) become the engine's errors (:mod:`gpuframe.io.errors`) naming the file
and unit.

:func:`read_failure` looks at the file again to tell which; :func:`check_planned_size` looks at a
local file's size before it is read; :func:`naming_failures` wraps the Arrow reader's decoding of
some units; :func:`naming_cudf_failures` wraps one cuDF call over many files, whose errors name
none, and finds the file at fault.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from ...backend import get_backend
from ..errors import (
    AccessDeniedError,
    CorruptFileError,
    DatasetError,
    FileChangedError,
    RemoteError,
    SourceNotFoundError,
    TruncatedFileError,
    UnreachableError,
)
from ..storage import open_source
from ..tasks import FragmentTask

if TYPE_CHECKING:
    from ..storage.base import RangeSource

HostRead = Callable[[FragmentTask], object]
"""Reads one task's fragment with pyarrow, on the host: no CUDA call, which a lost context
would fail."""

DECODE_ERRORS = (OSError, ValueError, RuntimeError, IndexError, EOFError, pa.ArrowException)
"""What decoding bytes that are not what planning saw raises: Arrow's ``OSError`` ('Corrupt
snappy compressed data.') and ``ArrowInvalid``, cuDF's ``RuntimeError``, and the
``EOFError`` of a range that ends early (:meth:`~.fetch.FileFetcher.bytes`). :func:`read_failure`
turns them into the engine's errors naming the file; ``MemoryError`` is never one of them."""


def read_failure(task: FragmentTask, units: Sequence[int], exc: BaseException) -> DatasetError:
    """``exc``, raised decoding ``units`` of the task's file, as the engine's error naming the
    file and units. The file is looked at again, since at read time the likeliest cause is a
    change after planning: a file gone is a :class:`SourceNotFoundError`, one that ends before
    the planned ranges a :class:`TruncatedFileError`, else a :class:`CorruptFileError` (with
    the size planning saw, where the format knows it and it changed)."""
    where = _where(task, units)
    try:
        with open_source(task.path, task.storage) as source:
            size: int | None = source.size()
    except SourceNotFoundError as gone:
        return SourceNotFoundError(f"{where}: the file went away after planning: {gone}")
    except DatasetError:
        size = None  # the store cannot say now; the decoding error stands
    cut = None if size is None else _cut(task, units, size, f" ({type(exc).__name__}: {exc})")
    if cut is not None:
        return cut
    planned = task.format.file_size(task.metadata)
    changed = (f"; it was {planned} bytes at planning, {size} now"
               if None not in (planned, size) and planned != size else "")
    return CorruptFileError(f"{where} cannot be decoded: {type(exc).__name__}: {exc}{changed}")


def check_planned_size(task: FragmentTask, source: RangeSource) -> None:
    """Raise where a local file is not the size planning saw (where its format's metadata says
    it: ORC, CSV): read at the plan's offsets, a file written again would give rows cut
    mid-line, or its own first stripes as if they were the planned ones. A
    :class:`TruncatedFileError` where it ends before the planned ranges, else a
    :class:`FileChangedError`. (A remote file's answers are held to its version instead.)"""
    planned, size = task.format.file_size(task.metadata), source.size()
    if planned is None or planned == size:
        return
    raise _cut(task, task.units, size, "") or FileChangedError(
        task.path, f"{task.path} changed since it was planned (size {planned} -> {size}): "
        "read it again")


def _where(task: FragmentTask, units: Sequence[int]) -> str:
    return f"{task.path} ({task.format.describe_units(task.metadata, units)})"


def _cut(task: FragmentTask, units: Sequence[int], size: int, cause: str
         ) -> TruncatedFileError | None:
    """The error of a file that now ends at ``size``, before the planned ranges of ``units``;
    None where they fit. ``cause``: what the read met, for the message."""
    ranges = task.format.ranges(task.metadata, units, task.file_columns)
    end = max((offset + length for offset, length in ranges), default=0)
    if size >= end:
        return None
    return TruncatedFileError(f"{_where(task, units)}: the file ends at byte {size}, the plan "
                              f"reads up to byte {end}: it was cut or rewritten after "
                              f"planning{cause}")


@contextlib.contextmanager
def naming_failures(task: FragmentTask, units: Sequence[int]) -> Iterator[None]:
    """Failures of decoding ``units`` of the task's file raised as :func:`read_failure`'s
    errors; a format that reads units one by one narrows them to the unit at fault."""
    try:
        yield
    except (UnreachableError, AccessDeniedError, MemoryError):
        raise
    except RemoteError as exc:  # a short answer: the file may have been cut since planning
        failure = read_failure(task, units, exc)
        if isinstance(failure, (TruncatedFileError, SourceNotFoundError)):
            raise failure from exc
        raise
    except DatasetError:
        raise
    except DECODE_ERRORS as exc:
        raise read_failure(task, units, exc) from exc


@contextlib.contextmanager
def naming_cudf_failures(tasks: Sequence[FragmentTask], read_on_host: HostRead,
                         read_alone: Callable[[int], object]) -> Iterator[None]:
    """Failures of cuDF decoding the tasks' files (in one call: its errors name no file) raised
    as :func:`read_failure`'s errors for the file at fault (:func:`_file_at_fault`):
    ``read_on_host(task)`` reads a task's fragment with pyarrow, ``read_alone(i)`` with cuDF.

    A corrupt page can make cuDF's kernels touch memory out of bounds
    (``cudaErrorIllegalAddress``: benchmarks/results/2026-11-24-ingest-h200.md), after which
    the process's CUDA context is lost: every later CUDA call fails, allocations as
    ``MemoryError``, and reading each file again with cuDF would blame the next file read. Such
    an error carries ``gpu_context_lost`` and a note saying so, and the client restarts the
    worker (:meth:`gpuframe.runtime.runner.Job.fail`)."""
    try:
        yield
    except DatasetError:
        raise
    except (MemoryError, *DECODE_ERRORS) as exc:
        backend = get_backend("cudf")
        lost = backend.device_lost()
        if isinstance(exc, MemoryError) and not lost:
            raise  # the device is full: no file is at fault
        error = _file_at_fault(tasks, exc, read_on_host, None if lost else read_alone)
        if lost or backend.device_lost():
            error.gpu_context_lost = True
            error.add_note("decoding it lost this worker's CUDA context (a sticky CUDA error): "
                           "the worker's GPU runs nothing more until the worker restarts")
        raise error from exc


def _file_at_fault(tasks: Sequence[FragmentTask], exc: BaseException, read_on_host: HostRead,
                   read_alone: Callable[[int], object] | None) -> DatasetError:
    """The error naming the file at fault for ``exc``, raised decoding all of ``tasks`` at once:
    a lone task's; else the first that pyarrow cannot read on the host (no CUDA call, which a
    lost context would fail); else, given ``read_alone(i)`` (cuDF reading ``tasks[i]``), the
    first that cuDF cannot read alone (a file that pyarrow reads and cuDF does not). Where no
    file is found at fault, the error names them all, and says so if a read alone ran out of
    device memory before one was."""
    if len(tasks) == 1:
        return read_failure(tasks[0], tasks[0].units, exc)
    for task in tasks:
        try:
            read_on_host(task)
        except DatasetError as named:
            return named
        except DECODE_ERRORS as alone:
            return read_failure(task, task.units, alone)
    paths = ", ".join(t.path for t in tasks)
    for i, task in enumerate(tasks):
        if read_alone is None:
            break
        try:
            read_alone(i)
        except DECODE_ERRORS as alone:
            return read_failure(task, task.units, alone)
        except MemoryError as full:
            return CorruptFileError(f"{len(tasks)} files read in one call cannot be decoded "
                                    f"({paths}): {type(exc).__name__}: {exc}; which one is at "
                                    f"fault is not known: reading {task.path} alone ran out of "
                                    f"device memory ({full})")
    return CorruptFileError(f"{len(tasks)} files read in one call cannot be decoded together, "
                            f"though each can alone ({paths}): {type(exc).__name__}: {exc}")


