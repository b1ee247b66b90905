"""The lowering of a plan: every table of a chain of joins read from the start, the innermost
join's first."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import gpuframe
from gpuframe.operators import lowering
from gpuframe.plan.nodes import Scan
from gpuframe.runtime.runner import Job


def test_every_table_of_a_chain_of_joins_is_read_before_any_join_waits(engine, tmp_path,
                                                                        monkeypatch):
    """A join that samples waits on the client for its sample before the lowering goes on:
    the tables of the joins above it must be read already, not only once it has waited. So
    every read task is submitted before the job's first wait for a result; the innermost
    join's tables first, since a worker runs reads in the order they came, and that join's
    steps run first."""
    tables = {
        "a": pd.DataFrame({"k": np.arange(300) % 40, "x": np.arange(300.0)}),
        "b": pd.DataFrame({"k": np.arange(40), "j": np.arange(40) % 7}),
        "c": pd.DataFrame({"j": np.arange(7), "y": np.arange(7) * 10}),
    }
    for name, table in tables.items():
        pq.write_table(pa.Table.from_pandas(table, preserve_index=False),
                       tmp_path / f"{name}.parquet")
    reads_at_gather: list[int] = []
    gather = Job.gather

    def counting(self: Job, futures):
        if {self._info[f.key].stage for f in futures} != {"plan-metadata"}:  # a read's plan
            reads_at_gather.append(sum(1 for info in self._info.values()
                                       if info.stage.startswith("read")))
        return gather(self, futures)

    lowered: list[str] = []
    lower = lowering.lower

    def recording(node, within):
        if isinstance(node, Scan):
            lowered.append(next(name for name in tables if f"{name}.parquet" in node.describe()))
        return lower(node, within)

    frames = {name: gpuframe.read_parquet(str(tmp_path / f"{name}.parquet")) for name in tables}
    monkeypatch.setattr(Job, "gather", counting)
    monkeypatch.setattr(lowering, "lower", recording)
    result = frames["a"].merge(frames["b"], on="k", broadcast_bytes=0).merge(
        frames["c"], on="j", broadcast_bytes=0).to_pandas()  # shuffles: each samples
    expected = tables["a"].merge(tables["b"], on="k").merge(tables["c"], on="j")
    pd.testing.assert_frame_equal(
        result.sort_values("x").reset_index(drop=True),
        expected.sort_values("x").reset_index(drop=True), check_dtype=False)
    assert len(reads_at_gather) >= 2  # the joins waited (a sample each)
    assert reads_at_gather[0] == reads_at_gather[-1] >= 3  # every table's read, from the start
    # (twice where a speculation failed and the action ran again: the same order each time)
    assert lowered[:3] == ["a", "b", "c"] and lowered == lowered[:3] * (len(lowered) // 3)
