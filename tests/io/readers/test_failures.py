"""Files deleted, cut, rewritten or corrupted after planning: the read fails naming the file and
the unit, whichever reader and store."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from pyarrow import orc

import gpuframe
from gpuframe.io.errors import (
    CorruptFileError,
    DatasetError,
    FileChangedError,
    TruncatedFileError,
)
from gpuframe.io.planning.plan import plan_fragments
from gpuframe.io.readers.arrow import read_fragment
from gpuframe.io.readers.failures import _file_at_fault
from gpuframe.io.tasks import fragment_tasks
from gpuframe.readers import read_csv


def _write_rows(path, kind: str, rows: int = 20_000) -> None:
    """Sorted ids in several snappy row groups or stripes."""
    table = pa.table({"id": np.arange(rows), "x": np.random.default_rng(1).random(rows),
                      "s": [f"s{i % 7}" for i in range(rows)]})
    if kind == "parquet":
        pq.write_table(table, path, compression="snappy", row_group_size=rows // 4)
    else:
        orc.write_table(table, path, compression="snappy", stripe_size=4096)


def _zero(path, start: int, end: int) -> None:
    data = bytearray(path.read_bytes())
    data[start:end] = bytes(end - start)
    path.write_bytes(bytes(data))


def _truncate(path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(3000)


CHANGED = "{source} changed since it was planned \\({what}"


@pytest.mark.parametrize("store", ["local", "http", "http-bare"])
@pytest.mark.parametrize("kind, unit", [("parquet", "row group 0"), ("orc", "stripe 0")])
@pytest.mark.parametrize("change, errors", [
    pytest.param(lambda path: _zero(path, 100, 400), {
        "local": (CorruptFileError, "{source} \\({unit}\\) cannot be decoded"),
        "http": (FileChangedError, CHANGED.format(source="{source}", what="etag")),
        "http-bare": (CorruptFileError, "{source} \\({unit}\\) cannot be decoded")},
        id="zeroed"),
    pytest.param(_truncate, {
        "local": (TruncatedFileError, "{source} .*ends at byte 3000"),
        "http": (FileChangedError, CHANGED.format(source="{source}", what="size .* -> 3000")),
        "http-bare": (FileChangedError, CHANGED.format(source="{source}", what="size"))},
        id="truncated"),
    pytest.param(os.unlink, dict.fromkeys(["local", "http", "http-bare"], (
        FileNotFoundError, "no such file: {source}")), id="deleted"),
])
def test_a_file_changed_after_planning_fails_the_read_naming_it(read_plan, engine,
                                                                  http_server, tmp_path,
                                                                 store, kind, unit, change,
                                                                 errors):
    """A remote file's store that says its version (ETag, Last-Modified) has any change named as
    one; a store that says only its size, a change of the same size as what it does to the
    read."""
    folder = http_server.root / tmp_path.name  # served over HTTP too
    folder.mkdir()
    path = folder / f"changing.{kind}"
    _write_rows(path, kind)
    prefix = {"local": None, "http": "", "http-bare": "/novalidator"}[store]
    source = (str(path) if prefix is None
              else f"{http_server.url}{prefix}/{tmp_path.name}/{path.name}")
    plan = plan_fragments(source, format=kind, workers=engine.workers, partition_bytes=1,
                          storage={"requests_in_flight": 2})
    assert len(plan.fragments) > 1
    change(path)
    error, message = errors[store]
    with pytest.raises(error, match=message.format(source=source, unit=unit)) as caught:
        read_plan(plan, engine)
    assert isinstance(caught.value, DatasetError)


@pytest.mark.parametrize("kind, unit", [("parquet", "row group 1"), ("orc", "stripe 1")])
def test_a_corrupt_unit_among_many_read_together_is_named(read_plan, engine, tmp_path, kind,
                                                            unit):
    path = tmp_path / f"late.{kind}"
    _write_rows(path, kind)
    plan = plan_fragments(str(path), format=kind, workers=engine.workers)
    [task] = fragment_tasks(plan)
    assert len(task.units) > 2
    offset, length = task.format.ranges(task.metadata, [1], task.file_columns)[0]
    _zero(path, offset + 40, offset + length - 40)
    with pytest.raises(CorruptFileError, match=f"{path} \\({unit}\\) cannot be decoded"):
        read_plan(plan, engine)


def test_files_read_together_are_all_named_when_reading_one_alone_runs_out_of_memory(
        dataset_dir):
    """cuDF failed on files that pyarrow reads, and trying them one by one on the GPU found no
    room: no file can be blamed, so the error names them all and says why."""
    tasks = fragment_tasks(plan_fragments([str(dataset_dir / "flat" / f"part-{i}.parquet")
                                           for i in range(2)]))

    def out_of_memory(i: int) -> None:
        raise MemoryError("std::bad_alloc: out_of_memory")

    error = _file_at_fault(tasks, RuntimeError("cudf decode failed"), read_fragment,
                           out_of_memory)
    assert isinstance(error, CorruptFileError)
    assert all(task.path in str(error) for task in tasks)
    assert "cudf decode failed" in str(error) and "ran out of device memory" in str(error)


@pytest.mark.gpu
@pytest.mark.parametrize("kind, unit", [("parquet", "row group"), ("orc", "stripe")])
def test_cudf_reader_names_the_corrupt_file_among_those_read_in_one_call(read_plan, tmp_path,
                                                                         kind, unit,
                                                                         check_same):
    """Zeroed pages made cuDF touch memory out of bounds, which lost the worker's CUDA context
    (benchmarks/results/2026-11-24-ingest-h200.md): the file at fault is still named, and the
    worker is restarted, so the cluster reads again (in a worker, not in this process, whose
    context would be lost too)."""
    good, bad = tmp_path / f"good.{kind}", tmp_path / f"bad.{kind}"
    _write_rows(good, kind)
    _write_rows(bad, kind)
    with gpuframe.start_cluster(backend="cudf", protocol="tcp", n_workers=1) as gpu_engine:
        plan = plan_fragments([str(good), str(bad)], format=kind, workers=gpu_engine.workers)
        assert len(plan.read_groups()) == 1  # one cuDF call for both files
        _zero(bad, 100, 400)
        with pytest.raises(CorruptFileError,
                           match=f"{bad} \\({unit}s? [0-9].*cannot be decoded"):
            read_plan(plan, gpu_engine)
        again = read_plan(plan_fragments(str(good), format=kind, workers=gpu_engine.workers),
                          gpu_engine)
        check_same(again, pd.read_parquet(good) if kind == "parquet"
                   else orc.read_table(good).to_pandas())


@pytest.mark.parametrize("kind", ["orc", "csv"])
def test_a_local_file_written_again_larger_after_planning_is_changed(read_plan, engine,
                                                                     tmp_path, kind):
    """Its first stripes or lines may be where the plan reads: without a look at its size, the
    read would give them as if they were the planned ones (formats whose metadata says the
    size)."""
    path = tmp_path / f"grown.{kind}"
    table = pa.table({"id": np.arange(5000), "s": [f"s{i % 7}" for i in range(5000)]})
    write = {"orc": lambda t: orc.write_table(t, path, stripe_size=4096),
             "csv": lambda t: pacsv.write_csv(t, path)}[kind]
    write(table)
    plan = plan_fragments(str(path), format=kind, workers=engine.workers)
    planned = path.stat().st_size
    write(pa.concat_tables([table, table]))
    with pytest.raises(FileChangedError, match=f"{path} changed since it was planned "
                                               f"\\(size {planned} -> {path.stat().st_size}\\)"):
        read_plan(plan, engine)


def test_a_csv_file_cut_after_planning_fails_the_read(read_plan, engine, tmp_path):
    path = tmp_path / "cut.csv"
    path.write_text("a,b\n" + "1,x\n" * 1000)
    plan = plan_fragments(str(path), format="csv", workers=engine.workers)
    with open(path, "r+b") as handle:
        handle.truncate(2000)  # on a line boundary: parsed, the rest would be fewer rows
    with pytest.raises(TruncatedFileError, match=f"{path} \\(bytes 4-4004\\).*ends at byte 2000"):
        read_plan(plan, engine)


def test_failed_csv_fragment_fails_the_read(engine, tmp_path):
    path = tmp_path / "late.csv"
    path.write_text("a,b\n" + "1,x\n" * 300_000 + "oops,x\n")
    with pytest.raises(CorruptFileError, match=r"late.csv bytes"):
        read_csv(str(path), partition_bytes=2**19).persist()
