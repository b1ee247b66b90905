"""Planning against real Parquet files: local, over the Range HTTP server and over moto S3."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpuframe.errors import OptionError
from gpuframe.io.errors import (
    AccessDeniedError,
    ColumnNotFoundError,
    CorruptFileError,
    SourceNotFoundError,
    TruncatedFileError,
    UnreachableError,
)
from gpuframe.io.formats.base import FOOTER_PROBE
from gpuframe.io.formats.parquet import ParquetFormat
from gpuframe.io.planning.metadata import PLANNED_METADATA
from gpuframe.io.planning.plan import (
    PackedUnits,
    Packings,
    ValueRanges,
    assign_owners,
    default_partition_bytes,
    plan_fragments,
)
from gpuframe.io.storage.base import storage_options

WORKERS = ["tcp://w0", "tcp://w1"]
FIXED = {"requests_in_flight": 4}


def test_fragments_pack_row_groups_by_bytes(dataset_dir, compressed):
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


def test_read_groups_pack_each_owners_fragments_within_the_budget(dataset_dir, compressed):
    flat = dataset_dir / "flat"
    group_bytes = compressed(str(flat / "part-0.parquet"), row_groups=[0])
    whole = plan_fragments(str(flat), partition_bytes=2**40, storage=FIXED)
    assert whole.read_groups() == [[0, 1]]  # both files in one read
    plan = plan_fragments(str(flat), partition_bytes=4 * group_bytes + 4000,
                          workers=["a"], storage=FIXED)  # one file's 4 row groups fit
    assert plan.read_groups() == [[0], [1]]
    two = plan_fragments(str(flat), partition_bytes=1, workers=WORKERS, storage=FIXED)
    assert sorted(i for group in two.read_groups() for i in group) == list(range(8))
    assert all(len(group) == 1 for group in two.read_groups())  # each beyond the budget alone
    spread = plan_fragments(str(flat), partition_bytes=2 * group_bytes + 1000,
                            workers=WORKERS, storage=FIXED)
    for group in spread.read_groups():
        assert len({spread.fragments[i].owner for i in group}) == 1
    assert "in 4 read groups" in repr(spread)


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


def test_columns_select_and_validate(dataset_dir, compressed):
    path = str(dataset_dir / "flat" / "part-0.parquet")
    plan = plan_fragments(path, columns=["name", "id"], storage=FIXED)
    assert plan.schema.names == ["name", "id"]
    assert plan.total_bytes == compressed(path, {"name", "id"})
    assert plan.total_bytes < compressed(path)
    with pytest.raises(ColumnNotFoundError, match=f"'nope' is not in {path}"):
        plan_fragments(path, columns=["id", "nope"])
    with pytest.raises(OptionError, match="list of column names"):
        plan_fragments(path, columns="id")


def test_filter_columns_are_read_but_not_returned(dataset_dir, compressed):
    path = str(dataset_dir / "flat" / "part-0.parquet")
    plan = plan_fragments(path, columns=["name"], filters=[("x", ">=", 0)], storage=FIXED)
    assert plan.schema.names == ["name"] and plan.columns_read == ["name", "x"]
    assert plan.result_bytes == compressed(path, {"name"})
    assert plan.total_bytes == compressed(path, {"name", "x"})
    assert plan.filters == [[("x", ">=", 0)]]


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
    assert [(f.path.split("/hive/")[1], f.units, f.bytes, f.hive_values, f.owner)
            for f in plan.fragments] == [
        (f.path.split("/hive/")[1], f.units, f.bytes, f.hive_values, f.owner)
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


def test_default_partition_bytes_follows_the_workers_memory(dataset_dir):
    assert default_partition_bytes() == default_partition_bytes([]) == 128 * 2**20
    assert default_partition_bytes([80 * 2**30, 16 * 2**30], on_device=True) == 16 * 2**30 // 32
    assert default_partition_bytes([2**28], on_device=True) == 16 * 2**20
    # CPU workers: 1/32 of the smallest memory limit, within 16 and 128 MiB; 0 is no limit
    assert default_partition_bytes([2**30, 0]) == 32 * 2**20
    assert default_partition_bytes([64 * 2**30]) == default_partition_bytes([0]) == 128 * 2**20
    assert default_partition_bytes([2**28]) == 16 * 2**20
    plan = plan_fragments(str(dataset_dir / "flat"), storage=FIXED, worker_memory=[2**35],
                          on_device=True)
    assert plan.partition_bytes == 2**30


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


def test_the_store_is_measured_on_the_file_the_plan_reads_most_of(tmp_path):
    """A probe reads at most half its file: the first of many small files would measure
    requests shorter than the plan's."""
    for name, rows in (("a-small", 100), ("b-large", 50_000), ("c-medium", 5_000)):
        pq.write_table(pa.table({"x": np.arange(rows)}), tmp_path / f"{name}.parquet")
    measured: list[str] = []

    def measure(path, storage, partition_bytes):
        measured.append(path)
        return None

    plan_fragments(str(tmp_path), storage={"probe_min_bytes": 0}, measure=measure)
    assert [p.rsplit("/", 1)[-1] for p in measured] == ["b-large.parquet"]


