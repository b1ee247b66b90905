"""Planning against real Parquet files: local, over the Range HTTP server and over moto S3."""

from __future__ import annotations

import ast
import pickle
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import gpuframe.io
from gpuframe.errors import GpuframeError, OptionError
from gpuframe.io.errors import (
    AccessDeniedError,
    ColumnNotFoundError,
    CorruptFileError,
    FilterError,
    SchemaMismatchError,
    SourceNotFoundError,
    TruncatedFileError,
    UnreachableError,
)
from gpuframe.io.formats.base import FOOTER_PROBE
from gpuframe.io.formats.csv import CsvFormat
from gpuframe.io.formats.orc import OrcFormat
from gpuframe.io.formats.parquet import ParquetFormat, column_chunk_ranges
from gpuframe.io.plan import (
    PLANNED_METADATA,
    MetadataCache,
    assign_owners,
    default_partition_bytes,
    expand_source,
    file_stamp,
    plan_fragments,
)
from gpuframe.io.storage.base import storage_options

WORKERS = ["tcp://w0", "tcp://w1"]
FIXED = {"requests_in_flight": 4}


def compressed(path, columns=None, row_groups=None):
    """Compressed bytes of ``columns`` in ``row_groups``, counted independently of the planner."""
    metadata = pq.ParquetFile(path).metadata
    total = 0
    for g in row_groups if row_groups is not None else range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for i in range(group.num_columns):
            if columns is None or group.column(i).path_in_schema in columns:
                total += group.column(i).total_compressed_size
    return total


def test_expand_source(dataset_dir):
    flat = dataset_dir / "flat"
    found = expand_source(str(flat), storage_options())
    assert found == [(str(flat / "part-0.parquet"), str(flat)),
                     (str(flat / "part-1.parquet"), str(flat))]
    assert [p for p, _ in expand_source(str(flat / "*-1.parquet"), storage_options())] == [
        str(flat / "part-1.parquet")]
    listed = expand_source([str(flat / "part-1.parquet"), str(flat)], storage_options())
    assert [p for p, _ in listed] == [str(flat / "part-1.parquet"), str(flat / "part-0.parquet")]
    with pytest.raises(SourceNotFoundError, match="nothing.parquet"):
        plan_fragments(str(flat / "nothing.parquet"))
    with pytest.raises(SourceNotFoundError, match=r"no file matches .*\*\.csv"):
        plan_fragments(str(flat / "*.csv"))
    with pytest.raises(OptionError, match="HTTP has no directory listing"):
        plan_fragments("http://127.0.0.1:1/data/*.parquet")


def test_fragments_pack_row_groups_by_bytes(dataset_dir):
    flat = dataset_dir / "flat"
    files = [str(flat / "part-0.parquet"), str(flat / "part-1.parquet")]
    group_bytes = compressed(files[0], row_groups=[0])
    plan = plan_fragments(str(flat), partition_bytes=2 * group_bytes + 1000, workers=WORKERS,
                          storage=FIXED)
    assert plan.files == files
    assert [(f.path, f.units) for f in plan.fragments] == [
        (files[0], (0, 1)), (files[0], (2, 3)), (files[1], (0, 1)), (files[1], (2, 3))]
    assert [f.rows for f in plan.fragments] == [2000] * 4
    assert plan.total_bytes == sum(compressed(f) for f in files) == plan.result_bytes
    for fragment in plan.fragments:
        assert fragment.bytes == compressed(fragment.path, row_groups=fragment.units)
    assert (plan.units_total, plan.units_kept) == (8, 8)
    whole = plan_fragments(str(flat), partition_bytes=2**40, storage=FIXED)
    assert [f.units for f in whole.fragments] == [(0, 1, 2, 3)] * 2
    assert {f.owner for f in whole.fragments} == {None}
    single = plan_fragments(str(flat), partition_bytes=1, storage=FIXED)
    assert len(single.fragments) == 8
    assert "row groups 8/8 kept" in repr(plan) and "requests of" in repr(plan)


