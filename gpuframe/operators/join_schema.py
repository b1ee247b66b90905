"""The types of a join's keys and of its result, as ``pandas.merge`` (and cuDF's merge) give them.

Key columns are cast to one type that holds both sides' values exactly (:func:`hash_type`) before
hashing, so equal values hash equally whatever their width, and the result's keys are cast back to
the dtypes ``pandas.merge`` gives them; pairs of types that no type holds exactly, or that pandas
would not join, raise :class:`~gpuframe.errors.JoinError` naming both columns.

The result's schema (:func:`result_meta`) is computed from the two schemas on the client, and each
joined partition is cast to it on its worker (:func:`conform`), so that every partition, and the
frame they gather into, has the dtypes the join reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pandas.core.dtypes.cast import find_common_type
from pandas.errors import MergeError

from ..backend import Backend, get_backend
from ..errors import JoinError
from ..remembered import remembered, schema_key

HOWS = ("inner", "left", "right", "outer", "cross", "left_anti", "right_anti", "leftsemi",
        "leftanti")
BASE_HOWS = {"left_anti": "left", "right_anti": "right"}
"""The join whose key types and schema an anti join takes: it keeps some of that join's rows."""
VALIDATIONS = {"one_to_one": (True, True), "1:1": (True, True),
               "one_to_many": (True, False), "1:m": (True, False),
               "many_to_one": (False, True), "m:1": (False, True),
               "many_to_many": (False, False), "m:m": (False, False)}
"""``validate=``'s values: whether the (left, right) keys must be unique."""


class KeysNotUniqueError(JoinError, MergeError):
    """``validate=`` found a side whose keys repeat (pandas' MergeError, so pandas code that
    catches it catches this)."""


def unique_sides(validate: str | None) -> tuple[bool, bool]:
    """Whether ``validate=`` asks the left, and the right, side's keys to be unique."""
    if validate is None:
        return (False, False)
    if validate not in VALIDATIONS:
        raise JoinError(f"validate={validate!r} is not a valid argument; choose one of "
                        f"{', '.join(VALIDATIONS)}")
    return VALIDATIONS[validate]


PANDAS = get_backend("pandas")


def join_keys(left: pd.DataFrame, right: pd.DataFrame, on: Any, left_on: Any,
              right_on: Any) -> tuple[list[str], list[str]]:
    """The key columns of each side, checked to exist; the error names the side and column."""
    if on is not None and (left_on is not None or right_on is not None):
        raise JoinError("give on=, or left_on= and right_on=, not both")
    if on is None and (left_on is None) != (right_on is None):
        raise JoinError("left_on= and right_on= go together")
    if on is None and left_on is None:
        shared = [c for c in left.columns if c in right.columns]
        if not shared:
            raise JoinError("no on= given and the two frames share no column to join on")
        on = shared
    left_keys = _as_list(on if on is not None else left_on)
    right_keys = _as_list(on if on is not None else right_on)
    if len(left_keys) != len(right_keys):
        raise JoinError(f"left_on={left_keys} and right_on={right_keys} differ in length")
    for side, keys, frame in (("left", left_keys, left), ("right", right_keys, right)):
        missing = [k for k in keys if k not in frame.columns]
        if missing:
            raise JoinError(f"key column(s) {missing} not in the {side} frame, whose columns are "
                            f"{list(frame.columns)}")
    return left_keys, right_keys


@dataclass(frozen=True)
class KeyTypes:
    """The dtypes a join gives its key columns.

    ``left``/``right``: per side, {column: dtype} casts to one *hash type* per key pair, which
    holds every value of both sides exactly, so equal keys hash and compare equally whatever
    their width, sign, nullability or categories. ``result``: {output column: dtype} the result
    is cast back to afterwards, the dtype ``pandas.merge`` gives that column where no row is
    unmatched (:func:`result_meta` adds what unmatched rows change).
    """

    left: dict[str, Any]
    right: dict[str, Any]
    result: dict[str, Any]


