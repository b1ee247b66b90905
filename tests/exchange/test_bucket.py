"""gpuframe.exchange.bucket: a wrapped bucket arrives as its frame, a sealed one travels as one
buffer and opens as the frame it would have been, and (marker gpu) a cuDF bucket crosses TCP
through pinned memory and arrives whole, by every serializer path, and dask-cuda spills it, and a
sealed one, like a cuDF frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from dask.sizeof import sizeof

from gpuframe.exchange import bucket
from gpuframe.exchange.bucket import DeviceBucket, arrived
from gpuframe.exchange.exchange import split_rows
from gpuframe.exchange.pack import Parcel, hash_split
from gpuframe.exchange.splitters import HashSplitter


def test_a_device_bucket_is_sized_and_unwrapped_as_its_frame():
    frame = pd.DataFrame({"k": np.arange(1000), "s": ["x" * 20] * 1000})
    wrapped = DeviceBucket(frame)
    assert sizeof(wrapped) == sizeof(frame)
    assert arrived(wrapped) is frame
    assert arrived(frame) is frame


def values_of_every_kind(n: int, seed: int) -> pd.DataFrame:
    """Integers, floats, strings and nullable integers, with nulls."""
    rng = np.random.default_rng(seed)
    values = pd.DataFrame({
        "k": rng.integers(0, 100, n),
        "f": rng.random(n),
        "s": [f"row {i}" for i in range(n)],
        "n": pd.array(rng.integers(0, 9, n), dtype="Int64"),
    })
    values.loc[::7, "n"] = None
    values.loc[::11, "s"] = None
    return values


def host_frame_with_every_kind() -> pd.DataFrame:
    """The kinds, and the host's Arrow-backed dates and booleans."""
    values = values_of_every_kind(5_003, 4)
    values["d"] = pd.array(pd.date_range("2020-01-01", periods=len(values)).date,
                           dtype=pd.ArrowDtype(pa.date32()))
    values["b"] = values.f < 0.5
    return values


def test_a_sealed_bucket_travels_as_one_buffer_and_opens_as_its_frame():
    from distributed.protocol import deserialize, serialize

    values = host_frame_with_every_kind()
    plain = hash_split(values, ["k"], 3)
    sealed = hash_split(values, ["k"], 3, sealed=True)
    assert all(isinstance(piece, Parcel) for piece in sealed)
    assert [len(piece) for piece in sealed] == [len(frame) for frame in plain]
    for parcel, frame in zip(sealed, plain):
        header, frames = serialize(parcel, serializers=("cuda", "dask"))  # as over UCX
        assert header["serializer"] == "dask"  # host memory: no device frame to send
        assert len(frames) == 1 and sizeof(parcel) == len(frames[0])
        back = deserialize(header, frames)
        pd.testing.assert_frame_equal(arrived(back), frame)
        pd.testing.assert_frame_equal(arrived(parcel), frame)
        # A comm may hand a frame over at any offset: the buffer is realigned for Arrow.
        shifted = bytearray(len(frames[0]) + 1)
        shifted[1:] = bytes(frames[0])
        pd.testing.assert_frame_equal(arrived(deserialize(header, [memoryview(shifted)[1:]])),
                                      frame)


def test_rows_the_packing_does_not_hold_whole_are_never_sealed():
    """Object columns are carried beside the packing, and object keys hashed by digests that
    are dropped after it: such buckets come as frames, as unsealed."""
    values = pd.DataFrame({"k": np.arange(40), "o": [1, "a", 2.5, None] * 10})
    by_object = pd.DataFrame({"k": [1, "a", 2.5, None] * 10, "v": np.arange(40)})
    for frame, key in ((values, "k"), (by_object, "k")):
        plain = hash_split(frame, [key], 2)
        for piece, expected in zip(hash_split(frame, [key], 2, sealed=True), plain):
            assert not isinstance(piece, Parcel)
            pd.testing.assert_frame_equal(piece, expected)


def frame_with_every_kind():
    import cudf

    values = values_of_every_kind(10_001, 3)
    return cudf.from_pandas(values), values


def host_memory_type(frame) -> int:
    """cudaPointerAttributes.type of a host frame's bytes: 1 where pinned (cudaMemoryTypeHost),
    0 where pageable."""
    from cupy.cuda import runtime

    address = np.frombuffer(frame, np.uint8).ctypes.data
    return runtime.pointerGetAttributes(address).type


@pytest.mark.gpu
def test_a_comm_gets_pinned_host_frames_and_the_bucket_comes_back_whole():
    from distributed.protocol import deserialize, serialize

    frame, values = frame_with_every_kind()
    header, frames = serialize(DeviceBucket(frame), serializers=("dask",),
                               context={"recipient": "tcp://127.0.0.1:1"})
    device = [f for f, cuda in zip(frames, header["sub-header"]["frame"]["is-cuda"]) if cuda]
    assert device and all(host_memory_type(f) == 1 for f in device if len(f))
    back = deserialize(header, frames)
    assert isinstance(back, DeviceBucket)
    pd.testing.assert_frame_equal(back.frame.to_pandas(), values)


@pytest.mark.gpu
def test_spilling_and_ucx_take_cudf_paths():
    """Without a recipient (Dask spilling to host) the bucket takes cuDF's pageable copy, so
    spilled data holds no pinned memory; the cuda serializers (UCX) send device buffers."""
    from distributed.protocol import deserialize, serialize

    frame, values = frame_with_every_kind()
    header, frames = serialize(DeviceBucket(frame), serializers=("dask",))
    flags = header["sub-header"]["frame"]["is-cuda"]
    assert all(host_memory_type(f) == 0 for f, cuda in zip(frames, flags) if cuda and len(f))
    pd.testing.assert_frame_equal(deserialize(header, frames).frame.to_pandas(), values)
    header, frames = serialize(DeviceBucket(frame), serializers=("cuda",))
    assert any(hasattr(f, "__cuda_array_interface__") for f in frames)
    pd.testing.assert_frame_equal(deserialize(header, frames).frame.to_pandas(), values)


