"""gpuframe.exchange.pack against a pure NumPy/Python reference of the hash and the partition
and against pandas' own sort for the range splitter, and (marker gpu) the CUDA partition and
range splitter against the CPU ones, byte for byte."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from gpuframe.exchange.digest import UnhashableKeyError
from gpuframe.exchange.pack import (
    hash_pack,
    hash_split,
    pack_by_destinations,
    range_destinations,
    range_split,
    split_by_destinations,
    unpack,
)
from gpuframe.exchange.pack_layout import (
    ALIGNMENT,
    BoundariesError,
    DestinationsError,
    PackedBuckets,
    PackOptionError,
    UnknownKeyColumnError,
    UnsupportedColumnTypeError,
)
from gpuframe.exchange.row_hashes import hash_rows

# --- the reference: gpuframe_cpp/include/gpuframe/hash.hpp, re-implemented -----------------------

M64 = (1 << 64) - 1
SEED = 0x9E3779B97F4A7C15
NULL_HASH = 0x6A09E667F3BCC908
U = np.uint64


def mix64(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> U(30))
    x = x * U(0xBF58476D1CE4E5B9)
    x = x ^ (x >> U(27))
    x = x * U(0x94D049BB133111EB)
    return x ^ (x >> U(31))


def mix64_int(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def hash_bytes(data: bytes) -> int:
    h = mix64_int(SEED ^ len(data))
    whole = len(data) // 8 * 8
    for i in range(0, whole, 8):
        h = (mix64_int(h ^ int.from_bytes(data[i:i + 8], "little")) + SEED) & M64
    return mix64_int(h ^ int.from_bytes(data[whole:], "little"))


def value_bits(array: pa.Array) -> np.ndarray:
    """Each value's bytes zero-extended to 64 bits, floats canonicalised (-0.0, NaN)."""
    kind = array.type
    if pa.types.is_boolean(kind):
        return array.cast(pa.uint8()).fill_null(0).to_numpy().astype(U)
    if pa.types.is_floating(kind):
        values = array.fill_null(0).to_numpy(zero_copy_only=False)
        values = np.where(values == 0, np.zeros_like(values), values)  # -0.0 -> 0.0
        if kind.bit_width == 32:
            bits = values.astype(np.float32).view(np.uint32).astype(U)
            return np.where(np.isnan(values), U(0x7FC00000), bits)
        return np.where(np.isnan(values), U(0x7FF8000000000000), values.view(U))
    width = kind.bit_width // 8
    raw = np.frombuffer(array.buffers()[1], np.uint8)[array.offset * width:]
    raw = raw[:len(array) * width]
    return raw.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]).astype(U)


def reference_column_hash(array: pa.Array) -> np.ndarray:
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type) or \
            pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):
        out = np.array([NULL_HASH if v is None else hash_bytes(v if isinstance(v, bytes)
                                                               else v.encode())
                        for v in array.to_pylist()], dtype=U)
        return out
    out = mix64(value_bits(array) ^ U(SEED))
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    return np.where(valid, out, U(NULL_HASH))


def reference_hash(table: pa.Table, on: list[str]) -> np.ndarray:
    h = reference_column_hash(table.column(on[0]).combine_chunks())
    for name in on[1:]:
        v = reference_column_hash(table.column(name).combine_chunks())
        h = mix64(h ^ (v + U(SEED) + (h << U(6)) + (h >> U(2))))
    return h


def reference_destination(h: np.ndarray, n: int) -> np.ndarray:
    """The high 64 bits of h * n, from 32-bit halves (no 128-bit integers in NumPy)."""
    hi, lo = h >> U(32), h & U(0xFFFFFFFF)
    return ((hi * U(n) + ((lo * U(n)) >> U(32))) >> U(32)).astype(np.int64)


def reference_partition(table: pa.Table, on: list[str], n: int) -> list[pa.Table]:
    dest = reference_destination(reference_hash(table, on), n)
    return [table.take(pa.array(np.flatnonzero(dest == d))) for d in range(n)]


# --- the range reference: pandas' sort_values, then bisect right --------------------------------

def pandas_keys(table: pa.Table) -> pd.DataFrame:
    """``table`` as pandas sorts it: integers and booleans nullable (exact, with NA), floats as
    NumPy's (null and NaN both NaN), strings and binary as Python objects."""
    nullable = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
                pa.int64(): pd.Int64Dtype(), pa.uint8(): pd.UInt8Dtype(),
                pa.uint16(): pd.UInt16Dtype(), pa.uint32(): pd.UInt32Dtype(),
                pa.uint64(): pd.UInt64Dtype(), pa.bool_(): pd.BooleanDtype()}
    return table.to_pandas(types_mapper=nullable.get, date_as_object=False)


def reference_range(table: pa.Table, on: list[str], boundaries: pa.Table, ascending=True,
                    nulls_last=True) -> np.ndarray:
    """Each row's destination by pandas' stable sort of the boundaries followed by the rows: a
    boundary sorts before the rows equal to it, so a row's destination is the number of
    boundaries sorted before it (bisect right)."""
    bounds = pandas_keys(boundaries.select(on).cast(table.select(on).schema))
    both = pd.concat([bounds, pandas_keys(table.select(on))], ignore_index=True)
    order = both.sort_values(on, ascending=ascending, kind="stable",
                             na_position="last" if nulls_last else "first").index.to_numpy()
    is_boundary = order < len(bounds)
    dest = np.empty(table.num_rows, np.int64)
    dest[order[~is_boundary] - len(bounds)] = np.cumsum(is_boundary)[~is_boundary]
    return dest


def sorted_boundaries(table: pa.Table, on: list[str], k: int, ascending=True, nulls_last=True,
                      seed=0) -> pa.Table:
    """k of ``table``'s rows over ``on`` (drawn with repeats), sorted by pandas."""
    rng = np.random.default_rng(seed)
    sample = table.select(on).take(pa.array(rng.integers(0, table.num_rows, k)))
    order = pandas_keys(sample).sort_values(on, ascending=ascending, kind="stable",
                                            na_position="last" if nulls_last else "first").index
    return sample.take(pa.array(order.to_numpy()))


# --- data ---------------------------------------------------------------------------------------

def with_nulls(rng, values, fraction=0.1):
    return [None if rng.random() < fraction else v for v in values]