def test_partitions_pack_each_owners_fragments_within_the_budget(dataset_dir):
    flat = dataset_dir / "flat"
    group_bytes = compressed(str(flat / "part-0.parquet"), row_groups=[0])
    whole = plan_fragments(str(flat), partition_bytes=2**40, storage=FIXED)
    assert whole.partitions() == [[0, 1]]  # both files in one read
    plan = plan_fragments(str(flat), partition_bytes=4 * group_bytes + 4000,
                          workers=["a"], storage=FIXED)  # one file's 4 row groups fit
    assert plan.partitions() == [[0], [1]]
    two = plan_fragments(str(flat), partition_bytes=1, workers=WORKERS, storage=FIXED)
    assert sorted(i for group in two.partitions() for i in group) == list(range(8))
    assert all(len(group) == 1 for group in two.partitions())  # each beyond the budget alone
    spread = plan_fragments(str(flat), partition_bytes=2 * group_bytes + 1000,
                            workers=WORKERS, storage=FIXED)
    for group in spread.partitions():
        assert len({spread.fragments[i].owner for i in group}) == 1
    assert "in 4 partitions" in repr(spread)


def test_owners_balance_bytes_and_are_deterministic(dataset_dir):
    plan = plan_fragments(str(dataset_dir / "flat"), partition_bytes=1, workers=WORKERS,
                          storage=FIXED)
    loads = plan.bytes_by_worker()
    assert set(loads) == set(WORKERS)
    assert abs(loads[WORKERS[0]] - loads[WORKERS[1]]) <= max(f.bytes for f in plan.fragments)
    again = plan_fragments(str(dataset_dir / "flat"), partition_bytes=1, workers=WORKERS,
                           storage=FIXED)
    assert [f.owner for f in again.fragments] == [f.owner for f in plan.fragments]
    assert assign_owners([10, 9, 8, 1], ["a", "b"]) == ["a", "b", "b", "b"]
    assert assign_owners([5, 5, 5], ["a", "b", "c"]) == ["a", "b", "c"]
    assert assign_owners([1] * 6, ["a", "b"]) == ["a"] * 3 + ["b"] * 3  # runs, in order
    assert assign_owners([0, 0], ["a", "b"]) == ["a", "a"]
    with pytest.raises(OptionError, match="workers"):
        assign_owners([1], [])


def test_columns_select_and_validate(dataset_dir):
    path = str(dataset_dir / "flat" / "part-0.parquet")
    plan = plan_fragments(path, columns=["name", "id"], storage=FIXED)
    assert plan.schema.names == ["name", "id"]
    assert plan.total_bytes == compressed(path, {"name", "id"})
    assert plan.total_bytes < compressed(path)
    with pytest.raises(ColumnNotFoundError, match=f"'nope' is not in {path}"):
        plan_fragments(path, columns=["id", "nope"])
    with pytest.raises(OptionError, match="list of column names"):
        plan_fragments(path, columns="id")


@pytest.mark.parametrize("filters, kept", [
    ([("id", "<", 1500)], 2),
    ([("id", "<=", 999)], 1),
    ([("id", ">", 6999)], 1),
    ([("id", ">=", 7000)], 1),
    ([("id", "=", 4500)], 1),
    ([("id", "==", -1)], 0),
    ([("id", "!=", 5)], 8),
    ([("id", "in", [10, 5000, 10**9])], 2),
    ([("id", "not in", [1, 2])], 8),
    ([[("id", "<", 500)], [("id", ">=", 7500)]], 2),
    ([("id", ">", 1500), ("id", "<", 2500)], 2),
    ([("x", ">", 1999.0)], 5),
    ([("name", "==", "name-3")], 8),
    ([("name", ">", "zzz")], 0),
])
def test_statistics_prune_row_groups(dataset_dir, filters, kept):
    plan = plan_fragments(str(dataset_dir / "flat"), filters=filters, partition_bytes=1,
                          storage=FIXED)
    assert (plan.units_total, plan.units_kept) == (8, kept)
    expression = pq.filters_to_expression(filters)
    kept_groups = {(f.path, g) for f in plan.fragments for g in f.units}
    for path in plan.files:
        parquet = pq.ParquetFile(path)
        for g in range(parquet.num_row_groups):
            if (path, g) not in kept_groups:
                rows = parquet.read_row_group(g).filter(expression).num_rows
                assert rows == 0, f"row group {g} of {path} was pruned but has {rows} matches"


