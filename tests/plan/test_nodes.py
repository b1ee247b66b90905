"""Plan nodes' schemas: columns selected by position give what pandas' selection by label gives."""

import pandas as pd
import pyarrow as pa
import pytest

from gpuframe.errors import UnknownColumnError
from gpuframe.plan.nodes import selected


def test_selected_columns_are_pandas_own_selection():
    meta = pd.DataFrame({"a": pd.Series(dtype="int64"), "s": pd.Series(dtype="str"),
                         "d": pd.Series(dtype=pd.ArrowDtype(pa.decimal128(15, 2))),
                         "t": pd.Series(dtype="datetime64[ns, UTC]")})
    for names in (["t", "a"], ["s"], ["a", "s", "d", "t"], []):
        pd.testing.assert_frame_equal(selected(meta, names, "select"), meta[names])
    twice = pd.DataFrame([[1, 2, 3]], columns=["a", "a", "b"])  # pandas keeps both a's
    pd.testing.assert_frame_equal(selected(twice, ["a"], "select"), twice[["a"]])
    with pytest.raises(UnknownColumnError, match=r"select: column\(s\) \['x'\]"):
        selected(meta, ["a", "x"], "select")