def key_types(left: pd.DataFrame, right: pd.DataFrame, left_keys: list[str],
              right_keys: list[str], how: str, suffixes: tuple[Any, Any], backend: Backend,
              empty: frozenset[str] = frozenset()) -> KeyTypes:
    """The key casts of a join of schemas ``left`` and ``right`` on ``backend``, of which the
    sides named in ``empty`` ('left', 'right') have no partitions; :class:`JoinError` names the
    pair of columns that no type holds exactly."""
    anti, how = how, BASE_HOWS.get(how, how)
    left_casts: dict[str, Any] = {}
    right_casts: dict[str, Any] = {}
    result: dict[str, Any] = {}
    shared = {lk for lk, rk in zip(left_keys, right_keys) if lk == rk}
    for lk, rk in zip(left_keys, right_keys):
        ltype, rtype = left[lk].dtype, right[rk].dtype
        common = hash_type(ltype, rtype, backend)
        if common is None:
            raise JoinError(f"cannot join left column {lk!r} ({ltype}) with right column "
                            f"{rk!r} ({rtype}): {_why_not(ltype, rtype)}")
        if ltype != common:
            left_casts[lk] = common
        if rtype != common:
            right_casts[rk] = common
        if how in ("leftsemi", "leftanti"):
            result[lk] = ltype
        elif lk == rk and anti in BASE_HOWS:
            result[lk] = _anti_key_type(ltype, rtype, anti, empty)
        elif lk == rk:
            result[lk] = _merged_key_type(ltype, rtype, how, empty)
        else:
            lname = _output_name(lk, right.columns, shared, suffixes[0])
            rname = _output_name(rk, left.columns, shared, suffixes[1])
            # pandas coerces the columns of the left key's name: a right key of another name
            # keeps its dtype.
            result[lname], result[rname] = _coerced(ltype, rtype), rtype
    return KeyTypes(left_casts, right_casts, result)


def result_meta(left: pd.DataFrame, right: pd.DataFrame, how: str, left_keys: list[str],
                right_keys: list[str], suffixes: tuple[Any, Any], types: KeyTypes,
                backend: Backend, empty: frozenset[str] = frozenset(),
                indicator: str | None = None) -> pd.DataFrame:
    """The schema of a join of schemas ``left`` and ``right`` on ``backend``: an empty frame with
    the dtypes that ``backend.to_pandas`` gives its partitions once :func:`conform` has cast them.

    pandas types a column that unmatched rows fill by the data (an int one stays int64 where
    every row matches and turns float64 where one does not), so partitions would differ. The rule
    here is the same for all: a column that unmatched rows may fill (the right side's in a left
    or outer join, the left side's in a right or outer join) takes the dtype in which the backend
    holds missing values (:meth:`~gpuframe.backend.Backend.missing_dtype`), as pandas types a
    join with unmatched rows, unless the side those rows would come from is in ``empty`` (has no
    partitions). A key that both sides share by name takes its values from either side and keeps
    its key type.
    """
    joined = PANDAS.join(left.astype(types.left), right.astype(types.right), how, left_keys,
                         right_keys, suffixes, indicator)
    shared = {lk for lk, rk in zip(left_keys, right_keys) if lk == rk}
    base = BASE_HOWS.get(how, how)
    filled = {"left": base in ("right", "outer") and "right" not in empty,
              "right": base in ("left", "outer") and "left" not in empty}
    # pandas.merge puts all of the left side's columns first, then the right side's.
    sides = ["left"] * len(left.columns) + ["right"] * (len(joined.columns) - len(left.columns))
    dtypes = []
    for (name, dtype), side in zip(joined.dtypes.items(), sides):
        dtype = types.result.get(name, dtype)
        if _is_object(dtype) and not backend.holds_objects:
            # a key of integers joined with an object or bool key: pandas gives objects, a
            # backend without them the key's hash type
            dtype = types.left.get(name, types.right.get(name, dtype))
        dtypes.append(backend.missing_dtype(dtype) if filled[side] and name not in shared
                      else dtype)
    return pd.DataFrame({i: pd.Series(dtype=dtype) for i, dtype in enumerate(dtypes)}
                        ).set_axis(joined.columns, axis=1)


def join_schema(left: pd.DataFrame, right: pd.DataFrame, how: str, left_keys: list[str],
                right_keys: list[str], suffixes: tuple[Any, Any], backend: Backend,
                empty: frozenset[str] = frozenset(), indicator: str | None = None
                ) -> tuple[KeyTypes, pd.DataFrame]:
    """:func:`key_types` and :func:`result_meta` of a join, remembered by the inputs' schemas
    (:mod:`~gpuframe.remembered`): the optimizer rebuilds a join node at each rewrite of its
    inputs, and result_meta (a pandas merge of empty frames) took about as long as planning
    the rest of a join. Callers share the returned frame and must not change it."""
    key = ("join", schema_key(left), schema_key(right), how, tuple(left_keys),
           tuple(right_keys), tuple(suffixes), backend.name, empty, indicator)

    def find() -> tuple[KeyTypes, pd.DataFrame]:
        types = key_types(left, right, left_keys, right_keys, how, suffixes, backend, empty)
        return types, result_meta(left, right, how, left_keys, right_keys, suffixes, types,
                                  backend, empty, indicator)

    return remembered(key, find)


def conform(frame: Any, meta: pd.DataFrame, backend: Backend) -> Any:
    """``frame``, one partition of a join's result, cast to the dtypes of ``meta``
    (:func:`result_meta`), whether or not its own rows needed them: keys back from their hash
    types, and the columns that unmatched rows may fill in the dtype that holds missing values
    even where every row of this partition matched. Columns come in ``meta``'s order: cuDF's
    right join puts the key first, where pandas keeps the left side's columns first."""
    if list(frame.columns) != list(meta.columns):
        frame = frame[list(meta.columns)]
    return backend.astype(frame, list(meta.dtypes))