def random_table(rows: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    words = ["", "a", "bb", "ccc", "dddddddd", "eeeeeeeee", "ünïcödé", "x" * 40]
    floats = rng.normal(size=rows)
    floats[rng.random(rows) < 0.05] = np.nan
    floats[rng.random(rows) < 0.05] = -0.0
    floats[rng.random(rows) < 0.05] = 0.0
    return pa.table({
        "i64": pa.array(with_nulls(rng, rng.integers(-50, 50, rows).tolist()), pa.int64()),
        "i32": pa.array(rng.integers(-2**31, 2**31 - 1, rows), pa.int32()),
        "u8": pa.array(rng.integers(0, 255, rows), pa.uint8()),
        "i16": pa.array(with_nulls(rng, rng.integers(-999, 999, rows).tolist()), pa.int16()),
        "f64": pa.array(with_nulls(rng, floats.tolist()), pa.float64()),
        "f32": pa.array(floats.astype(np.float32), pa.float32()),
        "ts": pa.array(with_nulls(rng, rng.integers(0, 10**15, rows).tolist()),
                       pa.timestamp("us")),
        "day": pa.array(rng.integers(0, 20000, rows).astype("int32"), pa.date32()),
        "flag": pa.array(with_nulls(rng, (rng.random(rows) < 0.5).tolist()), pa.bool_()),
        "s": pa.array(with_nulls(rng, rng.choice(words, rows).tolist()), pa.string()),
        "ls": pa.array(rng.choice(words, rows).tolist(), pa.large_string()),
        "bin": pa.array([w.encode() for w in rng.choice(words, rows)], pa.binary()),
    })


def same_table(got: pa.Table, want: pa.Table) -> bool:
    """Equal schemas and values, floats compared bit for bit (so NaN equals NaN)."""
    if got.schema != want.schema:
        return False
    for a, b in zip(got.columns, want.columns):
        a, b = a.combine_chunks(), b.combine_chunks()
        if pa.types.is_floating(a.type):
            bits = pa.int32() if a.type.bit_width == 32 else pa.int64()
            a, b = a.view(bits), b.view(bits)
        if not a.equals(b):
            return False
    return True


def assert_matches_reference(table: pa.Table, on: list[str], n: int, **options) -> None:
    packed = hash_pack(table, on, n, **options)
    expected = reference_partition(table, on, n)
    assert packed.n_destinations == n
    assert packed.rows.tolist() == [t.num_rows for t in expected]
    offsets = packed.byte_offsets
    assert offsets[0] == 0 and offsets[-1] == packed.buffer.nbytes
    assert np.all(np.diff(offsets) >= 0) and np.all(offsets % ALIGNMENT == 0)
    present = packed.pieces[packed.pieces >= 0]
    assert np.all(present % ALIGNMENT == 0)
    for d in range(n):
        got = unpack(packed.destination(d))
        assert got.schema == table.schema
        assert same_table(got, expected[d]), f"destination {d} of {n}"


# --- CPU tests ----------------------------------------------------------------------------------

def test_hash_matches_reference_for_every_type():
    table = random_table(500, seed=1)
    for name in table.column_names:
        np.testing.assert_array_equal(hash_rows(table, [name]), reference_hash(table, [name]),
                                      err_msg=name)
    on = ["s", "i64", "f64", "flag"]
    np.testing.assert_array_equal(hash_rows(table, on), reference_hash(table, on))


@pytest.mark.parametrize("n", [1, 2, 7, 64, 1000])
def test_partition_matches_reference(n):
    assert_matches_reference(random_table(3000, seed=n), ["i64"], n)


@pytest.mark.parametrize("on", [["s"], ["ls"], ["f64"], ["ts", "day"], ["s", "i32", "flag"],
                                ["bin", "u8", "f32", "i16"]])
def test_partition_on_each_key_type(on):
    assert_matches_reference(random_table(2000, seed=7), on, 13)


def test_sliced_and_chunked_columns():
    table = random_table(3000, seed=2)
    assert_matches_reference(table.slice(123, 2500), ["s", "i64"], 9)
    chunked = pa.concat_tables([table.slice(0, 1000), table.slice(1000, 777),
                                table.slice(2500, 300)])
    assert chunked.column("s").num_chunks == 3
    assert_matches_reference(chunked, ["i64", "ls"], 5)


def test_empty_table_gives_empty_destinations():
    table = random_table(10).slice(0, 0)
    packed = hash_pack(table, ["i64"], 4)
    assert packed.rows.tolist() == [0, 0, 0, 0]
    for d in range(4):
        got = unpack(packed.destination(d))
        assert got.num_rows == 0 and got.schema == table.schema


def test_one_destination_keeps_the_table():
    table = random_table(1000, seed=3)
    packed = hash_pack(table, ["s"], 1)
    assert same_table(unpack(packed.destination(0)), table)


def test_null_keys_land_together_and_match_each_other():
    table = pa.table({"k": pa.array([None] * 50 + list(range(50)), pa.int64()),
                      "s": pa.array([None] * 50 + ["v"] * 50),
                      "f": pa.array([0.0, -0.0, float("nan"), -float("nan")] * 25)})
    for on in (["k"], ["s"], ["k", "s"]):
        dest = reference_destination(hash_rows(table, on), 97)
        assert len(set(dest[:50])) == 1, on
    dest = reference_destination(hash_rows(table, ["f"]), 97)
    assert dest[0] == dest[1] and dest[2] == dest[3]
    nans = np.array([0x7FF8000000000001, 0xFFF0000000000123], dtype=U).view(np.float64)
    odd = pa.table({"f": pa.array(np.concatenate([nans, [np.nan]]))})
    assert len(set(hash_rows(odd, ["f"]).tolist())) == 1


def test_many_rows_on_several_threads_give_the_same_bytes():
    rows = 300_000  # several threads' worth (the core gives each at least 65536 rows)
    rng = np.random.default_rng(5)
    table = pa.table({
        "k": pa.array(rng.integers(0, 1000, rows)),
        "v": pa.array(with_nulls(rng, rng.random(rows).tolist(), 0.01)),
        "s": pa.array(rng.choice(["x", "yy", "zzz", ""], rows)),
    })
    one = hash_pack(table, ["k"], 7, threads=1)
    two = hash_pack(table, ["k"], 7, threads=3)
    assert np.array_equal(one.buffer, two.buffer)
    assert_matches_reference(table, ["k"], 7, threads=3)


def test_pandas_frames_go_through_arrow_and_come_back():
    rng = np.random.default_rng(11)
    frame = pd.DataFrame({"k": rng.integers(0, 20, 400),
                          "name": pd.array(rng.choice(["a", None, "cc"], 400), dtype="str"),
                          "x": pd.array(with_nulls(rng, list(range(400))), dtype="Int64")})
    parts = hash_split(frame, ["k"], 3)
    expected = reference_partition(pa.Table.from_pandas(frame, preserve_index=False), ["k"], 3)
    for part, want in zip(parts, expected):
        assert part.dtypes.tolist() == frame.dtypes.tolist()
        pd.testing.assert_frame_equal(part.reset_index(drop=True),
                                      want.to_pandas().reset_index(drop=True))
    assert hash_pack(frame, ["k"], 3).rows.tolist() == [len(p) for p in parts]


def test_columns_the_packer_cannot_pack_are_carried_with_their_rows():
    """Decimals, lists and structs that are not keys reach each destination with their rows,
    in order; lists as keys are refused, naming the column (they have no hash)."""

    rng = np.random.default_rng(13)
    rows = 300
    frame = pd.DataFrame({
        "price": [Decimal(int(v)) / 100 if v % 7 else None for v in rng.integers(0, 10**6, rows)],
        "k": rng.integers(0, 25, rows),
        "tags": [list(range(int(v) % 4)) for v in rng.integers(0, 100, rows)],
        "where": [{"x": int(v), "y": "s" * (int(v) % 3)} for v in rng.integers(0, 9, rows)],
        "name": pd.array(rng.choice(["a", None, "cc"], rows), dtype="str"),
    })
    parts = hash_split(frame, ["k"], 4)
    plain = hash_split(frame[["k", "name"]], ["k"], 4)
    assert sum(len(p) for p in parts) == rows
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for part, want in zip(parts, plain):
        assert part.columns.tolist() == frame.columns.tolist()
        assert part.dtypes.tolist() == frame.dtypes.tolist()
        pd.testing.assert_frame_equal(part[["k", "name"]], want)
        got = pa.Table.from_pandas(part, preserve_index=False)
        assert got.schema.field("price").type == table.schema.field("price").type
    # each row's carried values are its own: the rows of one key, in order, across columns
    for part in parts:
        for key, group in part.groupby("k", sort=False):
            source = frame[frame["k"] == key]
            assert group["price"].tolist() == source["price"].tolist()
            assert [list(v) for v in group["tags"]] == source["tags"].tolist()
            assert group["where"].tolist() == source["where"].tolist()
    with pytest.raises(UnhashableKeyError, match="'tags'"):
        hash_split(frame, ["tags"], 4)


def test_unpacked_columns_point_into_the_packed_buffer():
    """Zero-copy out: every unpacked buffer (booleans aside, cast back from bytes) lies inside
    the packed buffer."""
    table = random_table(3000, seed=15)
    packed = hash_pack(table, ["i64"], 5)
    start = packed.buffer.ctypes.data
    end = start + packed.buffer.nbytes
    for d in range(5):
        part = unpack(packed.destination(d))
        for field, column in zip(part.schema, part.columns):
            if pa.types.is_boolean(field.type) or pa.types.is_dictionary(field.type):
                continue
            for buffer in column.chunk(0).buffers():
                if buffer is not None and buffer.size:
                    assert start <= buffer.address and buffer.address + buffer.size <= end, \
                        f"destination {d}, column {field.name!r} was copied"


def test_errors_name_the_column_or_option():
    table = random_table(20)
    with pytest.raises(UnknownKeyColumnError, match="'nope'"):
        hash_pack(table, ["nope"], 2)
    with pytest.raises(UnknownKeyColumnError, match="at least one"):
        hash_pack(table, [], 2)
    for n in (0, -1, 2**32, 1.5, True):
        with pytest.raises(PackOptionError, match="n="):
            hash_pack(table, ["i64"], n)
    with pytest.raises(PackOptionError, match="threads=0"):
        hash_pack(table, ["i64"], 2, threads=0)
    decimals = table.append_column("price", pa.array([1] * 20, pa.decimal128(10, 2)))
    with pytest.raises(UnsupportedColumnTypeError, match="'price'.*decimal"):
        hash_pack(decimals, ["i64"], 2)
    with pytest.raises(PackOptionError, match="destination 5"):
        hash_pack(table, ["i64"], 2).destination(5)


def test_dictionary_columns_are_packed_as_values_and_restored():
    table = pa.table({"k": pa.array(["a", "b", "a", None, "c"] * 40).dictionary_encode(),
                      "v": pa.array(range(200))})
    packed = hash_pack(table, ["k"], 3)
    plain = table.cast(pa.schema([("k", pa.string()), ("v", pa.int64())]))
    expected = reference_partition(plain, ["k"], 3)
    for d in range(3):
        got = unpack(packed.destination(d))
        assert got.schema == table.schema
        assert got.cast(plain.schema).equals(expected[d])
        # the whole dictionary, not the values that reached d: pandas keeps the categories
        assert got.column("k").chunk(0).dictionary.equals(table.column("k").chunk(0).dictionary)
    frame = pd.DataFrame({"k": range(6), "c": pd.Categorical(list("abcabc"),
                                                            categories=list("cbad"))})
    parts = hash_split(frame, ["k"], 3)
    assert all(part["c"].dtype == frame["c"].dtype for part in parts)
    assert pd.concat(parts)["c"].dtype == frame["c"].dtype


# --- partition by given destinations ------------------------------------------------------------

@pytest.mark.parametrize(("dtype", "n"), [(np.int8, 7), (np.uint8, 100), (np.uint16, 300),
                                          (np.int32, 1), (np.uint32, 64), (np.int64, 1000),
                                          (np.uint64, 13)])
def test_destinations_pack_as_the_hash_partition_does(dtype, n):
    """Given the destinations the reference hash gives, the packing is the hash partition's, byte
    for byte, whatever the width and signedness of the destinations; each destination holds its
    rows, in order."""
    table = random_table(3000, seed=n).slice(11)
    on = ["s", "i64"]
    dest = reference_destination(reference_hash(table, on), n)
    packed = pack_by_destinations(table, dest.astype(dtype), n)
    hashed = hash_pack(table, on, n)
    assert packed.rows.tolist() == hashed.rows.tolist()
    assert packed.byte_offsets.tolist() == hashed.byte_offsets.tolist()
    assert packed.pieces.tolist() == hashed.pieces.tolist()
    assert np.array_equal(packed.buffer, hashed.buffer)
    for d in range(n):
        want = table.take(pa.array(np.flatnonzero(dest == d)))
        assert same_table(unpack(packed.destination(d)), want), f"destination {d}"


def test_destinations_on_several_threads_give_the_same_bytes():
    rows = 300_000
    rng = np.random.default_rng(6)
    table = pa.table({"k": pa.array(rng.integers(0, 1000, rows)),
                      "v": pa.array(with_nulls(rng, rng.random(rows).tolist(), 0.01)),
                      "s": pa.array(rng.choice(["x", "yy", "zzz", ""], rows))})
    dest = rng.integers(0, 9, rows).astype(np.uint16)
    one = pack_by_destinations(table, dest, 9, threads=1)
    three = pack_by_destinations(table, dest, 9, threads=3)
    assert np.array_equal(one.buffer, three.buffer)
    for d in range(9):
        want = table.take(pa.array(np.flatnonzero(dest == d)))
        assert same_table(unpack(three.destination(d)), want)


def test_destinations_of_an_empty_table():
    table = random_table(10).slice(0, 0)
    packed = pack_by_destinations(table, np.empty(0, np.int64), 3)
    assert packed.rows.tolist() == [0, 0, 0]
    assert all(unpack(packed.destination(d)).schema == table.schema for d in range(3))


def test_destinations_that_are_not_one_valid_integer_a_row_are_refused():
    table = random_table(50)
    good = np.arange(50) % 4
    for row, value, dtype, n in ((7, 4, np.int64, 4), (3, -1, np.int64, 4),
                                 (5, -1, np.int8, 300),  # read as 255, it would be in range
                                 (9, 2**64 - 1, np.uint64, 4), (0, 2**31 - 1, np.int32, 4)):
        dest = good.astype(dtype)
        dest[row] = value
        dest[row + 20] = value  # a later one too: the first is named
        with pytest.raises(DestinationsError,
                           match=rf"^row {row} has destination {value}, outside \[0, {n}\)$"):
            pack_by_destinations(table, dest, n)
    with pytest.raises(DestinationsError, match=r"shape \(49,\) for 50 rows"):
        pack_by_destinations(table, good[:49], 4)
    with pytest.raises(DestinationsError, match=r"shape \(2, 25\) for 50 rows"):
        pack_by_destinations(table, good.reshape(2, 25), 4)
    for dtype in (np.float64, np.bool_, object):
        with pytest.raises(DestinationsError, match=f"dtype {np.dtype(dtype)}: give integers"):
            pack_by_destinations(table, good.astype(dtype), 4)
    with pytest.raises(PackOptionError, match="n=0"):
        pack_by_destinations(table, good, 0)
    assert issubclass(DestinationsError, PackOptionError)
    assert issubclass(DestinationsError, ValueError)


def test_destinations_out_of_range_on_several_threads_name_the_first():
    rows = 300_000
    table = pa.table({"k": pa.array(np.arange(rows))})
    dest = np.zeros(rows, np.int32)
    dest[[290_000, 150_001, 150_002]] = [7, -3, 5]
    with pytest.raises(DestinationsError, match="^row 150001 has destination -3"):
        pack_by_destinations(table, dest, 5, threads=3)


def test_split_by_destinations_gives_each_frame_its_rows_in_order():
    """Frames of the input's library, carried columns (decimals, lists) included."""
    rng = np.random.default_rng(16)
    rows = 400
    frame = pd.DataFrame({
        "price": [Decimal(int(v)) / 100 if v % 7 else None for v in rng.integers(0, 10**6, rows)],
        "k": rng.integers(0, 25, rows),
        "tags": [list(range(int(v) % 4)) for v in rng.integers(0, 100, rows)],
        "name": pd.array(rng.choice(["a", None, "cc"], rows), dtype="str"),
    })
    dest = rng.integers(0, 5, rows)
    parts = split_by_destinations(frame, dest, 5)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for d, part in enumerate(parts):
        assert part.columns.tolist() == frame.columns.tolist()
        assert part.dtypes.tolist() == frame.dtypes.tolist()
        want = table.take(pa.array(np.flatnonzero(dest == d)))
        assert pa.Table.from_pandas(part, preserve_index=False).equals(want), f"frame {d}"
    as_arrow = split_by_destinations(table, dest, 5)
    assert all(isinstance(part, pa.Table) for part in as_arrow)
    assert [part.num_rows for part in as_arrow] == np.bincount(dest, minlength=5).tolist()


# --- range destinations -------------------------------------------------------------------------

RANGE_KEYS = [["i64"], ["f64"], ["s"], ["f32"], ["i64", "s"], ["s", "f64", "i16"],
              ["ts", "day"], ["flag", "u8", "i32"], ["ls"], ["bin"]]


@pytest.mark.parametrize("nulls_last", [True, False])
@pytest.mark.parametrize("direction", ["ascending", "descending", "mixed"])
@pytest.mark.parametrize("on", RANGE_KEYS, ids="-".join)
def test_range_destinations_match_pandas_sort(on, direction, nulls_last):
    """Integers, floats with NaN and null (and -0.0), strings with nulls, binary, temporal types
    and booleans, over one or several columns: each row's destination is its bisect-right place
    among the boundaries in pandas' order."""
    table = random_table(2000, seed=len(on))
    ascending = {"ascending": True, "descending": False,
                 "mixed": [i % 2 == 0 for i in range(len(on))]}[direction]
    for k in (1, 5, 40):
        boundaries = sorted_boundaries(table, on, k, ascending, nulls_last, seed=k)
        got = range_destinations(table, on, boundaries, ascending, nulls_last)
        assert got.dtype == np.uint32 and got.shape == (table.num_rows,)
        want = reference_range(table, on, boundaries, ascending, nulls_last)
        np.testing.assert_array_equal(got, want, err_msg=f"{k} boundaries")


def test_range_destinations_read_integers_as_signed_or_unsigned():
    """int8 values compare as signed (sign-extended), uint64 ones above 2**63 as unsigned."""
    table = pa.table({"i8": pa.array([-128, -1, 0, 1, 127, -60, None, 60], pa.int8()),
                      "u64": pa.array([0, 2**63, 2**64 - 1, 1, 2**63 - 1, None, 5, 2**64 - 2],
                                      pa.uint64())})
    for on, bounds in ((["i8"], [-60, 0, 60]), (["u64"], [1, 2**63 - 1, 2**64 - 2])):
        boundaries = pa.table({on[0]: pa.array(bounds, table.schema.field(on[0]).type)})
        np.testing.assert_array_equal(range_destinations(table, on, boundaries),
                                      reference_range(table, on, boundaries))


def test_range_destinations_of_edge_cases():
    table = random_table(300, seed=4)
    on = ["i64", "s"]
    # no rows: no destinations
    empty = range_destinations(table.slice(0, 0), on, sorted_boundaries(table, on, 3))
    assert empty.dtype == np.uint32 and empty.shape == (0,)
    # no boundaries: one destination
    assert (range_destinations(table, on, table.select(on).slice(0, 0)) == 0).all()
    # every row equal to the one boundary: all after it
    same = pa.table({"i64": pa.array([4] * 50), "s": pa.array(["b"] * 50)})
    one = pa.table({"i64": [4], "s": ["b"]})
    assert (range_destinations(same, on, one) == 1).all()
    # every row equal to the middle one of equal boundaries: after all of them
    three = pa.table({"i64": [4, 4, 4], "s": ["a", "b", "b"]})
    assert (range_destinations(same, on, three) == 3).all()
    # rows and boundaries all null sort together, ahead or behind
    nulls = pa.table({"i64": pa.array([None] * 4, pa.int64()), "s": pa.array([None] * 4,
                                                                            pa.string())})
    bounds = pa.table({"i64": pa.array([1, None], pa.int64()), "s": ["x", None]})
    assert range_destinations(nulls, on, bounds).tolist() == [2] * 4
    first = pa.table({"i64": pa.array([None, 1], pa.int64()), "s": [None, "x"]})
    assert range_destinations(nulls, on, first, nulls_last=False).tolist() == [1] * 4


def test_range_destinations_of_sliced_chunked_and_threaded_tables():
    table = random_table(3000, seed=8)
    on = ["s", "i64"]
    boundaries = sorted_boundaries(table, on, 9, seed=2)
    sliced = table.slice(123, 2500)
    np.testing.assert_array_equal(range_destinations(sliced, on, boundaries),
                                  reference_range(sliced, on, boundaries))
    chunked = pa.concat_tables([table.slice(0, 1000), table.slice(1000, 777),
                                table.slice(2500, 300)])
    np.testing.assert_array_equal(range_destinations(chunked, on, boundaries.slice(2)),
                                  reference_range(chunked, on, boundaries.slice(2)))
    rng = np.random.default_rng(3)
    big = pa.table({"k": pa.array(with_nulls(rng, rng.normal(size=300_000).tolist(), 0.01))})
    bounds = sorted_boundaries(big, ["k"], 15, seed=5)
    three = range_destinations(big, ["k"], bounds, threads=3)
    np.testing.assert_array_equal(three, range_destinations(big, ["k"], bounds, threads=1))
    np.testing.assert_array_equal(three, reference_range(big, ["k"], bounds))


def test_range_destinations_cast_the_boundaries_to_the_key_types():
    """pandas frames on either side; boundaries of other integer or float types, other
    timestamp units, extra columns in another order."""
    rng = np.random.default_rng(9)
    frame = pd.DataFrame({"k": rng.integers(-20, 20, 500), "x": rng.random(500),
                          "t": pd.to_datetime(rng.integers(0, 10**6, 500), unit="s").astype(
                              "datetime64[us]")})  # pandas versions infer other units
    boundaries = pd.DataFrame({"t": pd.to_datetime([100, 500_000], unit="ms").astype(
        "datetime64[ms]"), "k": np.array([-5, 7], np.int32), "other": ["a", "b"]})
    got = range_destinations(frame, ["k"], boundaries)
    np.testing.assert_array_equal(got, np.searchsorted([-5, 7], frame["k"], side="right"))
    got = range_destinations(frame, ["k"], pd.DataFrame({"k": [-5.0, 7.0]}))
    np.testing.assert_array_equal(got, np.searchsorted([-5, 7], frame["k"], side="right"))
    got = range_destinations(frame, ["t"], boundaries)
    np.testing.assert_array_equal(
        got, np.searchsorted(boundaries["t"].astype("datetime64[ns]"), frame["t"], side="right"))
    with pytest.raises(BoundariesError, match="'k' of type double cannot be cast"):
        range_destinations(frame, ["k"], pd.DataFrame({"k": [0.5]}))
    with pytest.raises(BoundariesError, match="'k' of type string cannot be cast"):
        range_destinations(frame, ["k"], pa.table({"k": ["a"]}))
    with pytest.raises(BoundariesError, match=r"'t' of type timestamp\[ms\] cannot be cast"):
        range_destinations(frame.astype({"t": "datetime64[s]"}), ["t"], boundaries)


def test_range_split_gives_each_frame_its_range_in_order():
    rng = np.random.default_rng(17)
    rows = 600
    frame = pd.DataFrame({
        "price": [Decimal(int(v)) / 100 for v in rng.integers(0, 10**6, rows)],
        "k": pd.array(with_nulls(rng, rng.integers(0, 30, rows).tolist()), dtype="Int64"),
        "name": pd.array(with_nulls(rng, rng.choice(["a", "bb", "c"], rows).tolist()),
                         dtype="str"),
    })
    table = pa.Table.from_pandas(frame, preserve_index=False)
    on = ["name", "k"]
    boundaries = sorted_boundaries(table, on, 4, [False, True], False, seed=1)
    parts = range_split(frame, on, boundaries.to_pandas(), ascending=[False, True],
                        nulls_last=False)
    dest = reference_range(table, on, boundaries, [False, True], False)
    assert len(parts) == 5
    for d, part in enumerate(parts):
        assert part.dtypes.tolist() == frame.dtypes.tolist()
        want = table.take(pa.array(np.flatnonzero(dest == d)))
        assert pa.Table.from_pandas(part, preserve_index=False).equals(want), f"range {d}"
    whole = range_split(table, ["k"], table.select(["k"]).slice(0, 0))
    assert len(whole) == 1 and whole[0].equals(table)


def test_range_errors_name_the_column_option_or_rows():
    table = random_table(100)
    bounds = pa.table({"i64": [3, 1]})
    with pytest.raises(BoundariesError, match="boundary rows 0 and 1 are out of order"):
        range_destinations(table, ["i64"], bounds)
    assert range_destinations(table, ["i64"], bounds, ascending=False).max() <= 2
    with pytest.raises(BoundariesError, match="boundary rows 1 and 2"):
        range_destinations(table, ["i64"], pa.table({"i64": pa.array([1, None, 2])}))
    with pytest.raises(BoundariesError, match=r"lack the key column\(s\) \['s'\]"):
        range_destinations(table, ["i64", "s"], bounds)
    with pytest.raises(BoundariesError, match="boundaries of type list"):
        range_destinations(table, ["i64"], [1, 2])
    with pytest.raises(UnknownKeyColumnError, match="'nope'"):
        range_destinations(table, ["nope"], bounds)
    for ascending in ([True], [True, 1], "yes"):
        with pytest.raises(PackOptionError, match="ascending="):
            range_destinations(table, ["i64", "s"], pa.table({"i64": [1], "s": ["a"]}),
                               ascending=ascending)
    with pytest.raises(PackOptionError, match="nulls_last='last'"):
        range_destinations(table, ["i64"], bounds.slice(1), nulls_last="last")
    categorical = pa.table({"c": pa.array(["b", "a", "b"]).dictionary_encode()})
    with pytest.raises(UnsupportedColumnTypeError, match="'c' is a dictionary"):
        range_destinations(categorical, ["c"], pa.table({"c": ["a"]}))
    decimals = pa.table({"p": pa.array([1, 2], pa.decimal128(10, 2))})
    with pytest.raises(UnsupportedColumnTypeError, match="'p'.*decimal"):
        range_destinations(decimals, ["p"], decimals.slice(1))
    with pytest.raises(BoundariesError, match="out of order"):
        range_split(table.to_pandas(), ["i64"], bounds.to_pandas())


# --- GPU: the CUDA partition against the CPU one ------------------------------------------------

def device_or_skip():
    cupy = pytest.importorskip("cupy")
    from gpuframe import _core

    if not _core.built_with_cuda:
        pytest.skip("gpuframe was built without CUDA")
    if _core.cuda_device_count() == 0:
        pytest.skip("no CUDA device")
    return cupy


def device_args(host_args, cupy):
    """The core's column arguments with every buffer copied to the device."""
    return [tuple(cupy.asarray(x) if isinstance(x, np.ndarray) else x for x in arg)
            for arg in host_args]


def host_args(table: pa.Table):
    from gpuframe.exchange.pack import _host_column

    return [_host_column(f, c)[1] for f, c in zip(table.schema, table.columns)]


def cuda_pack(cupy, core, fill):
    """``core``'s (a CudaPartition's) packing, with its scratch and output filled with ``fill``
    first."""
    stream = cupy.cuda.Stream(non_blocking=True)
    # A non-blocking stream does not wait for the default one, where ``args`` were copied: the
    # partition must start after them, and the fills below must run before it, on its stream.
    stream.wait_event(cupy.cuda.Stream.null.record())
    with stream:
        scratch = cupy.full(core.scratch_bytes, fill, dtype=cupy.uint8)
        core.count(scratch, stream.ptr)
        out = cupy.full(core.total_bytes, fill, dtype=cupy.uint8)  # garbage it must cover
        core.scatter(out, stream.ptr)
    stream.synchronize()
    return core, out.get()


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 2, 7, 64, 1000, 2000])  # 2000: beyond the staged scatter
@pytest.mark.parametrize("rows", [0, 1, 31, 5000, 200_003])
def test_cuda_partition_writes_the_cpu_bytes(n, rows):
    table = random_table(rows + 17, seed=rows + n).slice(17)  # sliced: offsets inside buffers
    assert_cuda_writes_the_cpu_bytes(table, ["s", "i64", "f64"], n)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 7, 300, 2000])
