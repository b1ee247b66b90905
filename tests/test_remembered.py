"""The memo of schema work: found once per key, failures found again, the oldest forgotten past
its bound, and schema keys that tell dtypes apart."""

import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pyarrow as pa
import pytest

from gpuframe import remembered as memo


def test_a_key_is_found_once_and_a_failure_again(monkeypatch):
    monkeypatch.setattr(memo, "_found", {})
    calls = []
    for _ in range(3):
        assert memo.remembered(("k",), lambda: calls.append(1) or "value") == "value"
    assert calls == [1]

    def failing():
        calls.append(2)
        raise ValueError("no")

    for _ in range(2):
        with pytest.raises(ValueError):
            memo.remembered(("bad",), failing)
    assert calls == [1, 2, 2]


def test_the_oldest_keys_are_forgotten_past_the_bound(monkeypatch):
    monkeypatch.setattr(memo, "_found", {})
    monkeypatch.setattr(memo, "KEPT", 3)
    for i in range(5):
        memo.remembered((i,), lambda i=i: i)
    assert list(memo._found) == [(2,), (3,), (4,)]


def test_threads_finding_at_once_get_their_answers_and_the_bound_holds(monkeypatch):
    """Threads (the client's, a worker's loop and task threads) remember at once past the
    bound: none fails, each gets its key's answer."""
    monkeypatch.setattr(memo, "_found", {})
    monkeypatch.setattr(memo, "KEPT", 4)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        def remember(thread: int) -> bool:
            return all(memo.remembered((i % 16,), lambda i=i: i % 16) == i % 16
                       for i in range(thread, thread + 3000))

        with ThreadPoolExecutor(8) as pool:
            assert all(pool.map(remember, range(8)))
    finally:
        sys.setswitchinterval(interval)
    assert len(memo._found) <= 4


def test_of_two_threads_finding_one_key_both_get_the_first_answer(monkeypatch):
    """Each thread finds outside the lock (a find may ask for other keys); the answer stored
    first is the one both get, so frames stay shared."""
    monkeypatch.setattr(memo, "_found", {})
    inside, stored = threading.Event(), threading.Event()
    got = {}

    def slow():
        inside.set()
        assert stored.wait(30)
        return ["slow"]

    first = threading.Thread(target=lambda: got.update(slow_thread=memo.remembered(("k",), slow)))
    first.start()
    assert inside.wait(30)
    fast = memo.remembered(("k",), lambda: ["fast"])
    stored.set()
    first.join(timeout=30)
    assert fast == ["fast"] and got["slow_thread"] is fast


def test_schema_keys_tell_zones_units_and_categories_apart():
    def key(dtype):
        return memo.schema_key(pd.DataFrame({"a": pd.Series([], dtype=dtype)}))

    dtypes = ["int64", "int32", "datetime64[ns]", "datetime64[us]", "datetime64[ns, UTC]",
              "datetime64[ns, Europe/Paris]", pd.CategoricalDtype(["x"]),
              pd.CategoricalDtype(["y"]), pd.ArrowDtype(pa.decimal128(10, 2)),
              pd.ArrowDtype(pa.decimal128(12, 2)), "str", object]
    assert len({key(dtype) for dtype in dtypes}) == len(dtypes)
    assert key("int64") == key("int64")
    assert memo.schema_key(pd.DataFrame(columns=["a", "b"])) != memo.schema_key(
        pd.DataFrame(columns=["b", "a"]))


def test_a_frame_s_schema_key_is_read_once_while_kept(monkeypatch):
    monkeypatch.setattr(memo, "_of", {})
    monkeypatch.setattr(memo, "KEPT", 2)
    frames = [pd.DataFrame({"a": pd.Series([], dtype="int64"), "b": pd.Series([], dtype="str")})
              for _ in range(3)]
    first = memo.schema_key(frames[0])
    assert memo.schema_key(frames[0]) is first
    assert memo.schema_key(frames[1]) == first and memo.schema_key(frames[1]) is not first
    memo.schema_key(frames[2])
    assert len(memo._of) == 2 and ("schema key", id(frames[0])) not in memo._of  # the oldest
    assert memo.schema_key(frames[0]) == first


def test_an_answer_of_a_thing_is_its_own_whatever_its_id_became(monkeypatch):
    monkeypatch.setattr(memo, "_of", {})
    calls = []

    def find(thing):
        calls.append(thing)
        return len(thing)

    first = [1, 2]
    assert memo.remembered_of("length", first, find) == 2
    assert memo.remembered_of("length", first, find) == 2 and calls == [first]
    other = [1, 2, 3]
    # as if ``other`` had come at a forgotten thing's address: the answer kept there is not
    # its own
    memo._of[("length", id(other))] = ([9], 1)
    assert memo.remembered_of("length", other, find) == 3 and calls == [first, other]


def test_a_frame_s_column_names_are_read_once_and_a_node_s_columns_are_its_own_list(
        monkeypatch):
    from gpuframe.plan.nodes import FromPandas

    monkeypatch.setattr(memo, "_of", {})
    frame = pd.DataFrame({"b": pd.Series([], dtype="str"), "a": [], 3: []})
    names = memo.column_names(frame)
    assert names == ("b", "a", 3) and memo.column_names(frame) is names
    node = FromPandas(pd.DataFrame({"x": [1], "y": ["z"]}), 1)
    columns = node.columns
    columns.append("w")  # a caller's list to change: the node's stay
    assert node.columns == ["x", "y"]
