// Hash partition-and-pack: every row goes to destination(hash of its keys, n), and each
// destination's rows of all columns are written into one contiguous byte range, ready to send.
//
// Two passes over the input: the first hashes the keys and counts rows (and string bytes) per
// destination, the second scatters. The partition is stable: a destination's rows keep their
// input order. Inside a destination's range every piece starts on a 64-byte boundary, column by
// column: the validity bitmap (only for columns that have one), then the values (fixed width)
// or the offsets (strings, rebased to start at 0, of the input's offset width) and the chars.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gpuframe/column.hpp"

namespace gpuframe {

constexpr int64_t kAlignment = 64;

struct PackedLayout {
  int64_t n_destinations = 0;
  int64_t n_columns = 0;
  std::vector<int64_t> rows;          // [destination]
  std::vector<int64_t> byte_offsets;  // [destination + 1]: each destination's range
  // [destination][column][3]: absolute byte offsets of validity (-1: none), values or string
  // offsets, and string chars (-1 for fixed-width columns).
  std::vector<int64_t> pieces;
  int64_t total_bytes() const { return byte_offsets.back(); }
};

// Partition and pack on the host with `threads` threads (0: one per core). `allocate(bytes)` is
// called once, between the passes, for the output buffer, which the caller owns; it may be called
// with 0. Returns where everything went.
PackedLayout partition_and_pack(const std::vector<ColumnView>& columns,
                                const std::vector<int32_t>& key_columns, int64_t n_rows,
                                uint32_t n_destinations, int threads,
                                const std::function<uint8_t*(int64_t)>& allocate);

}  // namespace gpuframe