def test_cuda_partition_of_long_and_empty_strings_writes_the_cpu_bytes(n):
    """Strings of 256 KiB and more (counted in 64 bits), among empty and short ones: each warp
    copies its strings byte by byte over all of them, whatever their lengths."""
    rng = np.random.default_rng(n)
    lengths = rng.choice([0, 0, 1, 7, 300_000, 2**18, 2**18 - 1, 70], 1200)
    values = ["".join(chr(97 + (i + k) % 26) for k in range(min(length, 26))) * (length // 26)
              + "z" * (length % 26) for i, length in enumerate(lengths)]
    table = pa.table({"k": pa.array(rng.integers(0, 100, len(values))),
                      "s": pa.array(values, pa.large_string()),
                      "t": pa.array(values[::-1], pa.string())})
    assert_cuda_writes_the_cpu_bytes(table, ["k"], n)


@pytest.mark.gpu
@pytest.mark.parametrize("strings", [True, False])
@pytest.mark.parametrize("start", [3, 4])
@pytest.mark.parametrize("n", [7, 64, 256, 300])
@pytest.mark.parametrize("key", ["i64", "f64", "i32", "f32", "day"])
def test_cuda_partition_on_one_plain_key_writes_the_cpu_bytes(key, n, start, strings):
    """One key column of 4 or 8 bytes without nulls, which the count hashes straight from its
    values (floats canonicalised). Sliced at 3 rows, the key's values and the other columns'
    copies into shared memory start off 16-byte boundaries (one key a load); at 4, the key's
    values start on one, and the count loads 4 or 2 keys at a time. Without string columns the
    count adds rows by shared-memory atomics and stores no destinations up to 256 of them: the
    scatter hashes the key column again once staged, wherever it stands among the columns, and
    writes it first; with them, the count then counts each string column's bytes the same way.
    300 destinations are stored in 2 bytes a row."""
    table = random_table(200_003, seed=n)
    if not strings:
        table = table.drop_columns(["s", "ls", "bin"])
    column = table.column(key)
    table = table.set_column(table.schema.get_field_index(key), key,
                             column.fill_null(pa.scalar(0, column.type))).slice(start)
    assert table.column(key).chunk(0).offset == start
    assert_cuda_writes_the_cpu_bytes(table, [key], n)


def assert_cuda_writes_the_cpu_bytes(table: pa.Table, on: list[str], n: int) -> None:
    """The CUDA core packs ``table`` on ``on`` into ``n`` destinations exactly as the CPU core
    does, whatever its scratch and output held before (zeros, then ones)."""
    cupy = device_or_skip()
    from gpuframe import _core

    args = host_args(table)
    keys = [table.schema.get_field_index(k) for k in on]
    host = _core.HostPartition(args, keys, table.num_rows, n)
    expected = np.empty(host.total_bytes, np.uint8)
    host.scatter(expected)
    for fill in (0x00, 0xFF):
        core, got = cuda_pack(
            cupy, _core.CudaPartition(device_args(args, cupy), keys, table.num_rows, n), fill)
        assert core.rows.tolist() == host.rows.tolist()
        assert core.byte_offsets.tolist() == host.byte_offsets.tolist()
        assert core.pieces.tolist() == host.pieces.tolist()
        assert np.array_equal(got, expected), f"fill {fill:#x}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["i64", "i32", "u8", "i16", "f64", "f32", "ts", "day", "flag",
                                  "s", "ls", "bin"])
