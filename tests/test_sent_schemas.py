"""Empty frames in a task's state pickle as their schemas and come back as the same frames."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from gpuframe.sent_schemas import SendsSchemas, SentSchema


@dataclass(frozen=True)
class TaskState(SendsSchemas):
    name: str
    meta: pd.DataFrame
    sides: tuple[pd.DataFrame, pd.DataFrame]


def empty(**dtypes: object) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in dtypes.items()})


MANY = empty(i="int64", s="str", o=object, b=bool, d="datetime64[us]", z="datetime64[ns, UTC]",
             c=pd.CategoricalDtype(["x", "y"]), n="Int64", t="timedelta64[ns]",
             dec=pd.ArrowDtype(pa.decimal128(12, 2)), f="float32")


def test_empty_frames_come_back_equal_and_shared():
    state = TaskState("join", MANY, (empty(k="int64"), pd.DataFrame(columns=["k", "v"])))
    data = pickle.dumps(state)
    assert b"DataFrame" not in data  # the frames went as schemas
    again = pickle.loads(data)
    assert again.name == "join" and type(again) is TaskState
    for got, sent in zip((again.meta, *again.sides), (state.meta, *state.sides)):
        pd.testing.assert_frame_equal(got, sent, check_column_type=True, check_index_type=True)
        assert list(got.dtypes) == list(sent.dtypes)
    # rebuilt once per process and schema: a second task's state shares the frame
    assert pickle.loads(pickle.dumps(state)).meta is again.meta


@pytest.mark.parametrize("frame", [
    pd.DataFrame({"k": [1, 2], "v": ["a", "b"]}),                     # rows
    empty(k="int64").set_index(pd.Index([], dtype="int64", name="k")),  # an index of its own
    pd.DataFrame(columns=pd.MultiIndex.from_tuples([("a", "b")])),     # nested columns
    pd.DataFrame(np.empty((0, 2)), columns=["k", "k"]),                # repeated names
], ids=["rows", "index", "multiindex", "repeated"])
def test_other_frames_go_as_themselves(frame):
    state = TaskState("other", frame, (frame, frame))
    again = pickle.loads(pickle.dumps(state))
    pd.testing.assert_frame_equal(again.meta, frame)
    pd.testing.assert_frame_equal(again.sides[1], frame)


class Pair(NamedTuple):
    left: str
    right: str


def test_named_tuples_and_other_fields_keep_their_types():
    state = TaskState("x", MANY, Pair("l", "r"))  # type: ignore[arg-type]
    again = pickle.loads(pickle.dumps(state))
    assert type(again.sides) is Pair and again.sides.left == "l"


def test_a_sent_schema_is_small_and_names_the_columns():
    data = pickle.dumps(TaskState("x", MANY, (MANY, MANY)))
    assert len(data) < len(pickle.dumps({"meta": MANY, "sides": (MANY, MANY)}))
    schema = SentSchema(tuple(zip(MANY.columns, MANY.dtypes)), MANY.columns.dtype)
    assert pickle.loads(pickle.dumps(schema)) == schema
