// Range destinations: a row's destination is the number of boundary rows that sort at or before it
// (bisect right), so that k sorted boundary rows cut a table into k + 1 destinations, each holding
// keys smaller than the next one's, and equal keys always land together.
//
// The order is pandas' DataFrame.sort_values over several key columns, lexicographic: each column
// ascending or descending; nulls, and NaNs with them, after every value or before it whatever the
// direction, and equal to each other; -0.0 equal to 0.0; strings compared as bytes, a prefix
// first (for UTF-8, code point order). The comparison is inline here, compiled by the host
// compiler and by nvcc, so the CPU and the GPU send every row to the same destination.
//
// Keys are compared as stored: the caller casts the boundaries to the key columns' types first
// (kinds and value widths must match; the widths of string offsets may differ).
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "gpuframe/column.hpp"

namespace gpuframe {

// How the values of one key column compare.
struct KeyOrder {
  bool is_signed;   // fixed-width values are two's complement (integers, temporal types)
  bool ascending;
  bool nulls_last;  // nulls and NaNs after every value, else before, in either direction
};

// The boundaries given are not sorted in the order asked for; the message names two rows.
class BoundaryOrderError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {

template <typename T>
GPUFRAME_HD int three_way(T a, T b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

// Null, or a NaN, which sorts with the nulls.
GPUFRAME_HD bool sorts_as_null(const ColumnView& c, int64_t row) {
  if (!c.valid(row)) return true;
  if (c.kind != Kind::floating) return false;
  const uint64_t bits = c.bits(row);
  if (c.width == 4) return (bits & 0x7fffffffu) > 0x7f800000u;
  return (bits & 0x7fffffffffffffffULL) > 0x7ff0000000000000ULL;
}

GPUFRAME_HD int compare_bytes(const uint8_t* a, int64_t a_size, const uint8_t* b,
                              int64_t b_size) {
  const int64_t common = a_size < b_size ? a_size : b_size;
#if defined(__CUDA_ARCH__)
  for (int64_t i = 0; i < common; ++i)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
#else
  if (common > 0) {
    const int c = memcmp(a, b, static_cast<size_t>(common));
    if (c != 0) return c < 0 ? -1 : 1;
  }
#endif
  return three_way(a_size, b_size);
}

// Two values that are neither null nor NaN, ascending.
GPUFRAME_HD int compare_values(const ColumnView& a, int64_t a_row, const ColumnView& b,
                               int64_t b_row, bool is_signed) {
  switch (a.kind) {
    case Kind::string: {
      const int64_t a_start = a.string_offset(a_row), b_start = b.string_offset(b_row);
      return compare_bytes(a.data + a_start, a.string_offset(a_row + 1) - a_start,
                           b.data + b_start, b.string_offset(b_row + 1) - b_start);
    }
    case Kind::floating: {
      const uint64_t a_bits = a.bits(a_row), b_bits = b.bits(b_row);
      if (a.width == 4) {
        const uint32_t a32 = static_cast<uint32_t>(a_bits), b32 = static_cast<uint32_t>(b_bits);
        float x, y;
        memcpy(&x, &a32, 4);
        memcpy(&y, &b32, 4);
        return three_way(x, y);
      }
      double x, y;
      memcpy(&x, &a_bits, 8);
      memcpy(&y, &b_bits, 8);
      return three_way(x, y);
    }
    default: {
      const uint64_t a_bits = a.bits(a_row), b_bits = b.bits(b_row);
      if (!is_signed) return three_way(a_bits, b_bits);
      const int shift = 64 - 8 * a.width;  // sign-extend the width's two's complement
      return three_way(static_cast<int64_t>(a_bits << shift) >> shift,
                       static_cast<int64_t>(b_bits << shift) >> shift);
    }
  }
}

}  // namespace detail

// <0, 0 or >0 as row a_row of column a sorts before, with or after row b_row of column b.
GPUFRAME_HD int compare_keys(const ColumnView& a, int64_t a_row, const ColumnView& b,
                             int64_t b_row, KeyOrder order) {
  const bool a_null = detail::sorts_as_null(a, a_row), b_null = detail::sorts_as_null(b, b_row);
  if (a_null || b_null) {
    if (a_null && b_null) return 0;
    return a_null == order.nulls_last ? 1 : -1;
  }
  const int c = detail::compare_values(a, a_row, b, b_row, order.is_signed);
  return order.ascending ? c : -c;
}

// The same over n_keys key columns, lexicographic.
GPUFRAME_HD int compare_rows(const ColumnView* a, int64_t a_row, const ColumnView* b,
                             int64_t b_row, const KeyOrder* orders, int32_t n_keys) {
  for (int32_t k = 0; k < n_keys; ++k) {
    const int c = compare_keys(a[k], a_row, b[k], b_row, orders[k]);
    if (c != 0) return c;
  }
  return 0;
}

// The number of the n_boundaries boundary rows that sort at or before row `row` of `keys`.
GPUFRAME_HD uint32_t range_destination(const ColumnView* keys, int64_t row,
                                       const ColumnView* boundaries, int64_t n_boundaries,
                                       const KeyOrder* orders, int32_t n_keys) {
  int64_t low = 0, high = n_boundaries;  // the answer lies in [low, high]
  while (low < high) {
    const int64_t middle = low + (high - low) / 2;
    if (compare_rows(keys, row, boundaries, middle, orders, n_keys) < 0)
      high = middle;
    else
      low = middle + 1;
  }
  return static_cast<uint32_t>(low);
}

// Checks shared by both implementations: as many boundary columns and orders as key columns, of
// matching kinds and widths, and fewer than 2^32 - 1 boundaries. Throws std::invalid_argument
// naming what is wrong.
void check_range_args(const std::vector<ColumnView>& keys, int64_t n_rows,
                      const std::vector<ColumnView>& boundaries, int64_t n_boundaries,
                      const std::vector<KeyOrder>& orders);

// Throws BoundaryOrderError unless the boundaries (host memory) are sorted in `orders` (one per
// boundary column, else std::invalid_argument).
void check_boundaries(const std::vector<ColumnView>& boundaries, int64_t n_boundaries,
                      const std::vector<KeyOrder>& orders);

// Host: out[row] = range_destination(...) for each of the n_rows rows of `keys`, on `threads`
// threads (0: one per core), after checking the arguments and that the boundaries are sorted.
void range_destinations(const std::vector<ColumnView>& keys, int64_t n_rows,
                        const std::vector<ColumnView>& boundaries, int64_t n_boundaries,
                        const std::vector<KeyOrder>& orders, uint32_t* out, int threads);

// Device: the same for columns and boundaries in device memory, into device memory at `out`, on
// the CUDA stream `stream`. Asynchronous: the boundaries' order is not checked here (run
// check_boundaries over a host copy). Up to 16 key columns; throws CudaError on CUDA errors.
void range_destinations_cuda(const std::vector<ColumnView>& keys, int64_t n_rows,
                             const std::vector<ColumnView>& boundaries, int64_t n_boundaries,
                             const std::vector<KeyOrder>& orders, uint32_t* out,
                             uintptr_t stream);

}  // namespace gpuframe