def test_cuda_hash_matches_cpu_hash(name):
    cupy = device_or_skip()
    from gpuframe import _core

    table = random_table(4000, seed=9).slice(3)
    args = host_args(table.select([name]))
    out = cupy.empty(table.num_rows, dtype=cupy.uint64)
    _core.hash_rows_cuda(device_args(args, cupy), table.num_rows, out, 0)
    np.testing.assert_array_equal(out.get(), _core.hash_rows(args, table.num_rows))


@pytest.mark.gpu
def test_cuda_partition_of_long_strings_and_large_offsets():
    cupy = device_or_skip()
    from gpuframe import _core

    rng = np.random.default_rng(4)
    lengths = rng.integers(0, 3000, 3000)
    words = ["".join(rng.choice(list("abcdefgh"), k)) for k in lengths]
    table = pa.table({"k": pa.array(rng.integers(0, 50, 3000)),
                      "s": pa.array(words, pa.large_string()),
                      "t": pa.array(with_nulls(rng, words, 0.2), pa.string())})
    args = host_args(table)
    host = _core.HostPartition(args, [0], table.num_rows, 5)
    expected = np.empty(host.total_bytes, np.uint8)
    host.scatter(expected)
    _, got = cuda_pack(cupy, _core.CudaPartition(device_args(args, cupy), [0], table.num_rows, 5),
                       0xAB)
    assert np.array_equal(got, expected)


