"""gpuframe.exchange.sealed: a frame the packer holds whole travels as one buffer, its index
beside its columns, and comes back the same frame; any other goes by its own serializers; and
(marker gpu) cuDF's "cuda" serializers, once sealed, send a cuDF frame as one device buffer."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from distributed.protocol import dask_deserialize, dask_serialize

from gpuframe.exchange.pack import Parcel
from gpuframe.exchange.sealed import seal, sealed_serializers


def pickled(frame: pd.DataFrame) -> tuple[dict, list]:
    return {"kind": "pickled"}, [pickle.dumps(frame)]


def unpickled(header: dict, frames: list) -> pd.DataFrame:
    return pickle.loads(frames[0])


SERIALIZERS = sealed_serializers(dask_serialize.dispatch(Parcel), dask_deserialize.dispatch(Parcel),
                                 pickled, unpickled)


def plain_frame() -> pd.DataFrame:
    rng = np.random.default_rng(6)
    frame = pd.DataFrame({"k": rng.integers(0, 50, 3001), "f": rng.random(3001),
                          "s": [f"s{i % 17}" for i in range(3001)],
                          "n": pd.array(rng.integers(0, 5, 3001), dtype="Int64")})
    frame.loc[::5, "n"] = None
    return frame


@pytest.mark.parametrize("index", ["default", "range", "filtered", "named", "strings"])
def test_a_frame_travels_as_one_buffer_and_comes_back_the_same(index):
    """Its index too: a range as its start and step, any other packed beside its columns (a
    filtered frame keeps the numbers of the rows it kept)."""
    dumps, loads = SERIALIZERS
    frame = {
        "default": plain_frame(),
        "range": plain_frame().iloc[100:2000:3],
        "filtered": plain_frame()[lambda f: f.k > 10],
        "named": plain_frame().set_index("f"),
        "strings": plain_frame().set_index("s").rename_axis("label"),
    }[index]
    header, frames = dumps(frame)
    assert header["sealed"] and len(frames) == 1
    pd.testing.assert_frame_equal(loads(header, frames), frame)


@pytest.mark.parametrize("case", ["levels", "labels", "repeated", "objects", "empty",
                                  "columnless"])
def test_frames_one_buffer_would_not_bring_back_go_by_their_own_serializers(case):
    """Several index levels, labels other than distinct strings, columns the packer carries
    beside its buffer, no rows, no columns: each goes as before."""
    frame = {
        "levels": plain_frame().set_index(["k", "s"]),
        "labels": pd.DataFrame({0: [1, 2], 1: [3.0, 4.0]}),
        "repeated": pd.DataFrame([[1, 2]], columns=["a", "a"]),
        "objects": pd.DataFrame({"k": [1, 2, 3], "o": [1, "a", None]}),
        "empty": plain_frame().iloc[:0],
        "columnless": pd.DataFrame(index=pd.Index([3, 7, 9], name="x")),
    }[case]
    assert seal(frame) is None
    dumps, loads = SERIALIZERS
    header, frames = dumps(frame)
    assert not header["sealed"]
    pd.testing.assert_frame_equal(loads(header, frames), frame)


@pytest.mark.gpu
def test_cudf_frames_go_by_cuda_serializers_as_one_device_buffer(monkeypatch):
    import cudf
    from distributed.protocol import deserialize, serialize
    from distributed.protocol.cuda import cuda_deserialize, cuda_serialize

    from gpuframe.exchange import sealed

    # The registration is this process's for good: give the other tests cuDF's own back.
    for dispatch in (cuda_serialize, cuda_deserialize):
        dispatch.dispatch(cudf.DataFrame)  # cuDF's own, registered lazily
        monkeypatch.setitem(dispatch._lookup, cudf.DataFrame, dispatch._lookup[cudf.DataFrame])
    monkeypatch.setattr(sealed, "seal_cudf_transfers",
                        sealed.seal_cudf_transfers.__wrapped__)
    sealed.seal_cudf_transfers()
    values = plain_frame()
    frame = cudf.from_pandas(values)
    header, frames = serialize(frame, serializers=("cuda",))
    assert len(frames) == 1 and hasattr(frames[0], "__cuda_array_interface__")
    # The same frame as cuDF's own serializers give: columns of the same dtypes, nulls and all.
    pd.testing.assert_frame_equal(deserialize(header, frames).to_pandas(), frame.to_pandas())
    for kept in (frame[frame.k > 10], cudf.from_pandas(values.set_index("s"))):
        header, frames = serialize(kept, serializers=("cuda",))
        assert len(frames) == 1  # the index packed beside the columns
        pd.testing.assert_frame_equal(deserialize(header, frames).to_pandas(), kept.to_pandas())
    levels = cudf.from_pandas(values.set_index(["k", "s"]))
    header, frames = serialize(levels, serializers=("cuda",))
    assert len(frames) > 1  # cuDF's own: a buffer per column and per level
    pd.testing.assert_frame_equal(deserialize(header, frames).to_pandas(), levels.to_pandas())
