// Row hashes over several key columns, and the destination each row goes to.
//
// Everything the hash is made of is inline here and compiled both by the host compiler and by
// nvcc, so the CPU and the GPU give every key the same 64-bit hash and the same destination, bit
// for bit. The definition (a pure NumPy re-implementation lives in tests/exchange):
//   - fixed width (integers, timestamps, dates, bool bytes): mix64(bits ^ kSeed * width), `bits`
//     the value's bytes zero-extended to 64 bits (little endian);
//   - floating: the same after canonicalising: -0.0 hashes as 0.0, every NaN as the quiet NaN;
//   - strings: hash_bytes below, over the UTF-8 bytes (8-byte little-endian words, then the tail);
//   - null, in any column: kNullHash, so every row whose keys are all null lands on one
//     destination (pandas joins null keys to null keys);
//   - several key columns: h = hash of the first, then h = combine(h, hash of column k) for
//     the others in key order (one key: its hash alone, one mix64 less a row for the count pass,
//     which hashes every row: benchmarks/results/2026-11-23-partition-ingest-h200-pm.md);
//   - destination(h, n) = high 64 bits of h * n: uniform over [0, n), no division.
// Keys are hashed as stored: the caller casts the join keys of both sides to one common type
// first (an int32 1 and an int64 1 hash alike, but a float64 1.0 and an int64 1 do not, nor do
// an int64 and a timestamp of another unit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpuframe/column.hpp"

namespace gpuframe {

constexpr uint64_t kNullHash = 0x6a09e667f3bcc908ULL;
constexpr uint64_t kSeed = 0x9e3779b97f4a7c15ULL;

// splitmix64's finaliser: a full-avalanche bijection of 64 bits.
GPUFRAME_HD uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Integers of any width hash by value (zero-extended bits), so that the width does not matter
// for non-negative values only; negative values differ by width, hence the common-type rule.
GPUFRAME_HD uint64_t hash_fixed(uint64_t bits) { return mix64(bits ^ kSeed); }

GPUFRAME_HD uint64_t canonical_float_bits(uint64_t bits, int32_t width) {
  if (width == 4) {
    uint32_t b = static_cast<uint32_t>(bits);
    if ((b & 0x7fffffffu) == 0) return 0;                                      // +-0.0
    if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0) return 0x7fc00000u;  // NaN
    return b;
  }
  if ((bits & 0x7fffffffffffffffULL) == 0) return 0;
  if ((bits & 0x7ff0000000000000ULL) == 0x7ff0000000000000ULL &&
      (bits & 0x000fffffffffffffULL) != 0)
    return 0x7ff8000000000000ULL;
  return bits;
}

// Eight bytes at a time, each word folded in through mix64; the length seeds the state.
GPUFRAME_HD uint64_t hash_bytes(const uint8_t* p, int64_t n) {
  uint64_t h = mix64(kSeed ^ static_cast<uint64_t>(n));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = mix64(h ^ w) + kSeed;
  }
  uint64_t tail = 0;
  for (int64_t k = 0; i + k < n; ++k) tail |= static_cast<uint64_t>(p[i + k]) << (8 * k);
  return mix64(h ^ tail);
}

GPUFRAME_HD uint64_t hash_value(const ColumnView& c, int64_t row) {
  if (!c.valid(row)) return kNullHash;
  switch (c.kind) {
    case Kind::string: {
      int64_t start = c.string_offset(row);
      return hash_bytes(c.data + start, c.string_offset(row + 1) - start);
    }
    case Kind::floating:
      return hash_fixed(canonical_float_bits(c.bits(row), c.width));
    default:
      return hash_fixed(c.bits(row));
  }
}

GPUFRAME_HD uint64_t combine(uint64_t seed, uint64_t h) {
  return mix64(seed ^ (h + kSeed + (seed << 6) + (seed >> 2)));
}

GPUFRAME_HD uint64_t hash_row(const ColumnView* keys, int32_t n_keys, int64_t row) {
  uint64_t h = hash_value(keys[0], row);
  for (int32_t k = 1; k < n_keys; ++k) h = combine(h, hash_value(keys[k], row));
  return h;
}

// The high 64 bits of hash * n: uniform over [0, n) without a division.
GPUFRAME_HD uint32_t destination(uint64_t hash, uint32_t n) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint32_t>(__umul64hi(hash, n));
#else
  return static_cast<uint32_t>((static_cast<unsigned __int128>(hash) * n) >> 64);
#endif
}

// Host: hash every row of `keys` (`n_rows` rows) into `out`, on `threads` threads (0: one per
// core).
void hash_rows(const std::vector<ColumnView>& keys, int64_t n_rows, uint64_t* out, int threads);

// Device: the same for columns in device memory, into device memory at `out`, on the CUDA stream
// `stream` (0: the legacy default stream). Asynchronous; throws CudaError on CUDA errors.
void hash_rows_cuda(const std::vector<ColumnView>& keys, int64_t n_rows, uint64_t* out,
                    uintptr_t stream);

// Device: the most times one value occurs in `hashes` (`n` values in device memory), by sorting
// them into `sorted` (room for `n`) with `scratch` (device memory of at least
// longest_repeat_scratch_bytes(n) bytes) on `stream`. Waits for the stream; 0 when n is 0.
int64_t longest_repeat_scratch_bytes(int64_t n);
int64_t longest_repeat_cuda(const uint64_t* hashes, int64_t n, uint64_t* sorted,
                            uint8_t* scratch, int64_t scratch_bytes, uintptr_t stream);

bool built_with_cuda();
int cuda_device_count();  // 0 where there is no driver or no device, or without CUDA

}  // namespace gpuframe
