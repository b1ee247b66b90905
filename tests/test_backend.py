import pandas as pd
import pyarrow as pa
import pytest

from gpuframe.backend import get_backend
from gpuframe.errors import BackendError

FRAME = pd.DataFrame({"k": [1, 2, None], "s": ["a", None, "c"],
                      "t": pd.to_datetime(["2024-01-01", None, "2024-01-03"])})


def test_pandas_backend_round_trips_through_arrow():
    backend = get_backend("pandas")
    table = backend.to_arrow(backend.from_pandas(FRAME))
    assert isinstance(table, pa.Table)
    pd.testing.assert_frame_equal(backend.to_pandas(backend.from_arrow(table)), FRAME,
                                  check_dtype=False)


def test_pandas_backend_keeps_decimals_arrow_backed():
    from decimal import Decimal

    table = pa.table({"price": pa.array([Decimal("1.25"), None, Decimal("-3.50")],
                                        pa.decimal128(10, 2)), "n": [1, 2, 3]})
    frame = get_backend("pandas").from_arrow(table)
    assert frame["price"].dtype == pd.ArrowDtype(pa.decimal128(10, 2))
    assert frame["price"].tolist()[::2] == [Decimal("1.25"), Decimal("-3.50")]
    assert frame["price"].isna().tolist() == [False, True, False]
    assert frame["n"].dtype == "int64"


def test_concat_and_nbytes():
    backend = get_backend("pandas")
    both = backend.concat([FRAME, FRAME])
    assert len(both) == 6
    numbers = pd.DataFrame({"a": range(1000)}, dtype="int64")
    assert 8000 <= backend.nbytes(numbers) < 8200


def test_unknown_backend_is_named():
    with pytest.raises(BackendError, match="'polars'.*cudf, pandas"):
        get_backend("polars")


@pytest.mark.gpu
def test_cudf_backend_round_trips():
    backend = get_backend("cudf")
    gpu_frame = backend.from_pandas(FRAME)
    assert type(gpu_frame).__module__.startswith("cudf")
    pd.testing.assert_frame_equal(backend.to_pandas(gpu_frame), FRAME, check_dtype=False)
    assert backend.to_arrow(gpu_frame).num_rows == 3


@pytest.mark.gpu
def test_dask_sizes_cudf_frames_by_their_device_bytes():
    from dask.sizeof import sizeof

    gpu_frame = get_backend("cudf").from_pandas(pd.DataFrame({"k": range(100_000)}))
    assert 800_000 <= sizeof(gpu_frame) < 1_000_000
    assert 800_000 <= sizeof(gpu_frame["k"]) < 1_000_000