def hash_type(a: Any, b: Any, backend: Backend) -> Any:
    """One dtype that holds every value of dtypes ``a`` and ``b`` exactly, or None.

    Integers take the narrowest integer type that holds both (int8 and uint8: int16), nullable
    when either side is. uint64 with a signed integer has none: float64, pandas' type for the
    pair, merges distinct keys above 2**53 (2**53 + 1 == 2**53), and int64 wraps those above
    2**63 onto negative ones, while pandas.merge compares the pair exactly, so such a join is
    refused rather than wrong. Integers with floats compare as floats, as pandas compares them.
    Categoricals join by their values; strings of any storage as ``str``; decimals in the
    narrowest decimal128 that holds both sides' digits (:func:`_common_decimal`); datetimes and
    timedeltas at the finer unit (time-zone-aware ones in UTC, unless both share a zone).

    Where pandas compares a pair as Python objects (an object key with any key but a datetime
    or timedelta one, a bool key with an integer one, a decimal key with a number), both sides
    hash as objects on a ``backend`` that holds them: by value and type, as pandas compares
    them (the exchange hashes them by digest, :mod:`~gpuframe.exchange.digest`). cuDF holds no
    objects: there an object column holds strings, or integers (and nulls), which a join with
    an integer key requires (:meth:`~gpuframe.backend.CudfBackend.held`); bools join integers
    as 0 and 1, hashed as a nullable integer type that holds the integers' values."""
    a, b = _values_type(a), _values_type(b)
    kinds = {_kind(a), _kind(b)}
    if backend.holds_objects and _compared_as_objects(kinds):
        return np.dtype(object)
    loose = _loose_int_pair(a, b)
    if loose is not None:
        return loose
    kinds = {"string" if kind == "object" else kind for kind in kinds}
    if kinds == {"string"}:
        return "str"
    if a == b:
        return a
    nullable = any(isinstance(t, pd.api.extensions.ExtensionDtype) for t in (a, b))
    if kinds <= {"int", "float"}:
        common = np.promote_types(_numpy_type(a), _numpy_type(b))
        if kinds == {"int"} and common.kind == "f":
            return None
        return _nullable(common) if nullable else common
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind == "bool":
        return "boolean" if nullable else np.dtype(bool)
    if kind == "decimal":
        return _common_decimal(a.pyarrow_dtype, b.pyarrow_dtype)
    if kind in ("datetime", "timedelta"):
        return np.promote_types(a, b)
    if kind == "datetimetz":
        unit = np.promote_types(np.dtype(f"M8[{a.unit}]"), np.dtype(f"M8[{b.unit}]"))
        return pd.DatetimeTZDtype(np.datetime_data(unit)[0], a.tz if a.tz == b.tz else "UTC")
    return None


MAX_DECIMAL_DIGITS = 38
"""The most digits a decimal128 holds."""


def _common_decimal(a: pa.Decimal128Type, b: pa.Decimal128Type) -> Any:
    """The narrowest decimal128 that holds every value of ``a`` and ``b`` exactly: the larger
    scale, and the more digits before the point (decimal(15,3) and decimal(15,2): decimal(16,3)),
    so both sides' equal values have equal scaled integers; None where that takes more than
    :data:`MAX_DECIMAL_DIGITS` digits."""
    scale = max(a.scale, b.scale)
    precision = max(a.precision - a.scale, b.precision - b.scale) + scale
    if precision > MAX_DECIMAL_DIGITS:
        return None
    return pd.ArrowDtype(pa.decimal128(precision, scale))


def _compared_as_objects(kinds: set[str]) -> bool:
    """Whether pandas.merge compares keys of these kinds as Python objects, by ``==``."""
    if "object" in kinds:
        return not kinds & {"datetime", "datetimetz", "timedelta"}
    return kinds in ({"bool", "int"}, {"decimal", "int"}, {"decimal", "float"},
                     {"decimal", "bool"})


def _loose_int_pair(a: Any, b: Any) -> Any:
    """The hash type of an integer key joined with an object or a bool key on a backend that
    holds no objects (None for other pairs, and for uint64 with an object column): the integer
    type (at least int64 against an object column, whose integers may be any), nullable, since
    object and boolean keys may hold nulls."""
    for own, other in ((a, b), (b, a)):
        if _kind(own) == "int" and (_is_object(other) or _kind(other) == "bool"):
            common = np.promote_types(_numpy_type(own), np.int64 if _is_object(other)
                                      else np.bool_)
            return None if common.kind == "f" else _nullable(common)
    return None