def test_filter_columns_are_read_but_not_returned(dataset_dir):
    path = str(dataset_dir / "flat" / "part-0.parquet")
    plan = plan_fragments(path, columns=["name"], filters=[("x", ">=", 0)], storage=FIXED)
    assert plan.schema.names == ["name"] and plan.columns_read == ["name", "x"]
    assert plan.result_bytes == compressed(path, {"name"})
    assert plan.total_bytes == compressed(path, {"name", "x"})
    assert plan.filters == [[("x", ">=", 0)]]


@pytest.mark.parametrize("filters, message", [
    ([("id", "~", 1)], r"\('id', '~', 1\): unknown operator '~'"),
    ([("nope", "==", 1)], r"names column 'nope', which is not in"),
    ([("id", ">", "abc")], r"value 'abc' does not fit column 'id' of type int64"),
    ([("name", "==", 3)], r"value 3 does not fit column 'name' of type string"),
    ([("id", "in", 5)], r"'in' needs a list"),
    ([("id", "==")], r"\('id', '=='\) is not a \(column, op, value\) tuple"),
    ("id > 5", r"must be a non-empty list"),
    ([], r"must be a non-empty list"),
    ([[("id", "==", 1)], []], r"is not a non-empty list"),
])
def test_bad_filters_name_the_term(dataset_dir, filters, message):
    with pytest.raises(FilterError, match=message):
        plan_fragments(str(dataset_dir / "flat"), filters=filters)


def test_missing_statistics_keep_row_groups(tmp_path, sample_table):
    path = tmp_path / "nostats.parquet"
    pq.write_table(sample_table(0, 3000), path, row_group_size=1000, write_statistics=False)
    plan = plan_fragments(str(path), filters=[("id", "<", 10)], storage=FIXED)
    assert (plan.units_total, plan.units_kept) == (3, 3)
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"v": pa.array([None] * 10, pa.int64())}), nulls)
    plan = plan_fragments(str(nulls), filters=[("v", "!=", 1)], storage=FIXED)
    assert plan.units_kept == 0


def test_hive_partitions_typed_like_pyarrow_and_pruned(dataset_dir):
    hive = dataset_dir / "hive"
    plan = plan_fragments(str(hive), storage=FIXED)
    assert plan.schema.remove_metadata() == ds.dataset(str(hive), partitioning="hive").schema
    assert plan.schema.field("year").type == pa.int32()
    first = plan.fragments[0]
    assert first.path.endswith("year=2023/city=ams/part.parquet")
    assert dict(first.partition) == {"year": 2023, "city": "ams"}
    plan = plan_fragments(str(hive), filters=[("year", "==", 2024)], storage=FIXED)
    assert {f.path.split("/hive/")[1] for f in plan.fragments} == {
        "year=2024/city=ams/part.parquet"}
    assert (plan.files_total, len(plan.files)) == (3, 1)
    assert (plan.units_total, plan.units_kept) == (2, 2)
    assert "1/3 files" in repr(plan)
    plan = plan_fragments(str(hive), filters=[("city", "in", ["oslo"]), ("id", "<", 2500)],
                          columns=["id", "city"], storage=FIXED)
    assert [(dict(f.partition)["city"], f.units) for f in plan.fragments] == [("oslo", (0,))]
    assert plan.schema.names == ["id", "city"]
    with pytest.raises(FilterError, match="value 'x' does not fit column 'year' of type int32"):
        plan_fragments(str(hive), filters=[("year", "==", "x")])


