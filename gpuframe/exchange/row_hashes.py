"""Each row's 64-bit hash of its keys, the one the exchange packs rows by, and what is counted
from the hashes: a join's sample of its keys (:mod:`~gpuframe.operators.skew`), the rows one key
holds of a side copied without a sample (:func:`longest_repeat`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .digest import digest_keys
from .pack import _as_arrow, _host_column, _is_cudf, _is_pandas
from .pack_device import _device_arg, _device_columns
from .pack_layout import _check_threads, _key_indices, _key_list


def hash_rows(table: Any, on: Sequence[str], *, threads: int | None = None) -> Any:
    """The 64-bit hash of each row's keys, exactly as :func:`~.pack.hash_pack` computes it: a NumPy
    array for a pyarrow Table or pandas DataFrame, a CuPy array for a cuDF DataFrame."""
    from .. import _core

    table, on, _ = digest_keys(table, _key_list(on))
    if _is_cudf(table):
        import cupy

        columns = _device_columns(table)
        keys = _key_indices([name for name, _ in columns], on)
        out = cupy.empty(len(table), dtype=cupy.uint64)
        _core.hash_rows_cuda([_device_arg(*columns[k]) for k in keys], len(table), out,
                             cupy.cuda.get_current_stream().ptr)
        return out
    table = _as_arrow(table[on] if _is_pandas(table) else table)
    keys = _key_indices(table.schema.names, on)
    args = [_host_column(table.schema.field(i), table.column(i))[1] for i in keys]
    return _core.hash_rows(args, table.num_rows, _check_threads(threads))


def longest_repeat(hashes: Any) -> int:
    """The most times one value occurs in ``hashes`` (a NumPy or CuPy array, not empty). On a
    GPU, the native core sorts them and measures the longest run: CuPy's elementwise kernels
    would be compiled at run time on a worker's first query, and cuDF's ``value_counts`` names
    its result through a pandas index built on the host; on the host, pandas' hash table, which
    needs no sort."""
    if isinstance(hashes, np.ndarray):
        import pandas as pd

        return int(pd.Series(hashes).value_counts(sort=False).max())
    import cupy

    from .. import _core

    hashes = cupy.ascontiguousarray(hashes, dtype=cupy.uint64)
    scratch = cupy.empty(_core.longest_repeat_scratch_bytes(len(hashes)), dtype=cupy.uint8)
    return _core.longest_repeat_cuda(hashes, cupy.empty_like(hashes), scratch,
                                     cupy.cuda.get_current_stream().ptr)