def test_a_plan_of_unchanged_files_reuses_its_packing(tmp_path, monkeypatch):
    folder = tmp_path / "table"
    folder.mkdir()
    for i in range(2):
        pq.write_table(pa.table({"id": np.arange(i * 4000, (i + 1) * 4000),
                                 "x": np.arange(4000) * 0.5}),
                       folder / f"part-{i}.parquet", row_group_size=500)
    filters = [[("id", "in", [10, 6000]), ("x", ">=", 0)]]  # a list value, keyed as a tuple
    calls = []
    units = ParquetFormat.units
    monkeypatch.setattr(ParquetFormat, "units",
                        lambda self, *args: calls.append(args) or units(self, *args))
    first = plan_fragments(str(folder), ["x"], filters, workers=WORKERS, storage=FIXED)
    again = plan_fragments(str(folder), ["x"], filters, workers=WORKERS, storage=FIXED)
    assert len(calls) == 2  # one per file, for the first plan only
    assert again.fragments == first.fragments and again.fragments is not first.fragments
    assert (again.units_kept, again.units_total) == (first.units_kept, 16) == (2, 16)

    other = plan_fragments(str(folder), ["x"], [("id", "<", 600)], workers=WORKERS,
                           storage=FIXED)
    assert [f.units for f in other.fragments] == [(0, 1)] and len(calls) == 4

    # a file written again has another footer: packed anew, from its own row groups
    pq.write_table(pa.table({"id": np.arange(8000, 9000), "x": np.arange(1000) * 0.5}),
                   folder / "part-1.parquet", row_group_size=250)
    changed = plan_fragments(str(folder), ["x"], filters, workers=WORKERS, storage=FIXED)
    assert changed.units_total == 12 and changed.units_kept == 1
    assert [f.path for f in changed.fragments] == [str(folder / "part-0.parquet")]


def test_remembered_packings_hold_their_footers_within_a_budget(dataset_dir):
    plan = plan_fragments(str(dataset_dir / "flat"), storage=FIXED)
    footers = [plan.footers[path] for path in plan.files]
    packings = Packings(budget=100)
    packed = [PackedUnits(ParquetFormat(), plan.files, plan.footers, {}, ["id"], ["id"], None,
                          2**30) for _ in range(2)]
    packings.keep(("a",), packed[0], 60)
    assert packings.get(("a",), footers) is packed[0]
    assert packings.get(("a",), footers[::-1]) is None  # other footers: packed anew
    packings.keep(("b",), packed[1], 60)  # past the budget: the least recently used goes
    assert packings.get(("a",), footers) is None and packings.get(("b",), footers) is packed[1]


def test_value_ranges_span_the_files_a_plan_kept(tmp_path):
    folder = tmp_path / "ranged"
    folder.mkdir()
    for i, (low, high) in enumerate([(10, 20), (-5, 3), (100, 140)]):
        pq.write_table(pa.table({"v": np.arange(low, high + 1), "s": ["x"] * (high - low + 1)}),
                       folder / f"part-{i}.parquet")
    plan = plan_fragments(str(folder), storage=FIXED)
    ranges = ValueRanges(plan)
    assert ranges("v") == (-5, 140)
    assert ranges("s") == ("x", "x")
    assert ranges("absent") is None
    pq.write_table(pa.table({"v": np.arange(3), "s": ["y"] * 3}), folder / "part-3.parquet",
                   write_statistics=False)
    assert ValueRanges(plan_fragments(str(folder), storage=FIXED))("v") is None
