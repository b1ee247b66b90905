"""gpuframe's native core (gpuframe_cpp/python/_core.cpp): row hashes, range destinations and
partition-and-pack, on the CPU and with CUDA.

The types of the compiled module, as ``python -m nanobind.stubgen -m gpuframe._core`` gives
them, with its column tuple named (:data:`Column`); tests/native/test_stub.py checks that this
file names what the module has. Device arrays (CuPy) go where the NumPy ones are typed: the
core takes either, by DLPack.
"""

from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

Buffer: TypeAlias = tuple[int, int] | NDArray[Any] | None
"""A column's buffer: an array (NumPy on the host, CuPy on the device, read only), a device
buffer's (address, bytes), or None where absent."""
Column: TypeAlias = tuple[int, int, int, Buffer, Buffer, Buffer]
"""(kind, width, offset, data, validity, offsets): kind :data:`FIXED`, :data:`FLOATING` or
:data:`STRING`; width in bytes of a value, or of a string offset."""
KeyOrder: TypeAlias = tuple[bool, bool, bool]
"""(is_signed, ascending, nulls_last) of one key column."""

built_with_cuda: bool
ALIGNMENT: int
FIXED: int
FLOATING: int
STRING: int

class CudaError(RuntimeError): ...
class DestinationError(ValueError): ...
class BoundaryOrderError(ValueError): ...

def cuda_device_count() -> int:
    """CUDA devices usable by this process; 0 without a driver or a build without CUDA."""

def hash_rows(keys: Sequence[Column], n_rows: int, threads: int = 0) -> NDArray[np.uint64]:
    """64-bit hash of each row over host key columns, as a NumPy uint64 array."""

def hash_rows_cuda(keys: Sequence[Column], n_rows: int, out: NDArray[np.uint64],
                   stream: int = 0) -> None:
    """The same hashes for device columns, into ``out`` (a CuPy uint64 array), enqueued on
    ``stream`` (an integer cudaStream_t, e.g. cupy.cuda.get_current_stream().ptr)."""

def longest_repeat_scratch_bytes(n: int) -> int:
    """Device bytes longest_repeat_cuda needs as scratch for ``n`` hashes."""

def longest_repeat_cuda(hashes: NDArray[np.uint64], sorted: NDArray[np.uint64],
                        scratch: NDArray[np.uint8], stream: int = 0) -> int:
    """The most times one value occurs in ``hashes`` (a CuPy uint64 array), sorting them into
    ``sorted`` with ``scratch`` (CuPy uint8, longest_repeat_scratch_bytes long) on ``stream``;
    waits for the stream."""

def range_destinations(keys: Sequence[Column], n_rows: int, boundaries: Sequence[Column],
                       n_boundaries: int, orders: Sequence[KeyOrder], out: NDArray[np.uint32],
                       threads: int = 0) -> None:
    """Each row's range destination over host key columns into ``out`` (a NumPy uint32 array):
    the number of boundary rows that sort at or before it. Raises BoundaryOrderError unless the
    boundaries are sorted."""

def range_destinations_cuda(keys: Sequence[Column], n_rows: int, boundaries: Sequence[Column],
                            n_boundaries: int, orders: Sequence[KeyOrder],
                            out: NDArray[np.uint32], stream: int = 0) -> None:
    """The same for device columns, into ``out`` (a CuPy uint32 array), enqueued on ``stream``.
    The boundaries' order is not checked: check_boundaries does it on a host copy."""

def check_boundaries(boundaries: Sequence[Column], n_boundaries: int,
                     orders: Sequence[KeyOrder]) -> None:
    """Raise BoundaryOrderError unless the host boundary columns are sorted in ``orders``."""

class HostPartition:
    """Partition-and-pack of host columns on ``threads`` threads (0: one per core), by the hash
    of key columns or (by_destinations) to given destinations. Constructing it runs pass one
    (destinations and counts); scatter(out) runs pass two."""

    def __init__(self, columns: Sequence[Column], key_columns: Sequence[int], n_rows: int,
                 n_destinations: int, threads: int = 0) -> None: ...
    @staticmethod
    def by_destinations(columns: Sequence[Column], destinations: NDArray[Any], n_rows: int,
                        n_destinations: int, threads: int = 0) -> HostPartition:
        """Pass one with row r sent to destinations[r] (a 1-D NumPy integer array)."""
    def scatter(self, out: NDArray[np.uint8]) -> None:
        """Pass two: write every byte of out[:total_bytes] (a writable NumPy uint8 array)."""
    @property
    def total_bytes(self) -> int: ...
    @property
    def output_bound(self) -> int:
        """Bytes that hold the packed output however the rows fall, known before the count: -1
        for tables with string columns."""
    @property
    def rows(self) -> NDArray[np.int64]: ...
    @property
    def byte_offsets(self) -> NDArray[np.int64]: ...
    @property
    def pieces(self) -> NDArray[np.int64]: ...
    @property
    def chars(self) -> NDArray[np.int64]: ...

class CudaPartition:
    """Partition-and-pack of device columns, by the hash of key columns or (by_destinations) to
    given destinations, in two passes on a caller-given stream."""

    def __init__(self, columns: Sequence[Column], key_columns: Sequence[int], n_rows: int,
                 n_destinations: int) -> None: ...
    @staticmethod
    def by_destinations(columns: Sequence[Column], destinations: NDArray[Any], n_rows: int,
                        n_destinations: int) -> CudaPartition:
        """With row r sent to destinations[r] (a 1-D CuPy integer array)."""
    @property
    def scratch_bytes(self) -> int: ...
    @property
    def totals_size(self) -> int: ...
    def count(self, scratch: NDArray[np.uint8], stream: int = 0,
              totals: NDArray[np.int64] | None = None) -> None:
        """Pass one, queued on ``stream``, into ``scratch`` (a CuPy uint8 array); its totals
        come back into ``totals`` (a host int64 array of totals_size) or this object's own."""
    def scatter(self, out: NDArray[np.uint8], stream: int = 0) -> None:
        """Pass two, enqueued on ``stream``: write every byte of out[:total_bytes] (a CuPy uint8
        array, 64-byte aligned)."""
    @property
    def total_bytes(self) -> int: ...
    @property
    def output_bound(self) -> int: ...
    @property
    def rows(self) -> NDArray[np.int64]: ...
    @property
    def byte_offsets(self) -> NDArray[np.int64]: ...
    @property
    def pieces(self) -> NDArray[np.int64]: ...
    @property
    def chars(self) -> NDArray[np.int64]: ...
