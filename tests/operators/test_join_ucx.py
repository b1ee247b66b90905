"""Joins over UCX on the CPU: the same results as pandas, the buckets moved between workers by
UCX. Needs distributed-ucxx (`pip install -e ".[test,ucx]"`; CI runs this file in a venv of
its own with it: `make test-ucx`), skipped without it."""

import numpy as np
import pandas as pd
import pytest
from dask.utils import key_split
from distributed import get_task_stream

import gpuframe
from gpuframe.cluster.hardware import ucx_available
from gpuframe.operators.join_schema import HOWS as ALL_HOWS

HOWS = tuple(how for how in ALL_HOWS if how != "cross")  # the join types with keys

pytestmark = pytest.mark.skipif(not ucx_available(), reason="distributed-ucxx not installed")


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(list(frame.columns), na_position="first").reset_index(drop=True)


@pytest.mark.parametrize("how", HOWS)
def test_every_how_matches_pandas_over_ucx(ucx_engine, how):
    rng = np.random.default_rng(5)
    left = pd.DataFrame({"k": rng.integers(0, 300, 5000), "lv": rng.random(5000)})
    left.loc[::97, "k"] = None  # null keys match each other, as in pandas
    right = pd.DataFrame({"k": rng.integers(100, 500, 2000), "rv": np.arange(2000)})
    with get_task_stream(client=ucx_engine.client) as stream:
        result = gpuframe.from_pandas(left, npartitions=3, engine=ucx_engine).merge(
            gpuframe.from_pandas(right, npartitions=2, engine=ucx_engine), on="k", how=how,
            broadcast_bytes=0).to_pandas()
    if how in ("leftsemi", "leftanti"):
        hit = left["k"].isin(right["k"]) & left["k"].notna()
        expected = left[~hit if how == "leftanti" else hit]
    else:
        expected = left.merge(right, on="k", how=how)
    pd.testing.assert_frame_equal(canonical(result), canonical(expected), check_dtype=False)
    assert all(w.startswith("ucx://") for w in ucx_engine.workers)
    sources = {startstop.get("source") for task in stream.data
               for startstop in task["startstops"] if startstop["action"] == "transfer"}
    assert sources & set(ucx_engine.workers)  # buckets travelled between the workers over UCX
    assert "gpuframe-join" in {key_split(task["key"]) for task in stream.data}


def test_the_engine_page_names_the_workers_protocol(ucx_engine, tmp_path):
    """The scheduler listens on TCP; the buckets moved over UCX, as the page says."""
    frame = gpuframe.from_pandas(pd.DataFrame({"k": range(1000)}), npartitions=2,
                                 engine=ucx_engine)
    with gpuframe.report(tmp_path / "join.html", engine=ucx_engine) as report:
        assert len(frame.merge(frame, on="k", broadcast_bytes=0).to_pandas()) == 1000
    assert ucx_engine.scheduler_address.startswith("tcp://")
    assert report.metrics is not None and report.metrics.protocol == "ucx"