def test_bad_files_raise_specific_errors(dataset_dir):
    bad = dataset_dir / "bad"
    cases = [("truncated", TruncatedFileError, "is truncated"),
             ("corrupt_footer", CorruptFileError, "corrupt footer in"),
             ("not_parquet", CorruptFileError, "is not a Parquet file"),
             ("empty", CorruptFileError, "is empty")]
    for name, error, text in cases:
        path = str(bad / f"{name}.parquet")
        with pytest.raises(error, match=f"{text}.*|.*{name}.parquet") as info:
            plan_fragments(path)
        assert path in str(info.value) and isinstance(info.value, GpuframeError)
    mismatch = bad / "mismatch"
    with pytest.raises(SchemaMismatchError,
                       match=f"{mismatch}/a.parquet and {mismatch}/b.parquet disagree on column "
                             "'x': double vs string"):
        plan_fragments(str(mismatch))


def test_footers_are_cached_and_picklable(dataset_dir):
    plan = plan_fragments(str(dataset_dir / "flat"), columns=["id"], storage=FIXED)
    assert set(plan.footers) == set(plan.files)
    restored = pickle.loads(pickle.dumps(plan.footers[plan.files[0]]))
    assert restored.equals(pq.ParquetFile(plan.files[0]).metadata)
    ranges = column_chunk_ranges(restored, [0, 1], ["id"])
    assert sum(n for _, n in ranges) == compressed(plan.files[0], {"id"}, [0, 1])


def test_http_footers_one_suffix_request_per_file(dataset_dir, http_server):
    names = ["flat/part-0.parquet", "flat/part-1.parquet"]
    http_server.reset()
    plan = plan_fragments([f"{http_server.url}/{n}" for n in names], storage=FIXED,
                          workers=WORKERS)
    local = plan_fragments(str(dataset_dir / "flat"), storage=FIXED, workers=WORKERS)
    assert [(f.units, f.bytes, f.owner) for f in plan.fragments] == [
        (f.units, f.bytes, f.owner) for f in local.fragments]
    assert sorted((r.method, r.range) for r in http_server.log) == [
        ("GET", f"bytes=-{FOOTER_PROBE}")] * 2
    assert http_server.whole_file_gets() == 0
    assert str(plan.concurrency).startswith("<Concurrency configured: ")


def test_a_small_read_does_not_probe_its_store(dataset_dir, http_server):
    """Probing reads for about a second, hundreds of MiB from a fast store: a plan of fewer
    than probe_min_bytes takes fixed requests instead, and leaves the store unmeasured."""
    url = f"{http_server.url}/flat/part-0.parquet"
    http_server.reset()
    plan = plan_fragments(url)
    assert plan.total_bytes < storage_options().probe_min_bytes
    assert repr(plan.concurrency) == "<Concurrency unmeasured: 16 requests of 4.0 MiB in flight>"
    assert [r.range for r in http_server.log] == [f"bytes=-{FOOTER_PROBE}"]
    capped = plan_fragments(url, storage={"max_requests_in_flight": 3, "task_size": 2**16})
    assert (capped.concurrency.requests_in_flight, capped.concurrency.request_size) == (3, 2**16)
    http_server.reset()
    probed = plan_fragments(url, storage={"probe_min_bytes": plan.total_bytes})
    assert probed.concurrency.source == "measured"  # the first plan left nothing behind
    assert http_server.bytes_served() > plan.total_bytes


def test_http_large_footer_takes_a_second_request(tmp_path, http_server):
    wide = pa.table({f"column_with_a_long_name_{i:04d}": pa.array(range(4)) for i in range(400)})
    path = http_server.root / "wide.parquet"
    pq.write_table(wide, path, row_group_size=2)
    footer = int.from_bytes(path.read_bytes()[-8:-4], "little")
    assert footer + 8 > FOOTER_PROBE
    http_server.reset()
    plan = plan_fragments(f"{http_server.url}/wide.parquet", storage=FIXED)
    assert plan.units_total == 2 and len(plan.schema) == 400
    assert len(http_server.log) == 2
    assert http_server.bytes_served() == footer + 8


