"""gpuframe.exchange.partition against a pure NumPy/Python reference of the hash and the partition,
and (marker gpu) the CUDA partition against the CPU one, byte for byte."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from gpuframe.exchange.partition import (
    ALIGNMENT,
    PackedPartitions,
    PartitionOptionError,
    UnknownKeyColumnError,
    UnsupportedColumnTypeError,
    hash_partition,
    hash_rows,
    hash_split,
    unpack,
)

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
    packed = hash_partition(table, on, n, **options)
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
    packed = hash_partition(table, ["i64"], 4)
    assert packed.rows.tolist() == [0, 0, 0, 0]
    for d in range(4):
        got = unpack(packed.destination(d))
        assert got.num_rows == 0 and got.schema == table.schema


def test_one_destination_keeps_the_table():
    table = random_table(1000, seed=3)
    packed = hash_partition(table, ["s"], 1)
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
    one = hash_partition(table, ["k"], 7, threads=1)
    two = hash_partition(table, ["k"], 7, threads=3)
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
    assert hash_partition(frame, ["k"], 3).rows.tolist() == [len(p) for p in parts]


def test_columns_the_packer_cannot_pack_are_carried_with_their_rows():
    """Decimals, lists and structs that are not keys reach each destination with their rows,
    in order; as keys they are still refused, naming the column."""

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
    with pytest.raises(UnsupportedColumnTypeError, match="'tags'"):
        hash_split(frame, ["tags"], 4)


def test_unpacked_columns_point_into_the_packed_buffer():
    """Zero-copy out: every unpacked buffer (booleans aside, cast back from bytes) lies inside
    the packed buffer."""
    table = random_table(3000, seed=15)
    packed = hash_partition(table, ["i64"], 5)
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
        hash_partition(table, ["nope"], 2)
    with pytest.raises(UnknownKeyColumnError, match="at least one"):
        hash_partition(table, [], 2)
    for n in (0, -1, 2**32, 1.5, True):
        with pytest.raises(PartitionOptionError, match="n="):
            hash_partition(table, ["i64"], n)
    with pytest.raises(PartitionOptionError, match="threads=0"):
        hash_partition(table, ["i64"], 2, threads=0)
    decimals = table.append_column("price", pa.array([1] * 20, pa.decimal128(10, 2)))
    with pytest.raises(UnsupportedColumnTypeError, match="'price'.*decimal"):
        hash_partition(decimals, ["i64"], 2)
    with pytest.raises(PartitionOptionError, match="destination 5"):
        hash_partition(table, ["i64"], 2).destination(5)


def test_dictionary_columns_are_packed_as_values_and_restored():
    table = pa.table({"k": pa.array(["a", "b", "a", None, "c"] * 40).dictionary_encode(),
                      "v": pa.array(range(200))})
    packed = hash_partition(table, ["k"], 3)
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
    from gpuframe.exchange.partition import _host_column

    return [_host_column(f, c)[1] for f, c in zip(table.schema, table.columns)]


def cuda_pack(cupy, args, keys, rows, n, fill):
    from gpuframe import _core

    core = _core.CudaPartition(args, keys, rows, n)
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
        core, got = cuda_pack(cupy, device_args(args, cupy), keys, table.num_rows, n, fill)
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
    _, got = cuda_pack(cupy, device_args(args, cupy), [0], table.num_rows, 5, 0xAB)
    assert np.array_equal(got, expected)


def assert_packs_like_arrow(on_gpu: PackedPartitions, on_cpu: PackedPartitions) -> None:
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
    on_cpu = hash_partition(table, on, 6)
    assert_packs_like_arrow(hash_partition(frame, on, 6), on_cpu)
    np.testing.assert_array_equal(hash_rows(frame, on).get(), hash_rows(table, on))
    parts = hash_split(frame, on, 6)
    assert [len(p) for p in parts] == on_cpu.rows.tolist()


@pytest.mark.gpu
@pytest.mark.parametrize("on", [["i32"], ["s", "i64"]])  # the scratch of a plain key, of others
def test_cudf_partitions_keep_their_scratch_per_stream(on):
    """Each thread keeps the core's scratch and page-locked totals between calls on one stream:
    a smaller partition after a larger one reuses them, another stream gets its own, and every
    packing is right."""
    cupy = device_or_skip()
    cudf = pytest.importorskip("cudf")
    from gpuframe.exchange import partition as module

    null, other = cupy.cuda.Stream.null, cupy.cuda.Stream(non_blocking=True)
    kept = []
    for rows, stream in ((300_000, null), (2_000, null), (2_000, other), (300_000, null)):
        table = random_table(rows, seed=rows).drop_columns(["bin", "day"])
        frame = cudf.DataFrame.from_arrow(table)
        cupy.cuda.Device().synchronize()  # the frame was made on the default stream
        with stream:
            on_gpu = hash_partition(frame, on, 7)
        stream.synchronize()
        assert_packs_like_arrow(on_gpu, hash_partition(table, on, 7))
        kept.append(module._kept_scratch.by_device[cupy.cuda.runtime.getDevice()])
    assert kept[1] is kept[0]  # smaller, on the same stream
    assert kept[2][0] == other.ptr and kept[2][1] is not kept[1][1]
    assert kept[3][0] == null.ptr and kept[3][1] is not kept[2][1]
    assert kept[3][2] is not kept[2][2]
    assert cupy.cuda.runtime.pointerGetAttributes(kept[0][2].ctypes.data).type == \
        cupy.cuda.runtime.memoryTypeHost  # page-locked


@pytest.mark.gpu
def test_cudf_partitions_hold_scratch_made_for_the_call_until_the_scatter(monkeypatch):
    """Scratch above SCRATCH_KEPT_BYTES is made for the call and dropped by the caller after the
    count; the scatter still reads it. A pool that hands freed memory straight to the next
    allocation (the output) must not see it back before then."""
    cupy = device_or_skip()
    cudf = pytest.importorskip("cudf")
    rmm = pytest.importorskip("rmm")
    from rmm.allocators.cupy import rmm_cupy_allocator

    from gpuframe.exchange import partition as module

    monkeypatch.setattr(module, "SCRATCH_KEPT_BYTES", 0)
    resource, allocator = rmm.mr.get_current_device_resource(), cupy.cuda.get_allocator()
    rmm.mr.set_current_device_resource(
        rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=2**28))
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    try:
        table = random_table(300_000, seed=21).drop_columns(["bin", "day"])
        frame = cudf.DataFrame.from_arrow(table)
        for on in (["i32"], ["s", "i64"]):
            on_gpu = hash_partition(frame, on, 7)
            cupy.cuda.Device().synchronize()
            assert_packs_like_arrow(on_gpu, hash_partition(table, on, 7))
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
        hash_partition(frame[["k", "size"]], ["k"], 4)