def assert_packs_like_arrow(on_gpu: PackedBuckets, on_cpu: PackedBuckets) -> None:
    """A cuDF frame's packed destinations unpack to those of the same rows packed on the CPU."""
    assert on_gpu.rows.tolist() == on_cpu.rows.tolist()
    for d in range(on_cpu.n_destinations):
        got = unpack(on_gpu.destination(d)).to_arrow()
        want = unpack(on_cpu.destination(d))
        assert got.column_names == want.column_names
        got = pa.table([c.cast(w.type) for c, w in zip(got.columns, want.columns)],
                       schema=want.schema)
        assert same_table(got, want), f"destination {d}"


@pytest.mark.gpu
def test_cudf_frames_partition_like_arrow_tables():
    device_or_skip()
    cudf = pytest.importorskip("cudf")
    table = random_table(20_000, seed=12).drop_columns(["bin", "day"])
    frame = cudf.DataFrame.from_arrow(table)
    on = ["s", "i64"]
    on_cpu = hash_pack(table, on, 6)
    assert_packs_like_arrow(hash_pack(frame, on, 6), on_cpu)
    np.testing.assert_array_equal(hash_rows(frame, on).get(), hash_rows(table, on))
    parts = hash_split(frame, on, 6)
    assert [len(p) for p in parts] == on_cpu.rows.tolist()