def test_http_measures_concurrency_and_errors(dataset_dir, http_server, closed_port):
    plan = plan_fragments(f"{http_server.url}/flat/part-0.parquet",
                          storage={"task_size": 2**14, "probe_min_bytes": 0})
    assert plan.concurrency.source == "measured" and plan.concurrency.latency_s > 0
    assert plan.concurrency.request_size >= 2**14
    with pytest.raises(SourceNotFoundError, match="flat/missing.parquet"):
        plan_fragments(f"{http_server.url}/flat/missing.parquet")
    with pytest.raises(TruncatedFileError, match="bad/truncated.parquet"):
        plan_fragments(f"{http_server.url}/bad/truncated.parquet")
    with pytest.raises(UnreachableError, match=f"127.0.0.1:{closed_port}"):
        plan_fragments(f"http://127.0.0.1:{closed_port}/flat/part-0.parquet")


def test_s3_plans_like_local(dataset_dir, s3_server):
    options = s3_server.options(requests_in_flight=4)
    plan = plan_fragments(s3_server.url("hive"), filters=[("year", "==", 2023)],
                          storage=options, workers=WORKERS)
    local = plan_fragments(str(dataset_dir / "hive"), filters=[("year", "==", 2023)],
                           storage=FIXED, workers=WORKERS)
    assert plan.schema == local.schema
    assert [(f.path.split("/hive/")[1], f.units, f.bytes, f.partition, f.owner)
            for f in plan.fragments] == [
        (f.path.split("/hive/")[1], f.units, f.bytes, f.partition, f.owner)
        for f in local.fragments]
    assert [f.split("/")[-1] for f in plan_fragments(s3_server.url("flat/*.parquet"),
                                                     storage=options).files] == [
        "part-0.parquet", "part-1.parquet"]


def test_s3_errors(s3_server, closed_port):
    with pytest.raises(AccessDeniedError, match="s3://data/flat"):
        plan_fragments(s3_server.url("flat"), storage=s3_server.options(secret="wrong"))
    with pytest.raises(SourceNotFoundError, match="s3://data/nowhere"):
        plan_fragments(s3_server.url("nowhere"), storage=s3_server.options())
    with pytest.raises(CorruptFileError, match="s3://data/bad/corrupt_footer.parquet"):
        plan_fragments(s3_server.url("bad/corrupt_footer.parquet"), storage=s3_server.options())
    unreachable = s3_server.options(endpoint=f"http://127.0.0.1:{closed_port}", timeout=5.0)
    with pytest.raises(UnreachableError, match=f"127.0.0.1:{closed_port}"):
        plan_fragments(s3_server.url("flat/part-0.parquet"), storage=unreachable)


def test_partition_bytes_option(dataset_dir):
    with pytest.raises(OptionError, match="partition_bytes=0"):
        plan_fragments(str(dataset_dir / "flat"), partition_bytes=0)
    plan = plan_fragments(str(dataset_dir / "flat"), storage=FIXED)
    assert plan.partition_bytes == default_partition_bytes()


def test_default_partition_bytes_follows_device_memory(dataset_dir):
    assert default_partition_bytes() == default_partition_bytes([]) == 128 * 2**20
    assert default_partition_bytes([80 * 2**30, 16 * 2**30]) == 16 * 2**30 // 32
    assert default_partition_bytes([2**28]) == 16 * 2**20
    plan = plan_fragments(str(dataset_dir / "flat"), storage=FIXED, device_memory=[2**35])
    assert plan.partition_bytes == 2**30


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


def test_hive_values_drop_files_before_their_footers_are_read(dataset_dir, monkeypatch):
    PLANNED_METADATA.clear()  # a first plan of these files
    read = []
    original = ParquetFormat.read_metadata
    monkeypatch.setattr(ParquetFormat, "read_metadata",
                        lambda self, source, budget: read.append(source.path)
                        or original(self, source, budget))
    hive = dataset_dir / "hive"
    plan = plan_fragments(str(hive), filters=[[("city", "==", "oslo")], [("year", ">", 2023)]],
                          storage=FIXED)
    assert [p.split("/hive/")[1] for p in plan.files] == [
        "year=2023/city=oslo/part.parquet", "year=2024/city=ams/part.parquet"]
    first = str(hive / "year=2023" / "city=ams" / "part.parquet")
    assert read[0] == first and sorted(read[1:]) == plan.files
    assert first in plan.footers and plan.fragments[0].path == plan.files[0]


