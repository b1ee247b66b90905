"""A bucket in flight: one worker's rows for one peer, as Dask's comm layer moves them.

The direct exchange sends a bucket sealed where it can (a :class:`~gpuframe.exchange.pack.Parcel`:
its rows still packed in one buffer), which travels as that one buffer, device or host, and a
header; a frame travels as a buffer per column, and each buffer costs the comm layer about as much
as a copy of megabytes (benchmarks/exchange_latency.py). :func:`arrived` opens it where it is
consumed.

Over UCX a cuDF bucket travels as its device buffers (Dask's "cuda" serializers). Over TCP, Dask
has cuDF copy the frame to host memory first (``host_serialize``), into freshly allocated
pageable memory: faulting in those fresh pages takes a large share of a transfer, where a copy
into pinned memory takes a small fraction of it
(benchmarks/results/2026-11-24-night-tcp-buckets-h200.md). So on such comms (:data:`HOST_PROTOCOLS`)
the exchange hands Dask each cuDF bucket wrapped in a :class:`DeviceBucket`, whose host
serialization for a comm copies its device buffers into pinned host memory from a pool the
process keeps (at most :data:`PINNED_POOL_BYTES`, pinned on first use and reused after). A buffer
the pool has no room for, and a bucket Dask serializes for anything but a comm (dask-cuda
spilling it to host memory, where it could sit for long), take cuDF's own path. The receiver
rebuilds the frame as cuDF does. benchmarks/bucket_transfer.py times both ways
(benchmarks/results/2026-11-24-night-tcp-buckets-h200.md,
benchmarks/results/2026-11-25-staged-key-h100-h200.md).

cuDF, CuPy and RMM are imported only where a bucket is (de)serialized, on GPU workers.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import pickle
from typing import Any

import numpy as np
from dask.sizeof import sizeof
from distributed.protocol import dask_deserialize, dask_serialize
from distributed.protocol.cuda import cuda_deserialize, cuda_serialize
from distributed.utils import nbytes

from ..once import Once
from .pack import Parcel, _aligned_empty
from .pack_layout import ALIGNMENT

HOST_PROTOCOLS = ("tcp", "tls")
"""Comm protocols over which Dask sends device buffers through host memory (UCX sends them as
they are): the exchange wraps cuDF buckets in :class:`DeviceBucket` only on these."""
PINNED_POOL_BYTES = 4 * 2**30
"""Pinned host memory a process may keep for buckets in flight."""
PINNED_POOL_INITIAL_BYTES = 256 * 2**20
"""Pinned at the pool's creation; it grows by what transfers ask, up to PINNED_POOL_BYTES."""


class DeviceBucket:
    """A cuDF frame bound for another worker (see the module's docstring)."""

    __slots__ = ("frame",)

    def __init__(self, frame: Any):
        register_with_dask_cuda()
        self.frame = frame


@functools.cache
def register_with_dask_cuda() -> None:
    """Tell dask-cuda's spilling (DeviceHostFile) that a bucket, and a parcel packed on the GPU,
    is device memory: it would keep an object it does not know with host data, out of reach of
    ``device_memory_limit``."""
    try:
        from dask_cuda.is_device_object import is_device_object
    except ImportError:  # no dask-cuda, no device spilling
        return
    is_device_object.register(DeviceBucket)(lambda bucket: True)
    is_device_object.register(Parcel)(lambda parcel: parcel.bucket.on_gpu)


def wrapped(on_device: bool, protocol: str) -> bool:
    """Whether buckets of a backend (``on_device``) travel as :class:`DeviceBucket` over a
    comm ``protocol``."""
    return on_device and protocol in HOST_PROTOCOLS


def arrived(part: Any) -> Any:
    """The frame of a bucket as the join task receives it: unwrapped, or opened."""
    if isinstance(part, DeviceBucket):
        return part.frame
    return part.open() if isinstance(part, Parcel) else part


@sizeof.register(DeviceBucket)
def _sizeof(bucket: DeviceBucket) -> int:
    return sizeof(bucket.frame)


@cuda_serialize.register(DeviceBucket)
def _device_frames(bucket: DeviceBucket) -> tuple[dict, list]:
    header, frames = bucket.frame.device_serialize()
    return {"frame": header}, frames


@cuda_deserialize.register(DeviceBucket)
def _from_device_frames(header: dict, frames: list) -> DeviceBucket:
    import cudf

    return DeviceBucket(cudf.DataFrame.device_deserialize(header["frame"], frames))


