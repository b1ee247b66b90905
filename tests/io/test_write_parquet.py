"""write_parquet (gpuframe.writers) on a real two-worker CPU cluster: datasets read back by
pandas, pyarrow and gpuframe's own reader; hive folders; codecs; and the commit protocol, which
leaves nothing at the path, and no staged files, unless every partition was written."""

from __future__ import annotations

import time

import boto3
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from distributed import get_task_stream

import gpuframe
from gpuframe.errors import OptionError, PartitionError, UnknownColumnError
from gpuframe.io.errors import AccessDeniedError, SchemaMismatchError
from gpuframe.io.writers.commit import DatasetExistsError
from gpuframe.io.writers.parquet import hive_groups
from gpuframe.writers import write_parquet


@pytest.fixture(name="source")
def _source() -> pd.DataFrame:
    """Every column kind a dataset commonly holds, nulls among the strings."""
    rows = 60
    return pd.DataFrame({
        "id": np.arange(rows, dtype="int64"),
        "x": np.arange(rows) * 0.25,
        "name": pd.Series([None if i % 7 == 0 else f"n{i % 5}" for i in range(rows)],
                          dtype="str"),
        "flag": np.arange(rows) % 3 == 0,
        "at": pd.date_range("2026-01-01", periods=rows, freq="h"),
        "city": pd.Series(["ams", "oslo", None] * (rows // 3), dtype="str"),
        "year": np.repeat([2023, 2024], rows // 2).astype("int64"),
    })


def _by_id(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values("id").reset_index(drop=True)


def _marking(folder):
    """A partition function that leaves a file in ``folder`` for every partition it sees,
    so a test can tell that no task ran."""
    def mark(partition: pd.DataFrame) -> pd.DataFrame:
        if len(partition):
            (folder / f"ran-{partition['id'].iloc[0]}").write_text("")
        return partition
    return mark


def _failing_in_second(partition: pd.DataFrame) -> pd.DataFrame:
    """Raises in the partition holding id 20."""
    if (partition["id"] == 20).any():
        raise ValueError("boom in the second partition")
    return partition


def _unwritable_in_second(partition: pd.DataFrame) -> pd.DataFrame:
    """A column of text, but of Python objects Arrow cannot convert in the partition holding
    id 20: the frame computes, and that partition's write task fails."""
    unwritable = (partition["id"] == 20).any()
    values = [object() if unwritable else "text"] * len(partition)
    return partition.assign(value=pd.Series(values, index=partition.index, dtype=object))


def _unwritable_frame(source: pd.DataFrame):
    meta = source.head(0).assign(value=pd.Series([], dtype=object))
    return gpuframe.from_pandas(source, npartitions=3).map_partitions(_unwritable_in_second,
                                                                      meta=meta)


SLOW_WRITE = 0.5
"""Seconds each write task waits before writing, under :func:`_slow_writes`."""


def _patch_conformed(slow: bool) -> None:
    """On a worker: its write tasks wait :data:`SLOW_WRITE` seconds before writing (or no
    longer)."""
    from gpuframe.io.writers import parquet

    original = getattr(parquet.conformed, "original", parquet.conformed)
    if not slow:
        parquet.conformed = original
        return

    def waiting(table: pa.Table, schema: pa.Schema) -> pa.Table:
        time.sleep(SLOW_WRITE)
        return original(table, schema)

    waiting.original = original  # type: ignore[attr-defined]
    parquet.conformed = waiting


@pytest.fixture(name="slow_writes")
def _slow_writes(engine):
    """Write tasks still writing when another partition's task fails: a write that outlived
    the clean-up would leave its file."""
    engine.client.run(_patch_conformed, True)
    yield
    engine.client.run(_patch_conformed, False)


def test_partitions_are_written_by_their_owners_and_read_back_whole(engine, source, tmp_path):
    frame = gpuframe.from_pandas(source, npartitions=3).persist()
    path = tmp_path / "out"
    with get_task_stream(engine.client) as stream:
        written = write_parquet(frame, path)
    assert written.files == ("part-00000.parquet", "part-00001.parquet",
                             "part-00002.parquet")
    assert written.rows == len(source)
    where = {t["key"]: t["worker"] for t in stream.data
             if t["key"].startswith("gpuframe-write-")}
    assert len(where) == 3
    assert sorted(where.values()) == sorted(frame.owners)
    assert sorted(p.name for p in path.iterdir()) == ["_SUCCESS", "_metadata", *written.files]
    assert [p.name for p in tmp_path.iterdir()] == ["out"], "no staged folder is left"
    pd.testing.assert_frame_equal(pd.read_parquet(path), source)
    back = gpuframe.read_parquet(str(path)).to_pandas()
    pd.testing.assert_frame_equal(_by_id(back), source)


def test_metadata_holds_every_files_row_groups(engine, source, tmp_path):
    path = tmp_path / "out"
    written = write_parquet(gpuframe.from_pandas(source, npartitions=4), path)
    metadata = pq.read_metadata(path / "_metadata")
    assert metadata.num_rows == len(source)
    assert [metadata.row_group(i).column(0).file_path
            for i in range(metadata.num_row_groups)] == list(written.files)
    through_metadata = ds.parquet_dataset(str(path / "_metadata")).to_table()
    pd.testing.assert_frame_equal(through_metadata.to_pandas(), source)


def test_hive_folders_leave_their_columns_out_and_read_back(engine, source, tmp_path):
    path = tmp_path / "hive"
    written = write_parquet(gpuframe.from_pandas(source, npartitions=3), path,
                            partition_on=["year", "city"])
    assert {f.split("/")[0] for f in written.files} == {"year=2023", "year=2024"}
    assert {f.split("/")[1] for f in written.files} == {
        "city=ams", "city=oslo", "city=__HIVE_DEFAULT_PARTITION__"}
    assert all(pq.read_schema(path / f).names == ["id", "x", "name", "flag", "at"]
               for f in written.files)
    back = gpuframe.read_parquet(str(path)).to_pandas()
    assert back["year"].dtype == "int32", "hive integers are read as int32, as pyarrow does"
    expected = source.astype({"year": "int32"})
    pd.testing.assert_frame_equal(_by_id(back)[list(source.columns)], expected)
    only = gpuframe.read_parquet(str(path), filters=[("city", "==", "oslo")]).to_pandas()
    assert sorted(only["id"]) == sorted(source.loc[source["city"] == "oslo", "id"])
    through_metadata = ds.parquet_dataset(str(path / "_metadata"), partitioning="hive")
    assert through_metadata.to_table().num_rows == len(source)


def test_hive_groups_keep_row_order_and_encode_values():
    table = pa.table({"k": pa.array(["a/b", None, "a/b", "x y"]),
                      "n": pa.array([1, 1, 1, None], pa.int64()), "v": [0, 1, 2, 3]})
    groups = {folder: rows.to_pydict() for folder, rows in hive_groups(table, ("k", "n"))}
    assert groups == {"k=a%2Fb/n=1": {"v": [0, 2]},
                      "k=__HIVE_DEFAULT_PARTITION__/n=1": {"v": [1]},
                      "k=x%20y/n=__HIVE_DEFAULT_PARTITION__": {"v": [3]}}


def test_hive_values_that_need_encoding_read_back_as_written(engine, tmp_path):
    frame = pd.DataFrame({"id": range(4), "k": ["a/b", "x y", "50%", "a/b"]})
    write_parquet(gpuframe.from_pandas(frame, npartitions=2), tmp_path / "out",
                  partition_on="k")
    back = gpuframe.read_parquet(str(tmp_path / "out")).to_pandas()
    pd.testing.assert_frame_equal(_by_id(back), frame, check_dtype=False)


def test_a_file_url_under_folders_not_yet_made(engine, source, tmp_path):
    url = f"file://{tmp_path}/a/b/out"
    write_parquet(gpuframe.from_pandas(source, npartitions=2), url)
    pd.testing.assert_frame_equal(_by_id(gpuframe.read_parquet(url).to_pandas()), source)
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == ["out"]


def test_overwrite_replaces_a_file_with_a_dataset(engine, source, tmp_path):
    path = tmp_path / "out"
    path.write_text("not a dataset")
    write_parquet(gpuframe.from_pandas(source, npartitions=2), path, overwrite=True)
    pd.testing.assert_frame_equal(pd.read_parquet(path), source)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_partitions_without_rows_write_no_file(engine, source, tmp_path):
    frame = gpuframe.from_pandas(source, npartitions=3)
    written = write_parquet(frame[frame.id < 10], tmp_path / "out")
    assert written.files == ("part-00000.parquet",) and written.rows == 10
    assert pq.read_metadata(tmp_path / "out" / "_metadata").num_rows == 10


@pytest.mark.parametrize("compression, codec", [
    ("zstd", "ZSTD"), ("GZIP", "GZIP"), (None, "UNCOMPRESSED"), ("snappy", "SNAPPY")])
def test_compression_is_the_one_asked_for(engine, source, tmp_path, compression, codec):
    path = tmp_path / "out"
    written = write_parquet(gpuframe.from_pandas(source, npartitions=2), path,
                            compression=compression)
    for file in written.files:
        group = pq.read_metadata(path / file).row_group(0)
        assert {group.column(i).compression for i in range(group.num_columns)} == {codec}
    pd.testing.assert_frame_equal(pd.read_parquet(path), source)


@pytest.mark.parametrize("options, error, match", [
    ({"compression": "zip"}, OptionError, "compression='zip': choose one of 'snappy'"),
    ({"partition_on": ["town"]}, UnknownColumnError, r"partition_on: column\(s\) \['town'\]"),
    ({"partition_on": ["year", "year"]}, OptionError, "names a column twice"),
])
def test_bad_options_are_refused_before_anything_runs(engine, source, tmp_path, options,
                                                      error, match):
    marks = tmp_path / "marks"
    marks.mkdir()
    frame = gpuframe.from_pandas(source, npartitions=2).map_partitions(
        _marking(marks), meta=source.head(0))
    with pytest.raises(error, match=match):
        write_parquet(frame, tmp_path / "out", **options)
    assert not (tmp_path / "out").exists() and not list(marks.iterdir())


def test_an_existing_path_is_refused_before_anything_runs_and_replaced_on_request(
        engine, source, tmp_path):
    path, marks = tmp_path / "out", tmp_path / "marks"
    path.mkdir()
    marks.mkdir()
    pq.write_table(pa.table({"old": [1]}), path / "old.parquet")
    frame = gpuframe.from_pandas(source, npartitions=2).map_partitions(
        _marking(marks), meta=source.head(0))
    with get_task_stream(engine.client) as stream:
        with pytest.raises(DatasetExistsError, match="exists already: pass overwrite=True"):
            write_parquet(frame, path)
    assert not stream.data and not list(marks.iterdir()), "no task ran"
    assert [p.name for p in path.iterdir()] == ["old.parquet"]
    write_parquet(frame, path, overwrite=True)
    assert len(list(marks.iterdir())) == 2
    assert "old.parquet" not in {p.name for p in path.iterdir()}
    pd.testing.assert_frame_equal(pd.read_parquet(path), source)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["marks", "out"]


def test_a_dataset_can_be_replaced_by_a_frame_read_from_it(engine, source, tmp_path):
    """The frame is computed before any file is written, so its source may be replaced."""
    path = tmp_path / "out"
    write_parquet(gpuframe.from_pandas(source, npartitions=2), path)
    frame = gpuframe.read_parquet(str(path))
    write_parquet(frame[frame.id >= 30], path, overwrite=True)
    pd.testing.assert_frame_equal(pd.read_parquet(path), source[source.id >= 30].reset_index(
        drop=True))


@pytest.mark.parametrize("existing", [False, True])
def test_a_partition_failing_before_its_write_leaves_the_path_as_it_was(
        engine, source, tmp_path, existing):
    path = tmp_path / "out"
    if existing:
        write_parquet(gpuframe.from_pandas(source.head(5), npartitions=1), path)
    frame = gpuframe.from_pandas(source, npartitions=3).map_partitions(
        _failing_in_second, meta=source.head(0))
    with pytest.raises(PartitionError, match="boom in the second partition") as failure:
        write_parquet(frame, path, overwrite=True)
    assert "partition 1" in str(failure.value)
    assert [p.name for p in tmp_path.iterdir()] == (["out"] if existing else [])
    if existing:
        pd.testing.assert_frame_equal(pd.read_parquet(path), source.head(5))


@pytest.mark.parametrize("existing", [False, True])
def test_a_write_task_failing_leaves_no_dataset_and_no_staged_files(
        engine, source, tmp_path, existing, slow_writes):
    path = tmp_path / "out"
    if existing:
        write_parquet(gpuframe.from_pandas(source.head(5), npartitions=1), path)
    with pytest.raises(PartitionError, match=r"partition 1 \(write, owner") as failure:
        write_parquet(_unwritable_frame(source), path, overwrite=True)
    assert "raised by the write task gpuframe-write-" in str(failure.value)
    time.sleep(SLOW_WRITE)  # a write that outlived the clean-up would show by now
    assert [p.name for p in tmp_path.iterdir()] == (["out"] if existing else [])
    if existing:
        pd.testing.assert_frame_equal(pd.read_parquet(path), source.head(5))


def test_partitions_that_disagree_on_a_column_leave_nothing(engine, tmp_path):
    mixed = pd.DataFrame({"id": [1, 2], "value": pd.Series([1, "a"], dtype=object)})
    with pytest.raises(SchemaMismatchError, match="disagree on column 'value'"):
        write_parquet(gpuframe.from_pandas(mixed, npartitions=2), tmp_path / "out")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("path, match", [
    ("http://127.0.0.1:1/out", "HTTP has no writes"),
    ("s3://data", "a bucket's root"),
])
def test_paths_that_cannot_hold_a_dataset_are_refused(engine, source, path, match):
    with pytest.raises(OptionError, match=match):
        write_parquet(gpuframe.from_pandas(source, npartitions=1), path, anonymous=True)


def _keys(s3_server, prefix: str = "") -> list[str]:
    client = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name="us-east-1",
                          aws_access_key_id=s3_server.key,
                          aws_secret_access_key=s3_server.secret)
    answer = client.list_objects_v2(Bucket=s3_server.bucket, Prefix=prefix)
    return sorted(o["Key"] for o in answer.get("Contents", []))


def test_s3_write_with_the_readers_options(engine, source, s3_server):
    url = s3_server.url("written/plain")
    written = write_parquet(gpuframe.from_pandas(source, npartitions=3), url,
                            storage=s3_server.options())
    assert _keys(s3_server, "written/plain") == sorted(
        f"written/plain/{f}" for f in ("_SUCCESS", "_metadata", *written.files))
    assert not [k for k in _keys(s3_server) if "gpuframe-" in k], "no staged object is left"
    back = gpuframe.read_parquet(url, **s3_server.options()).to_pandas()
    pd.testing.assert_frame_equal(_by_id(back), source)
    with pytest.raises(DatasetExistsError, match="written/plain exists already"):
        write_parquet(gpuframe.from_pandas(source, npartitions=1), url,
                      **s3_server.options())
    hive = s3_server.url("written/hive")
    write_parquet(gpuframe.from_pandas(source, npartitions=2), hive, partition_on=["year"],
                  **s3_server.temporary_options())
    back = gpuframe.read_parquet(hive, **s3_server.options()).to_pandas()
    pd.testing.assert_frame_equal(_by_id(back)[list(source.columns)],
                                  source.astype({"year": "int32"}))


def test_s3_overwrite_and_failure(engine, source, s3_server, slow_writes):
    url = s3_server.url("written/replaced")
    write_parquet(gpuframe.from_pandas(source, npartitions=3), url, **s3_server.options())
    with pytest.raises(PartitionError, match=r"partition 1 \(write"):
        write_parquet(_unwritable_frame(source), url, overwrite=True, **s3_server.options())
    time.sleep(SLOW_WRITE)
    assert not [k for k in _keys(s3_server) if "gpuframe-" in k], "no staged object is left"
    pd.testing.assert_frame_equal(
        _by_id(gpuframe.read_parquet(url, **s3_server.options()).to_pandas()), source)
    write_parquet(gpuframe.from_pandas(source.head(10), npartitions=1), url, overwrite=True,
                  **s3_server.options())
    assert _keys(s3_server, "written/replaced/") == [
        "written/replaced/_SUCCESS", "written/replaced/_metadata",
        "written/replaced/part-00000.parquet"]
    pd.testing.assert_frame_equal(
        gpuframe.read_parquet(url, **s3_server.options()).to_pandas(), source.head(10))


def test_s3_wrong_credentials_are_refused_before_anything_runs(engine, source, s3_server):
    with pytest.raises(AccessDeniedError, match="access denied"):
        write_parquet(gpuframe.from_pandas(source, npartitions=1),
                      s3_server.url("written/denied"), **s3_server.options(secret="wrong"))
    assert not _keys(s3_server, "written/denied")


@pytest.mark.gpu
def test_cudf_partitions_are_written_and_read_back(source, tmp_path):
    with gpuframe.start_cluster(backend="cudf", protocol="tcp") as gpu_engine:
        frame = gpuframe.from_pandas(source, npartitions=2, engine=gpu_engine)
        write_parquet(frame, tmp_path / "flat")
        write_parquet(frame, tmp_path / "hive", partition_on=["year"])
        hive = gpuframe.read_parquet(str(tmp_path / "hive"), engine=gpu_engine).to_pandas()
    pd.testing.assert_frame_equal(_by_id(pq.read_table(tmp_path / "flat").to_pandas()), source,
                                  check_dtype=False)
    pd.testing.assert_frame_equal(_by_id(hive)[list(source.columns)],
                                  source.astype({"year": "int32"}), check_dtype=False)


def test_the_frame_method_writes_a_query_result(engine, source, tmp_path):
    """``frame.write_parquet``, the end of a query: the lazy frame runs, then writes."""
    frame = gpuframe.from_pandas(source, npartitions=3)
    kept = frame[frame.id % 2 == 0]
    written = kept.write_parquet(tmp_path / "even", compression="zstd")
    expected = source[source.id % 2 == 0].reset_index(drop=True)
    assert written.rows == len(expected)
    pd.testing.assert_frame_equal(_by_id(pd.read_parquet(tmp_path / "even")), expected)