@pytest.mark.gpu
def test_cudf_frames_keep_their_own_dtypes_through_a_split():
    """cuDF keeps pandas' nullable and zoned dtypes on its columns, which the packed types lack:
    each destination's columns come back as the frame's, nulls and zones included."""
    device_or_skip()
    cudf = pytest.importorskip("cudf")
    rng = np.random.default_rng(13)
    rows = 5000
    values = pd.DataFrame({
        "k": rng.integers(0, 100, rows),
        "n": pd.array(rng.integers(0, 9, rows), dtype="Int64"),
        "b": pd.array(rng.random(rows) < 0.5, dtype="boolean"),
        "f": pd.array(rng.random(rows), dtype="Float64"),
        "z": pd.date_range("2026-01-01", periods=rows, freq="min", tz="Europe/Paris"),
        "p": rng.random(rows)})
    values.loc[::7, ["n", "b", "f"]] = None
    frame = cudf.from_pandas(values)
    parts = hash_split(frame, ["k"], 5)
    got = pd.concat([part.to_pandas() for part in parts]).sort_values(["k", "p"])
    expected = frame.to_pandas().sort_values(["k", "p"])
    pd.testing.assert_frame_equal(got.reset_index(drop=True), expected.reset_index(drop=True))
    assert got.n.dtype == "Int64" and str(got.z.dt.tz) == "Europe/Paris"  # what cuDF kept