@dask_serialize.register(DeviceBucket)
def _host_frames(bucket: DeviceBucket, context: dict | None = None) -> tuple[dict, list]:
    """Host frames: device buffers copied into pinned memory when a comm sends them (its
    ``context`` names the recipient), cuDF's pageable copies otherwise."""
    if not (context and context.get("recipient")):
        header, frames = bucket.frame.host_serialize()
        return {"frame": header}, frames
    header, frames = bucket.frame.device_serialize()
    frames = [_pinned_copy(f) if on_device else f
              for on_device, f in zip(header["is-cuda"], frames)]
    header["writeable"] = (None,) * len(frames)  # as cuDF's host_serialize says of its frames
    return {"frame": header}, frames


@dask_deserialize.register(DeviceBucket)
def _from_host_frames(header: dict, frames: list) -> DeviceBucket:
    import cudf

    return DeviceBucket(cudf.DataFrame.host_deserialize(header["frame"], frames))


def _pinned_copy(buffer: Any) -> memoryview:
    """A cuDF device buffer's bytes in pinned host memory from the pool (a pageable copy where
    the pool has no room). The view owns its memory, which returns to the pool when the comm
    has sent it and lets it go."""
    import rmm
    from cupy.cuda import runtime

    nbytes = buffer.size
    if nbytes == 0:
        return memoryview(b"")
    try:
        pinned = rmm.DeviceBuffer(size=nbytes, mr=pinned_pool())
    except MemoryError:
        return buffer.memoryview()
    with buffer.access(mode="read"):  # no copy-on-write copy, no spilling while we read
        runtime.memcpy(pinned.ptr, buffer.ptr, nbytes, runtime.memcpyDeviceToHost)
    host = (ctypes.c_uint8 * nbytes).from_address(pinned.ptr)
    host.owner = pinned  # the memory lives as long as any view of `host`
    return memoryview(host).cast("B")


@Once
def pinned_pool() -> Any:
    """This process's pool of pinned host memory for buckets in flight, created on first use:
    the first transfers pay for pinning, more than the pageable copy would cost
    (benchmarks/results/2026-11-24-night-tcp-buckets-h200.md); later ones reuse the memory,
    whatever their sizes. Made once (:class:`~gpuframe.once.Once`): two first callers (the
    event loop and a thread serializing at once) would each pin a pool's initial bytes."""
    import rmm

    return rmm.mr.PoolMemoryResource(rmm.mr.PinnedHostMemoryResource(),
                                     initial_pool_size=PINNED_POOL_INITIAL_BYTES,
                                     maximum_pool_size=PINNED_POOL_BYTES)


@sizeof.register(Parcel)
def _parcel_size(parcel: Parcel) -> int:
    return parcel.bucket.nbytes


def _label(parcel: Parcel) -> bytes:
    """Everything of ``parcel`` but its buffer: the columns' layout, a few hundred bytes."""
    return pickle.dumps(dataclasses.replace(
        parcel, bucket=dataclasses.replace(parcel.bucket, data=None)))


def _relabelled(label: bytes, data: Any) -> Parcel:
    parcel = pickle.loads(label)
    return dataclasses.replace(parcel, bucket=dataclasses.replace(parcel.bucket, data=data))


@cuda_serialize.register(Parcel)
def _parcel_device_frames(parcel: Parcel) -> tuple[dict, list]:
    """One device frame, the buffer where it is, which UCX moves GPU to GPU; a parcel in host
    memory takes the next serializers (``dask``)."""
    if not parcel.bucket.on_gpu:
        raise NotImplementedError("a parcel in host memory travels by the host serializers")
    return {"label": _label(parcel)}, [parcel.bucket.data]


@cuda_deserialize.register(Parcel)
def _parcel_from_device_frames(header: dict, frames: list) -> Parcel:
    import cupy

    data = frames[0]
    # A comm's empty device frame may have no address at all.
    data = cupy.asarray(data).view(cupy.uint8) if nbytes(data) else cupy.empty(0, cupy.uint8)
    return _relabelled(header["label"], data)


@dask_serialize.register(Parcel)
def _parcel_host_frames(parcel: Parcel) -> tuple[dict, list]:
    """One host frame: the buffer itself on the CPU, a host copy of it on the GPU (for a comm
    through host memory, or dask-cuda spilling it)."""
    data = parcel.bucket.data
    on_gpu = parcel.bucket.on_gpu
    host = data.get() if on_gpu else data
    return {"label": _label(parcel), "on-gpu": on_gpu}, [np.ascontiguousarray(host).data]


@dask_deserialize.register(Parcel)
def _parcel_from_host_frames(header: dict, frames: list) -> Parcel:
    data = np.frombuffer(frames[0], dtype=np.uint8)
    if data.ctypes.data % ALIGNMENT:  # a comm may hand frames over at any offset
        aligned = _aligned_empty(len(data))
        aligned[:] = data
        data = aligned
    if header["on-gpu"]:
        import cupy

        data = cupy.asarray(data)
    return _relabelled(header["label"], data)
