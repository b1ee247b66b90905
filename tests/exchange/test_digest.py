"""gpuframe.exchange.digest: equal keys get equal digests, in every process, and a hash split of
object and decimal keys puts the rows that pandas would join in one bucket."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from gpuframe.exchange.digest import (
    UnhashableKeyError,
    digest_keys,
    object_digest,
    value_digest,
)
from gpuframe.exchange.pack import hash_split
from gpuframe.exchange.row_hashes import hash_rows

EQUAL_VALUES = [
    [1, 1.0, True, Decimal("1"), Decimal("1.000"), Fraction(1), np.int8(1), np.uint64(1),
     np.float32(1.0), np.True_, complex(1, 0)],
    [Decimal("1.5"), Decimal("1.50"), 1.5, Fraction(3, 2), np.float16(1.5)],
    [0, 0.0, -0.0, False, Decimal("-0")],
    ["1"], [b"1"], ["a"],
    [datetime.datetime(2020, 1, 2, 3), pd.Timestamp("2020-01-02 03:00"),
     np.datetime64("2020-01-02T03:00")],
    [datetime.datetime(2020, 1, 2, 3, tzinfo=datetime.timezone.utc),
     pd.Timestamp("2020-01-02 04:00", tz="Europe/Berlin")],
    [datetime.date(2020, 1, 2)],
    [datetime.timedelta(seconds=90), pd.Timedelta(90, "s"), np.timedelta64(90, "s")],
    [(1, "a"), (1.0, "a"), (True, "a")],
    [frozenset({"a", "b", 1}), frozenset({1.0, "b", "a"})],
    [float("inf"), Decimal("Infinity")],
]
"""Groups of values that compare equal in Python, none equal to another group's."""


def equal(a, b) -> bool:
    """``a == b``, asked the other way round where Decimal refuses a NumPy integer."""
    try:
        return bool(a == b)
    except TypeError:
        return bool(b == a)


def test_values_that_compare_equal_have_one_digest():
    for group in EQUAL_VALUES:
        assert all(equal(a, b) for a in group for b in group), group
        assert len({value_digest(v) for v in group}) == 1, group


def test_values_that_differ_have_distinct_digests():
    digests = [value_digest(group[0]) for group in EQUAL_VALUES]
    assert len(set(digests)) == len(digests)


def test_missing_values_are_null():
    for missing in (None, float("nan"), np.float32("nan"), Decimal("NaN"), Decimal("sNaN"),
                    pd.NA, pd.NaT, np.datetime64("NaT")):
        assert value_digest(missing) is None, missing
    digests = object_digest(np.array([None, 1, float("nan")], dtype=object))
    assert digests.type == pa.uint64() and digests.null_count == 2


def test_digests_are_the_same_in_every_process():
    """Python salts the hash of strings per process; the digests of strings do not change."""
    values = ("a", b"a", ("x", 1), 1.5, "é", frozenset("abcdefgh"))
    code = ("from gpuframe.exchange.digest import value_digest; "
            f"print(hash('a'), [value_digest(v) for v in {values!r}])")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": "1"}).stdout
    salt, digests = other.split(" ", 1)
    assert int(salt) != hash("a")  # the two processes hash strings differently
    assert digests.strip() == str([value_digest(v) for v in values])


def test_unhashable_values_are_refused_naming_the_column():
    frame = pd.DataFrame({"k": pd.Series([[1], [2]], dtype=object)})
    with pytest.raises(UnhashableKeyError, match=r"key column 'k'.*list"):
        digest_keys(frame, ["k"])


def test_only_object_and_decimal_keys_are_digested():
    frame = pd.DataFrame({"o": pd.Series([1, "1"], dtype=object), "i": [1, 2],
                          "d": pd.Series([Decimal("1.5"), None],
                                         dtype=pd.ArrowDtype(pa.decimal128(5, 2)))})
    digested, keys, added = digest_keys(frame, ["i", "o", "d"])
    assert keys[0] == "i" and keys[1:] == added and len(added) == 2
    assert list(digested.columns) == ["o", "i", "d", *added]
    assert digest_keys(frame, ["i"])[0] is frame


def test_equal_decimals_of_one_type_have_one_digest_and_nulls_none():
    kind = pa.decimal128(20, 4)
    array = pa.array([Decimal("1.5"), Decimal("-2"), None, Decimal("1.5000"),
                      Decimal("12345678901234.5678")], kind)
    table = pa.table({"k": array.slice(1)})  # an offset into the buffer
    _, keys, _ = digest_keys(table, ["k"])
    digested = digest_keys(table, ["k"])[0].column(keys[0]).to_pylist()
    assert digested[1] is None and digested[0] != digested[2]
    whole = digest_keys(pa.table({"k": array}), ["k"])
    values = whole[0].column(whole[1][0]).to_pylist()
    assert values[0] == values[3] and values[1:] == digested


def test_a_hash_split_puts_equal_object_keys_in_one_bucket():
    """And keeps each object column's values as they are (Decimals, mixed types), not as
    Arrow would convert them."""
    keys = [1, 1.0, True, Decimal("1"), "1", b"1", Decimal("2.5"), 2.5, None, float("nan"),
            (1, "a"), (True, "a")]
    frame = pd.DataFrame({"k": pd.Series(keys * 5, dtype=object),
                          "other": pd.Series([Decimal("0.10"), "x", 3] * 20, dtype=object),
                          "row": np.arange(60)})
    parts = hash_split(frame, ["k"], 7)
    assert sum(len(p) for p in parts) == 60
    bucket = {}
    for b, part in enumerate(parts):
        assert part.dtypes.tolist() == frame.dtypes.tolist()
        for row, key, other in zip(part["row"], part["k"], part["other"]):
            assert other is frame["other"][row] and key is frame["k"][row]
            group = "missing" if pd.isna(key) else value_digest(key)
            assert bucket.setdefault(group, b) == b, key
    assert len(bucket) == 6  # 1, "1", b"1", 2.5, the tuple, missing


def test_object_rows_hash_as_the_split_places_them():
    frame = pd.DataFrame({"k": pd.Series([1, 1.0, "a", None], dtype=object), "j": [5, 5, 6, 7]})
    hashes = hash_rows(frame, ["k", "j"])
    assert hashes[0] == hashes[1] and len(set(hashes.tolist())) == 3
