"""The pandas backend's reader: fragments of real files, local, over the Range HTTP server
and over moto S3, against pyarrow and pandas reading the same files."""

from __future__ import annotations

import pandas as pd
import pytest

from gpuframe.io.errors import (
    UnreachableError,
)
from gpuframe.io.planning.plan import plan_fragments

FIXED = {"requests_in_flight": 3}


@pytest.mark.parametrize("kind", ["orc", "csv"])
def test_http_reads_ranges_like_local(dataset_dir, http_server, kind, read_all):
    names = [f"{kind}/part-{i}.{kind}" for i in range(2)]
    budget = 1 if kind == "orc" else 30_000
    local = plan_fragments([str(dataset_dir / n) for n in names], ["id", "name"],
                           [("id", ">", 3500)], budget, FIXED, format=kind)
    http_server.reset()
    remote = plan_fragments([f"{http_server.url}/{n}" for n in names], ["id", "name"],
                            [("id", ">", 3500)], budget, FIXED, format=kind)
    assert [(f.units, f.bytes) for f in remote.fragments] == [
        (f.units, f.bytes) for f in local.fragments]
    assert http_server.whole_file_gets() == 0
    http_server.reset()
    got, stats = read_all(remote)
    pd.testing.assert_frame_equal(got, read_all(local)[0])
    assert http_server.whole_file_gets() == 0
    # the read fetches exactly the planned units (the ORC tail came with the plan)
    assert http_server.bytes_served() == sum(s.bytes_read for s in stats)
    assert sum(s.bytes_read for s in stats) == remote.total_bytes


def test_s3_csv_and_orc(dataset_dir, s3_server, closed_port, read_all):
    options = s3_server.options(requests_in_flight=2)
    for kind in ("csv", "orc"):
        plan = plan_fragments(s3_server.url(kind), format=kind, storage=options,
                              partition_bytes=40_000)
        local = plan_fragments(str(dataset_dir / kind), format=kind, storage=FIXED,
                               partition_bytes=40_000)
        pd.testing.assert_frame_equal(read_all(plan)[0], read_all(local)[0])
    with pytest.raises(UnreachableError, match=f"127.0.0.1:{closed_port}"):
        plan_fragments(f"http://127.0.0.1:{closed_port}/csv/part-0.csv", format="csv")
