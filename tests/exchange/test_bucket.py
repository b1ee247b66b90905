"""gpuframe.exchange.bucket: a wrapped bucket arrives as its frame, and (marker gpu) a cuDF bucket
crosses TCP through pinned memory and arrives whole, by every serializer path, and dask-cuda
spills it like a cuDF frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from dask.sizeof import sizeof

from gpuframe.exchange import bucket
from gpuframe.exchange.bucket import DeviceBucket, arrived
from gpuframe.exchange.exchange import split_rows
from gpuframe.exchange.splitters import HashSplitter


def test_a_device_bucket_is_sized_and_unwrapped_as_its_frame():
    frame = pd.DataFrame({"k": np.arange(1000), "s": ["x" * 20] * 1000})
    wrapped = DeviceBucket(frame)
    assert sizeof(wrapped) == sizeof(frame)
    assert arrived(wrapped) is frame
    assert arrived(frame) is frame


def frame_with_every_kind():
    import cudf

    rng = np.random.default_rng(3)
    n = 10_001
    values = pd.DataFrame({
        "k": rng.integers(0, 100, n),
        "f": rng.random(n),
        "s": [f"row {i}" for i in range(n)],
        "n": pd.array(rng.integers(0, 9, n), dtype="Int64"),
    })
    values.loc[::7, "n"] = None
    values.loc[::11, "s"] = None
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
    return bucket.pinned_pool.cache_info().currsize == 1


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
