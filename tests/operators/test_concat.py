import numpy as np
import pandas as pd
import pytest

import gpuframe
from gpuframe.errors import OptionError
from gpuframe.ordering import concat, sort_values
from gpuframe.plan.concat import ConcatSchemaError


def assert_concat_like_pandas(pieces, npartitions=(2, 1, 3)):
    frames = [gpuframe.from_pandas(p, npartitions=k) for p, k in zip(pieces, npartitions)]
    result = concat(frames)
    expected = pd.concat(pieces, ignore_index=True)
    assert result.meta.dtypes.to_dict() == expected.dtypes.to_dict()
    pd.testing.assert_frame_equal(result.to_pandas().reset_index(drop=True), expected)
    return result


def test_same_schemas_keep_their_partitions_in_order(engine):
    a = pd.DataFrame({"k": np.arange(10), "s": pd.array(list("abcdefghij"), dtype="str")})
    b = pd.DataFrame({"k": np.arange(10, 13), "s": pd.array(list("xyz"), dtype="str")})
    result = assert_concat_like_pandas([a, b, a], npartitions=(2, 1, 3))
    assert result.npartitions == 6


def test_missing_columns_are_filled_and_types_promoted(engine):
    a = pd.DataFrame({"k": np.arange(4), "x": np.arange(4, dtype="int32"),
                      "flag": [True, False, True, True]})
    b = pd.DataFrame({"x": np.linspace(0, 1, 3), "t": pd.to_datetime(["2024-01-01"] * 3)})
    assert_concat_like_pandas([a, b], npartitions=(2, 2))


def test_empty_inputs_and_partitions(engine):
    a = pd.DataFrame({"k": np.arange(3)})
    empty = pd.DataFrame({"k": pd.Series([], dtype="float64"), "v": pd.Series([], dtype="str")})
    assert_concat_like_pandas([a, empty], npartitions=(3, 2))


def test_concat_then_sort(engine):
    a = pd.DataFrame({"k": [5, 1, 3]})
    b = pd.DataFrame({"k": [4, 2, 0]})
    frame = sort_values(concat([gpuframe.from_pandas(a), gpuframe.from_pandas(b)]), "k")
    assert frame.to_pandas()["k"].tolist() == [0, 1, 2, 3, 4, 5]


def test_refuses_columns_only_objects_could_hold(engine):
    a = gpuframe.from_pandas(pd.DataFrame({"k": [1, 2]}))
    b = gpuframe.from_pandas(pd.DataFrame({"k": pd.array(["x"], dtype="str")}))
    with pytest.raises(ConcatSchemaError, match="'k'"):
        concat([a, b])
    with pytest.raises(OptionError):
        concat([])


@pytest.mark.gpu
def test_concat_on_gpus():
    a = pd.DataFrame({"k": np.arange(4), "flag": [True, False, True, True]})
    b = pd.DataFrame({"k": np.linspace(0, 1, 3), "s": pd.array(list("xyz"), dtype="str")})
    with gpuframe.start_cluster(backend="cudf") as engine:
        frames = [gpuframe.from_pandas(p, npartitions=2, engine=engine) for p in (a, b)]
        result = concat(frames)
        assert result.to_pandas().dtypes.to_dict() == result.meta.dtypes.to_dict()
        assert len(result.to_pandas()) == 7


def test_a_frame_with_itself_runs_it_once(engine):
    a = pd.DataFrame({"k": np.arange(5)})
    frame = gpuframe.from_pandas(a, npartitions=2)
    doubled = concat([frame, frame])
    assert doubled.futures[:2] == doubled.futures[2:]
    pd.testing.assert_frame_equal(doubled.to_pandas().reset_index(drop=True),
                                  pd.concat([a, a], ignore_index=True))
