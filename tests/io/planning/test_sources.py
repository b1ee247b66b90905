"""Sources expanded into files, and hive folders into typed values, against pyarrow's dataset
discovery of the same folders."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from gpuframe.errors import OptionError
from gpuframe.io.errors import (
    AccessDeniedError,
    FilterError,
    NotARegularFileError,
    SourceNotFoundError,
)
from gpuframe.io.planning.plan import (
    plan_fragments,
)
from gpuframe.io.planning.sources import expand_source
from gpuframe.io.storage.base import storage_options

WORKERS = ["tcp://w0", "tcp://w1"]
FIXED = {"requests_in_flight": 4}


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


def test_hive_values_typed_like_pyarrow_and_pruned(dataset_dir):
    hive = dataset_dir / "hive"
    plan = plan_fragments(str(hive), storage=FIXED)
    assert plan.schema.remove_metadata() == ds.dataset(str(hive), partitioning="hive").schema
    assert plan.schema.field("year").type == pa.int32()
    first = plan.fragments[0]
    assert first.path.endswith("year=2023/city=ams/part.parquet")
    assert dict(first.hive_values) == {"year": 2023, "city": "ams"}
    plan = plan_fragments(str(hive), filters=[("year", "==", 2024)], storage=FIXED)
    assert {f.path.split("/hive/")[1] for f in plan.fragments} == {
        "year=2024/city=ams/part.parquet"}
    assert (plan.files_total, len(plan.files)) == (3, 1)
    assert (plan.units_total, plan.units_kept) == (2, 2)
    assert "1/3 files" in repr(plan)
    plan = plan_fragments(str(hive), filters=[("city", "in", ["oslo"]), ("id", "<", 2500)],
                          columns=["id", "city"], storage=FIXED)
    assert [(dict(f.hive_values)["city"], f.units) for f in plan.fragments] == [("oslo", (0,))]
    assert plan.schema.names == ["id", "city"]
    with pytest.raises(FilterError, match="value 'x' does not fit column 'year' of type int32"):
        plan_fragments(str(hive), filters=[("year", "==", "x")])


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["folder", "glob", "path"])
def test_a_fifo_in_a_dataset_is_refused_by_name(tmp_path, how):
    """A FIFO named like a data file would block the read that opens it forever."""
    import pandas as pd

    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "part-0.parquet")
    fifo = tmp_path / "part-1.parquet"
    os.mkfifo(fifo)
    source = {"folder": str(tmp_path), "glob": str(tmp_path / "*.parquet"),
              "path": str(fifo)}[how]
    with pytest.raises(NotARegularFileError, match="part-1.parquet is not a regular file "
                                                   r"\(a FIFO\)"):
        expand_source(source, storage_options())


def test_files_and_folders_that_permissions_hide_are_refused_by_name(
        tmp_path, plan_bound_by_permissions):
    """A folder above a file that cannot be searched is not 'no such file', and a folder of a
    dataset that cannot be listed does not leave its files out of the read."""
    import pandas as pd

    for folder in ("open", "shut", "dataset/year=1", "dataset/year=2"):
        (tmp_path / folder).mkdir(parents=True)
        pd.DataFrame({"x": [1]}).to_parquet(tmp_path / folder / "part.parquet")
    unreadable = tmp_path / "open" / "part.parquet"
    for locked in (unreadable, tmp_path / "shut", tmp_path / "dataset" / "year=2"):
        locked.chmod(0)
    with pytest.raises(AccessDeniedError, match=f"cannot open {unreadable}: permission denied"):
        plan_bound_by_permissions(str(unreadable), "parquet")
    shut = tmp_path / "shut" / "part.parquet"
    with pytest.raises(AccessDeniedError, match=f"cannot reach {shut}: permission denied to a "
                                                "folder above it"):
        plan_bound_by_permissions(str(shut), "parquet")
    with pytest.raises(AccessDeniedError, match=f"cannot list {tmp_path}/dataset/year=2, a "
                                                "folder of the dataset: permission denied"):
        plan_bound_by_permissions(str(tmp_path / "dataset"), "parquet")