def _is_object(dtype: Any) -> bool:
    return isinstance(dtype, np.dtype) and dtype.kind == "O"


def _why_not(a: Any, b: Any) -> str:
    """What to tell the user whose key pair :func:`hash_type` refused."""
    if {_kind(a), _kind(b)} == {"int"}:
        return ("no integer type holds every value of both (float64 would merge distinct keys "
                "above 2**53); cast one side, e.g. to int64 where the uint64 values stay below "
                "2**63")
    if {_kind(a), _kind(b)} == {"decimal"}:
        return (f"no decimal128 holds every value of both (more than {MAX_DECIMAL_DIGITS} "
                "digits); cast one side to fewer digits before or after the point")
    return "incompatible key types"


def _values_type(dtype: Any) -> Any:
    """A categorical's values' dtype: keys are hashed and compared by value, not by code."""
    return dtype.categories.dtype if isinstance(dtype, pd.CategoricalDtype) else dtype


def _numpy_type(dtype: Any) -> np.dtype:
    return np.dtype(getattr(dtype, "numpy_dtype", dtype))


def _nullable(dtype: np.dtype) -> Any:
    return pd.api.types.pandas_dtype(
        {"i": "Int", "u": "UInt", "f": "Float"}[dtype.kind] + str(dtype.itemsize * 8))


def _kind(dtype: Any) -> str:
    if _is_object(dtype):
        return "object"
    if isinstance(dtype, pd.ArrowDtype) and pa.types.is_decimal(dtype.pyarrow_dtype):
        return "decimal"
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "int"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if isinstance(dtype, pd.DatetimeTZDtype):
        return "datetimetz"
    if pd.api.types.is_datetime64_dtype(dtype):
        return "datetime"
    if pd.api.types.is_timedelta64_dtype(dtype):
        return "timedelta"
    if pd.api.types.is_string_dtype(dtype):
        return "string"
    return str(dtype)


def _coerced(own: Any, other: Any) -> Any:
    """The dtype ``pandas.merge`` gives one side's key column before joining it with a key of
    dtype ``other``: a categorical whose categories differ from the other's becomes its values'
    type, a non-categorical joined with a categorical becomes object, and so do an integer key
    joined with an object or a bool one, and a non-numeric key joined with a key of another
    non-numeric dtype (object with str, say); a decimal joined with a decimal keeps its own."""
    if isinstance(own, pd.CategoricalDtype):
        same = isinstance(other, pd.CategoricalDtype) and own.ordered == other.ordered and \
            set(own.categories) == set(other.categories)
        return own if same else own.categories.dtype
    if isinstance(other, pd.CategoricalDtype) or _loose_int_pair(own, other) is not None:
        return np.dtype(object)
    kinds = {_kind(own), _kind(other)}
    if own == other or kinds <= {"int", "float", "bool"} or kinds == {"decimal"} \
            or own.kind == other.kind == "M":
        return own
    return np.dtype(object)


def _merged_key_type(left: Any, right: Any, how: str, empty: frozenset[str]) -> Any:
    """The dtype of a key column both sides share by name in ``pandas.merge``'s result: the
    common type of both sides' where output rows may lack a left row (right, outer) or the two
    are datetimes of different units, else the left's. A side with no rows leaves the other's
    (a right or outer join of an empty left gives the right's); datetimes of two time zones
    keep the left's. pandas decides by the data (a right or outer join whose rows all match
    keeps the left's dtype); the dtype for data with unmatched rows gives every partition one
    schema."""
    coerced = _coerced(left, right)
    if how in ("right", "outer") and "left" in empty:
        return right
    if "right" not in empty and (how in ("right", "outer")
                                 or (left.kind == right.kind == "M" and left != right)):
        common = find_common_type([coerced, right])
        return coerced if common.kind == "O" and left.kind == right.kind == "M" else common
    return coerced


def _anti_key_type(left: Any, right: Any, how: str, empty: frozenset[str]) -> Any:
    """The dtype of a key both sides share by name in an anti join's result, which holds one
    side's rows only: as pandas gives it, the left key coerced against the right (a datetime
    keeps its unit and zone) for 'left_anti'; the right key's own dtype for 'right_anti', but a
    bool key's common type with the left's (object with integers), and the left's where the
    right side has no partitions."""
    if how == "left_anti":
        return _coerced(left, right)
    if "right" in empty:
        return left
    return find_common_type([left, right]) if _kind(right) == "bool" else right


def _output_name(key: str, other_columns: pd.Index, shared: set[str], suffix: Any) -> str:
    """The result's name of a key column that the other side joins under another name."""
    if key in other_columns and key not in shared:
        return f"{key}{suffix or ''}"
    return key


def _as_list(keys: Any) -> list[str]:
    return [keys] if isinstance(keys, str) else list(keys)