@pytest.mark.gpu
@pytest.mark.parametrize("on", [["i32"], ["s", "i64"]])  # the scratch of a plain key, of others
def test_cudf_partitions_keep_their_scratch_per_stream(on):
    """Each thread keeps the core's scratch and page-locked totals between calls on one stream:
    a smaller partition after a larger one reuses them, another stream gets its own, and every
    packing is right."""
    cupy = device_or_skip()
    cudf = pytest.importorskip("cudf")
    from gpuframe.exchange import pack_device as module

    null, other = cupy.cuda.Stream.null, cupy.cuda.Stream(non_blocking=True)
    kept = []
    for rows, stream in ((300_000, null), (2_000, null), (2_000, other), (300_000, null)):
        table = random_table(rows, seed=rows).drop_columns(["bin", "day"])
        frame = cudf.DataFrame.from_arrow(table)
        cupy.cuda.Device().synchronize()  # the frame was made on the default stream
        with stream:
            on_gpu = hash_pack(frame, on, 7)
        stream.synchronize()
        assert_packs_like_arrow(on_gpu, hash_pack(table, on, 7))
        kept.append(module._kept_scratch.by_device[cupy.cuda.runtime.getDevice()])
    assert kept[1] is kept[0]  # smaller, on the same stream
    assert kept[2][0] == other.ptr and kept[2][1] is not kept[1][1]
    assert kept[3][0] == null.ptr and kept[3][1] is not kept[2][1]
    assert kept[3][2] is not kept[2][2]
    assert cupy.cuda.runtime.pointerGetAttributes(kept[0][2].ctypes.data).type == \
        cupy.cuda.runtime.memoryTypeHost  # page-locked


@pytest.mark.gpu
def test_cudf_partitions_of_threads_at_once_launch_with_their_own_shared_memory():
    """A staged kernel's cap on shared memory is one per process: threads packing frames with
    and without string columns (which need more) at once must not lower it under each other's
    launch, as a Dask worker's threads do."""
    from concurrent.futures import ThreadPoolExecutor

    cupy = device_or_skip()
    cudf = pytest.importorskip("cudf")
    table = random_table(2_000, seed=23)
    tables = [table.select(["i64", "s"]), table.select(["i64", "i32"])]
    frames = [cudf.DataFrame.from_arrow(t) for t in tables]
    wanted = [hash_pack(t, ["i64"], 3) for t in tables]
    cupy.cuda.Device().synchronize()

    def packs(thread: int) -> list[tuple[int, PackedBuckets]]:
        kinds = [(thread + i) % 2 for i in range(200)]
        done = [(kind, hash_pack(frames[kind], ["i64"], 3)) for kind in kinds]
        cupy.cuda.get_current_stream().synchronize()
        return done

    with ThreadPoolExecutor(8) as pool:
        results = [item for items in pool.map(packs, range(8)) for item in items]
    assert len(results) == 1600
    for kind, packed in results[:4] + results[-4:]:
        assert_packs_like_arrow(packed, wanted[kind])
    for kind, packed in results:
        assert packed.rows.tolist() == wanted[kind].rows.tolist()


@pytest.mark.gpu
def test_cudf_partitions_hold_scratch_made_for_the_call_until_the_scatter(monkeypatch):
    """Scratch above SCRATCH_KEPT_BYTES is made for the call and dropped by the caller after the
    count; the scatter still reads it. A pool that hands freed memory straight to the next
    allocation (the output) must not see it back before then."""
    cupy = device_or_skip()
    cudf = pytest.importorskip("cudf")
    rmm = pytest.importorskip("rmm")
    from rmm.allocators.cupy import rmm_cupy_allocator

    from gpuframe.exchange import pack_device as module

    monkeypatch.setattr(module, "SCRATCH_KEPT_BYTES", 0)
    resource, allocator = rmm.mr.get_current_device_resource(), cupy.cuda.get_allocator()
    rmm.mr.set_current_device_resource(
        rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=2**28))
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    try:
        table = random_table(300_000, seed=21).drop_columns(["bin", "day"])
        frame = cudf.DataFrame.from_arrow(table)
        for on in (["i32"], ["s", "i64"]):
            on_gpu = hash_pack(frame, on, 7)
            cupy.cuda.Device().synchronize()
            assert_packs_like_arrow(on_gpu, hash_pack(table, on, 7))
            del on_gpu
    finally:
        cupy.cuda.Device().synchronize()
        cupy.cuda.set_allocator(allocator)
        rmm.mr.set_current_device_resource(resource)


@pytest.mark.gpu
def test_cudf_frames_carry_the_columns_the_packer_cannot_pack():
    device_or_skip()
    cudf = pytest.importorskip("cudf")
    rng = np.random.default_rng(14)
    table = pa.table({"k": pa.array(rng.integers(0, 25, 2000)),
                      "price": pa.array([Decimal(int(v)).scaleb(-2)
                                         for v in rng.integers(0, 10**6, 2000)],
                                        pa.decimal128(12, 2)),
                      "tags": pa.array([list(range(int(v) % 4)) for v in
                                        rng.integers(0, 100, 2000)], pa.list_(pa.int64())),
                      "size": pa.array(rng.choice(["s", "m", "l"], 2000)).dictionary_encode()})
    frame = cudf.DataFrame.from_arrow(table)
    parts = hash_split(frame, ["k"], 4)
    expected = hash_split(table.to_pandas(), ["k"], 4)
    for part, want in zip(parts, expected):
        assert part.columns.tolist() == ["k", "price", "tags", "size"]
        assert isinstance(part["size"].dtype, cudf.CategoricalDtype)  # not its codes
        got = part.to_arrow().to_pydict()
        assert got == pa.Table.from_pandas(want, preserve_index=False).cast(
            part.to_arrow().schema).to_pydict()
    # Packed directly, a categorical is refused rather than sent as codes without categories.
    with pytest.raises(UnsupportedColumnTypeError, match="'size' has cuDF type category"):
        hash_pack(frame[["k", "size"]], ["k"], 4)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 7, 300, 2000, 70_000])  # destinations stored in 1, 2 or 4 bytes