@pytest.mark.gpu
def test_a_full_pinned_pool_falls_back_to_pageable_copies(monkeypatch):
    import rmm
    from distributed.protocol import deserialize, serialize

    tiny = rmm.mr.PoolMemoryResource(rmm.mr.PinnedHostMemoryResource(),
                                     initial_pool_size=256, maximum_pool_size=1024)
    monkeypatch.setattr(bucket, "pinned_pool", lambda: tiny)
    frame, values = frame_with_every_kind()
    header, frames = serialize(DeviceBucket(frame), serializers=("dask",),
                               context={"recipient": "tcp://127.0.0.1:1"})
    flags = header["sub-header"]["frame"]["is-cuda"]
    assert any(host_memory_type(f) == 0 for f, cuda in zip(frames, flags) if cuda and len(f))
    pd.testing.assert_frame_equal(deserialize(header, frames).frame.to_pandas(), values)


def _make_bucket(rows: int) -> DeviceBucket:
    import cudf
    import cupy

    return DeviceBucket(cudf.DataFrame({"k": cupy.arange(rows, dtype="int64"),
                                        "v": cupy.arange(rows, dtype="int64") * 3}))


def _pinned_pool_made() -> bool:
    return bucket.pinned_pool.made


@pytest.mark.gpu
def test_a_bucket_crosses_tcp_between_two_workers_through_the_pinned_pool():
    """Two worker processes on the first GPU, over TCP: the sender copies through its pinned
    pool, the receiver gets every row."""
    from distributed import Client, LocalCluster

    rows = 3_000_001
    with LocalCluster(n_workers=2, threads_per_worker=1, protocol="tcp", host="127.0.0.1",
                      dashboard_address=None, memory_limit=0) as cluster, \
            Client(cluster) as client:
        sender, receiver = sorted(client.scheduler_info()["workers"])
        made = client.submit(_make_bucket, rows, workers=[sender])
        total = client.submit(lambda b: int(arrived(b)["v"].sum()), made, workers=[receiver])
        assert total.result() == 3 * rows * (rows - 1) // 2
        assert client.run(_pinned_pool_made, workers=[sender])[sender]


@pytest.mark.gpu
def test_partitions_wrap_their_buckets_only_when_asked():
    frame, values = frame_with_every_kind()
    plain = split_rows(frame, HashSplitter(("k",), 3), 0)
    wrapped = split_rows(frame, HashSplitter(("k",), 3), 0, True)
    assert not any(isinstance(b, DeviceBucket) for b in plain)
    assert all(isinstance(b, DeviceBucket) for b in wrapped)
    for a, b in zip(plain, wrapped):
        pd.testing.assert_frame_equal(arrived(b).to_pandas(), a.to_pandas())


@pytest.mark.gpu
def test_dask_cuda_spills_a_bucket_from_device_memory_like_a_frame(tmp_path):
    """dask-cuda keeps what it does not know as device memory with host data, where its
    device_memory_limit never spills it: a bucket must count as device memory."""
    from dask_cuda.device_host_file import DeviceHostFile

    frame, values = frame_with_every_kind()
    store = DeviceHostFile(str(tmp_path), device_memory_limit=1000)
    store["bucket"] = DeviceBucket(frame)
    assert "bucket" in store.device_keys and "bucket" not in store.device  # spilled to host
    pd.testing.assert_frame_equal(arrived(store["bucket"]).to_pandas(), values)


@pytest.mark.gpu
def test_a_sealed_cudf_bucket_travels_as_one_device_or_host_buffer():
    from distributed.protocol import deserialize, serialize

    frame, _ = frame_with_every_kind()
    plain = hash_split(frame, ["k"], 3)
    sealed = hash_split(frame, ["k"], 3, sealed=True)
    assert all(isinstance(piece, Parcel) and piece.bucket.on_gpu for piece in sealed)
    for parcel, expected in zip(sealed, plain):
        header, frames = serialize(parcel, serializers=("cuda",))
        assert len(frames) == 1 and hasattr(frames[0], "__cuda_array_interface__")
        pd.testing.assert_frame_equal(arrived(deserialize(header, frames)).to_pandas(),
                                      expected.to_pandas())
        header, frames = serialize(parcel, serializers=("dask",))
        assert len(frames) == 1 and not hasattr(frames[0], "__cuda_array_interface__")
        back = deserialize(header, frames)
        assert back.bucket.on_gpu
        pd.testing.assert_frame_equal(arrived(back).to_pandas(), expected.to_pandas())


@pytest.mark.gpu
def test_dask_cuda_spills_a_sealed_bucket_from_device_memory(tmp_path):
    from dask_cuda.device_host_file import DeviceHostFile

    bucket.register_with_dask_cuda()
    frame, _ = frame_with_every_kind()
    parcel = hash_split(frame, ["k"], 1, sealed=True)[0]
    store = DeviceHostFile(str(tmp_path), device_memory_limit=1000)
    store["parcel"] = parcel
    assert "parcel" in store.device_keys and "parcel" not in store.device  # spilled to host
    pd.testing.assert_frame_equal(arrived(store["parcel"]).to_pandas(),
                                  hash_split(frame, ["k"], 1)[0].to_pandas())