def _counting_reads(monkeypatch, format_class):
    read = []
    original = format_class.read_metadata
    monkeypatch.setattr(format_class, "read_metadata",
                        lambda self, source, budget: read.append(source.path)
                        or original(self, source, budget))
    return read


def test_unchanged_local_files_are_planned_again_without_reading_their_metadata(
        tmp_path, monkeypatch):
    read = _counting_reads(monkeypatch, ParquetFormat)
    plain = {"row_group_size": 25, "compression": "none", "use_dictionary": False}
    for i in range(3):
        pq.write_table(pa.table({"id": list(range(i * 100, i * 100 + 100))}),
                       tmp_path / f"part-{i}.parquet", **plain)
    first = plan_fragments(str(tmp_path), filters=[("id", ">=", 150)], workers=WORKERS)
    assert sorted(read) == sorted(first.files)
    again = plan_fragments(str(tmp_path), filters=[("id", ">=", 150)], workers=WORKERS)
    assert sorted(read) == sorted(first.files)  # nothing read a second time
    assert again.fragments == first.fragments
    assert all(again.footers[p].equals(first.footers[p]) for p in first.files)

    # rewritten: other row groups and statistics, and a file of the same size whose values
    # moved (a stale footer would prune by old statistics, silently dropping rows)
    changed, same_size = tmp_path / "part-0.parquet", tmp_path / "part-1.parquet"
    time.sleep(0.05)  # past a tick of a coarse file system clock (see FileStamp)
    pq.write_table(pa.table({"id": list(range(1000, 1010))}), changed)
    size = same_size.stat().st_size
    pq.write_table(pa.table({"id": list(range(200, 300))}), same_size, **plain)
    assert same_size.stat().st_size == size
    read.clear()
    third = plan_fragments(str(tmp_path), filters=[("id", ">=", 150)], workers=WORKERS)
    assert sorted(read) == [str(changed), str(same_size)]
    assert pq.read_table(changed).num_rows == 10
    kept = {(f.path, f.units) for f in third.fragments}
    assert (str(changed), (0,)) in kept
    assert (str(same_size), (0, 1, 2, 3)) in kept  # every row group now holds ids >= 200


def test_a_file_seen_differently_here_is_read_again(tmp_path, monkeypatch):
    """A worker on another host may read another file of the same path: its stamp differs."""
    read = _counting_reads(monkeypatch, ParquetFormat)
    path = tmp_path / "one.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3]}), path)
    plan = plan_fragments(str(path))
    stat = path.stat()
    PLANNED_METADATA.put(str(path), ParquetFormat(), (stat.st_size, stat.st_mtime_ns,
                                                      stat.st_ino + 1), plan.footers[str(path)])
    plan_fragments(str(path))
    assert read == [str(path)] * 2


def test_csv_metadata_is_read_every_time(tmp_path, monkeypatch):
    csv_read = _counting_reads(monkeypatch, CsvFormat)
    (tmp_path / "a.csv").write_text("x,y\n1,2\n")
    for _ in range(2):
        plan_fragments(str(tmp_path / "a.csv"), format="csv")
    assert len(csv_read) == 2  # its metadata depends on the options and the partition budget


def test_remote_metadata_is_kept_where_the_store_says_its_version(dataset_dir, http_server):
    """A server that sends ETag and Last-Modified: the footer is read once, and later plans
    carry the version it was read at, which the read checks. One that sends neither: read
    every time, since a rewrite of the same size would go unseen."""
    url = f"{http_server.url}/flat/part-0.parquet"
    bare = f"{http_server.url}/novalidator/flat/part-0.parquet"
    http_server.reset()
    first, again, bare_first, bare_again = (plan_fragments(u, storage=FIXED)
                                            for u in (url, url, bare, bare))
    assert [(r.path, r.range) for r in http_server.log] == [
        ("/flat/part-0.parquet", f"bytes=-{FOOTER_PROBE}"),
        ("/novalidator/flat/part-0.parquet", f"bytes=-{FOOTER_PROBE}"),
        ("/novalidator/flat/part-0.parquet", f"bytes=-{FOOTER_PROBE}")]
    size = (dataset_dir / "flat" / "part-0.parquet").stat().st_size
    assert first.versions[url].size == size and first.versions[url].validated
    assert again.versions == first.versions and again.reused == {url} and not first.reused
    assert not bare_again.reused and bare_again.versions[bare] == (size, None, None)
    assert again.fragments == first.fragments