@pytest.mark.parametrize("rows", [0, 31, 200_003])
def test_cuda_partition_by_destinations_writes_the_cpu_bytes(n, rows):
    """Given destinations, of several widths, pack on the GPU as on the CPU, byte for byte, up to
    1024 destinations by the staged count and scatter, beyond by warps, whatever the scratch and
    output held before."""
    cupy = device_or_skip()
    from gpuframe import _core

    table = random_table(rows + 5, seed=rows + n).slice(5)
    args = host_args(table)
    rng = np.random.default_rng(n)
    for dtype in (np.int64, np.uint32, np.int32):
        dest = rng.integers(0, n, table.num_rows).astype(dtype)
        host = _core.HostPartition.by_destinations(args, dest, table.num_rows, n)
        expected = np.empty(host.total_bytes, np.uint8)
        host.scatter(expected)
        for fill in (0x00, 0xFF):
            core = _core.CudaPartition.by_destinations(device_args(args, cupy), cupy.asarray(dest),
                                                       table.num_rows, n)
            core, got = cuda_pack(cupy, core, fill)
            assert core.rows.tolist() == host.rows.tolist()
            assert core.pieces.tolist() == host.pieces.tolist()
            assert np.array_equal(got, expected), f"{np.dtype(dtype)}, fill {fill:#x}"


@pytest.mark.gpu
@pytest.mark.parametrize(("n", "dtype"), [(7, np.int64), (300, np.int8), (2000, np.int16)])
def test_cuda_partition_refuses_destinations_out_of_range_naming_the_first(n, dtype):
    """The staged count (up to 1024 destinations) and the warps' count (beyond) both keep the
    first row whose destination is out of range; a negative int8 is not read as 255."""
    cupy = device_or_skip()
    from gpuframe import _core

    table = random_table(100_000, seed=3)
    dest = (np.arange(table.num_rows) % min(n, 100)).astype(dtype)
    dest[[12_345, 70_000, 99_999]] = [-1, -3, -2]
    if n <= np.iinfo(dtype).max:
        dest[50_000] = n
    core = _core.CudaPartition.by_destinations(device_args(host_args(table), cupy),
                                               cupy.asarray(dest), table.num_rows, n)
    core.count(cupy.empty(core.scratch_bytes, cupy.uint8), 0)
    out = cupy.empty(max(core.output_bound, 0), cupy.uint8)
    with pytest.raises(_core.DestinationError,
                       match=rf"^row 12345 has destination -1, outside \[0, {n}\)$"):
        core.scatter(out, 0)  # the layout it plans first refuses the count's totals


@pytest.mark.gpu
@pytest.mark.parametrize("nulls_last", [True, False])
@pytest.mark.parametrize("on", RANGE_KEYS, ids="-".join)
def test_cuda_range_destinations_match_the_cpu(on, nulls_last):
    cupy = device_or_skip()
    from gpuframe import _core

    table = random_table(50_003, seed=len(on)).slice(3)
    ascending = [i % 2 == 0 for i in range(len(on))]
    boundaries = sorted_boundaries(table, on, 33, ascending, nulls_last)
    expected = range_destinations(table, on, boundaries, ascending, nulls_last)
    orders = [(pa.types.is_signed_integer(t) or pa.types.is_temporal(t), a, nulls_last)
              for t, a in zip(boundaries.schema.types, ascending)]
    keys, bounds = host_args(table.select(on)), host_args(boundaries)
    out = cupy.full(table.num_rows, 0xFFFFFFFF, cupy.uint32)
    _core.range_destinations_cuda(device_args(keys, cupy), table.num_rows,
                                  device_args(bounds, cupy), boundaries.num_rows, orders, out, 0)
    np.testing.assert_array_equal(out.get(), expected)


def assert_frames_like_arrow(got: list, want: list[pa.Table]) -> None:
    """cuDF frames with the same rows as Arrow tables, column types aside."""
    assert len(got) == len(want)
    for i, (frame, table) in enumerate(zip(got, want)):
        arrow = frame.to_arrow(preserve_index=False)
        assert arrow.column_names == table.column_names
        arrow = pa.table([c.cast(w.type) for c, w in zip(arrow.columns, table.columns)],
                         schema=table.schema)
        assert same_table(arrow, table), f"frame {i}"


@pytest.mark.gpu
def test_cudf_range_and_destination_splits_match_the_cpu():
    cupy = device_or_skip()
    cudf = pytest.importorskip("cudf")
    table = random_table(20_000, seed=12).drop_columns(["bin", "day"])
    frame = cudf.DataFrame.from_arrow(table)
    on, ascending = ["s", "i64"], [False, True]
    bounds = sorted_boundaries(table, on, 6, ascending, False)
    for given in (cudf.DataFrame.from_arrow(bounds), bounds.to_pandas(), bounds):
        got = range_destinations(frame, on, given, ascending, False)
        np.testing.assert_array_equal(got.get(),
                                      range_destinations(table, on, bounds, ascending, False))
    assert_frames_like_arrow(
        range_split(frame, on, cudf.DataFrame.from_arrow(bounds), ascending, False),
        range_split(table, on, bounds, ascending, False))
    dest = np.random.default_rng(5).integers(0, 5, len(frame))
    assert_packs_like_arrow(pack_by_destinations(frame, cupy.asarray(dest), 5),
                            pack_by_destinations(table, dest, 5))
    assert_frames_like_arrow(split_by_destinations(frame, cupy.asarray(dest), 5),
                             split_by_destinations(table, dest, 5))
    with pytest.raises(DestinationsError, match="give a CuPy array"):
        pack_by_destinations(frame, dest, 5)
    dest[777] = 5
    with pytest.raises(DestinationsError, match=r"^row 777 has destination 5, outside \[0, 5\)"):
        pack_by_destinations(frame, cupy.asarray(dest), 5)
    unsorted = cudf.DataFrame.from_arrow(bounds.take(pa.array([1, 0, 2, 3, 4, 5])))
    with pytest.raises(BoundariesError, match="boundary rows 0 and 1"):
        range_destinations(frame, on, unsorted, ascending, False)


@pytest.mark.gpu
def test_cudf_range_split_carries_the_columns_the_packer_cannot_pack():
    device_or_skip()
    cudf = pytest.importorskip("cudf")
    rng = np.random.default_rng(15)
    table = pa.table({"k": pa.array(rng.integers(0, 25, 2000)),
                      "price": pa.array([Decimal(int(v)).scaleb(-2)
                                         for v in rng.integers(0, 10**6, 2000)],
                                        pa.decimal128(12, 2)),
                      "tags": pa.array([list(range(int(v) % 4)) for v in
                                        rng.integers(0, 100, 2000)], pa.list_(pa.int64()))})
    bounds = pa.table({"k": [3, 10, 10, 20]})
    parts = range_split(cudf.DataFrame.from_arrow(table), ["k"], cudf.DataFrame.from_arrow(bounds))
    expected = range_split(table, ["k"], bounds)
    assert [len(p) for p in parts] == [t.num_rows for t in expected]
    for part, want in zip(parts, expected):
        assert part.to_arrow(preserve_index=False).cast(want.schema).equals(want)


def test_a_frame_of_no_rows_splits_into_empty_frames_of_its_schema():
    frame = pd.DataFrame({"k": pd.Series([], dtype="int32"), "s": pd.Series([], dtype="str"),
                          "d": pd.Series([], dtype="object")})
    for parts in (hash_split(frame, ["k"], 3),
                  split_by_destinations(frame, np.array([], dtype=np.int32), 3),
                  range_split(frame, ["k"], pd.DataFrame({"k": [1, 2]}))):
        assert len(parts) == 3
        assert all(len(p) == 0 and p.dtypes.equals(frame.dtypes) for p in parts)
