import numpy as np
import pandas as pd

from gpuframe.plan.aggregate import Aggregation, aggregate_schema


def test_schema_is_pandas_and_depends_only_on_the_columns_read():
    aggs = (Aggregation("total", "x", "sum"), Aggregation("avg", "x", "mean"),
            Aggregation("n", None, "size"))
    small = pd.DataFrame({"k": pd.Series([], dtype="int32"), "x": pd.Series([], dtype="int8")})
    wide = small.assign(other=pd.Series([], dtype="str"))
    floats = small.astype({"x": "float32"})
    first = aggregate_schema(small, ["k"], aggs)
    assert first.dtypes.to_dict() == {"k": np.dtype("int32"), "total": np.dtype("int64"),
                                      "avg": np.dtype("float64"), "n": np.dtype("int64")}
    # A column no aggregate reads does not change the answer; another dtype of one read does.
    pd.testing.assert_frame_equal(aggregate_schema(wide, ["k"], aggs), first)
    assert aggregate_schema(floats, ["k"], aggs)["total"].dtype == np.dtype("float32")
    # Each caller gets a frame of its own: changing one leaves the next answer as it was.
    first["extra"] = 1
    assert list(aggregate_schema(small, ["k"], aggs).columns) == ["k", "total", "avg", "n"]