def test_s3_footers_are_kept_by_the_objects_last_modified(dataset_dir, s3_server):
    """Arrow gives an S3 object's LastModified: its footer is read once, as over HTTP."""
    url = s3_server.url("flat/part-1.parquet")
    PLANNED_METADATA.forget([url])
    storage = {**s3_server.options(), **FIXED}
    first, again = (plan_fragments(url, storage=storage) for _ in range(2))
    assert first.versions[url].last_modified and not first.reused
    assert again.reused == {url} and again.versions == first.versions


def test_orc_tails_are_reused_like_footers(dataset_dir, monkeypatch):
    read = _counting_reads(monkeypatch, OrcFormat)
    PLANNED_METADATA.clear()
    orc_dir = dataset_dir / "orc"
    first = plan_fragments(str(orc_dir), format="orc")
    again = plan_fragments(str(orc_dir), format="orc")
    assert sorted(read) == sorted(first.files) and again.fragments == first.fragments


def test_the_metadata_cache_keeps_the_most_recently_planned_files(tmp_path):
    cache = MetadataCache(capacity=2)
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"{i}.parquet")
        pq.write_table(pa.table({"id": [i]}), paths[-1])
    fmt = ParquetFormat()
    stamps = {p: (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ino) for p in paths}
    m0, m1, m2 = (pq.ParquetFile(p).metadata for p in paths)
    cache.put(str(paths[0]), fmt, stamps[paths[0]], m0)
    cache.put(str(paths[1]), fmt, stamps[paths[1]], m1)
    assert cache.get(str(paths[0]), fmt) == (m0, stamps[paths[0]])  # now the most recent
    cache.put(str(paths[2]), fmt, stamps[paths[2]], m2)
    assert [(cache.get(str(p), fmt) or [None])[0] for p in paths] == [m0, None, m2]
    cache.put(str(paths[1]), CsvFormat(), stamps[paths[1]], "csv")
    assert cache.get(str(paths[1]), CsvFormat()) is None
    cache.forget([str(paths[0])])
    assert cache.get(str(paths[0]), fmt) is None and cache.get(str(paths[2]), fmt)


def test_the_metadata_cache_keeps_at_most_its_bytes_of_footers(tmp_path):
    """Footers are charged as the files hold them: a wide file's alone can outweigh many."""
    fmt = ParquetFormat()
    footers = {}
    for name, columns in (("narrow-0", 1), ("narrow-1", 1), ("wide", 300)):
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({f"c{i}": [1, 2] for i in range(columns)}), path)
        footers[str(path)] = pq.ParquetFile(path).metadata
    narrow = [p for p in footers if "narrow" in p]
    wide = next(p for p in footers if "wide" in p)
    small = sum(footers[p].serialized_size for p in narrow)
    assert footers[wide].serialized_size > small
    cache = MetadataCache(max_bytes=small + 1)
    stamps = {p: file_stamp(p) for p in footers}
    for path in narrow:
        cache.put(path, fmt, stamps[path], footers[path])
    assert all(cache.get(path, fmt) for path in narrow)
    cache.put(wide, fmt, stamps[wide], footers[wide])  # alone over the budget: nothing is left
    assert [cache.get(p, fmt) for p in footers] == [None, None, None]
    cache.put(narrow[0], fmt, stamps[narrow[0]], footers[narrow[0]])
    cache.put(narrow[0], fmt, stamps[narrow[0]], footers[narrow[0]])  # again: charged once
    cache.put(narrow[1], fmt, stamps[narrow[1]], footers[narrow[1]])
    assert all(cache.get(path, fmt) for path in narrow)
