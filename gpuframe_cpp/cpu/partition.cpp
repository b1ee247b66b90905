#include "gpuframe/partition.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "gpuframe/hash.hpp"
#include "parallel.hpp"

namespace gpuframe {
namespace {

int64_t aligned(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// Per thread and destination: rows, and string bytes of each column (0 for fixed width).
struct Counts {
  int64_t n_destinations, n_columns;
  std::vector<int64_t> rows;   // [thread][destination]
  std::vector<int64_t> chars;  // [thread][column][destination]
  int64_t& row(int t, int64_t d) { return rows[t * n_destinations + d]; }
  int64_t& ch(int t, int64_t c, int64_t d) {
    return chars[(t * n_columns + c) * n_destinations + d];
  }
};

PackedLayout make_layout(const std::vector<ColumnView>& columns, Counts& counts, int t_count) {
  const int64_t n = counts.n_destinations, nc = counts.n_columns;
  PackedLayout layout;
  layout.n_destinations = n;
  layout.n_columns = nc;
  layout.rows.assign(n, 0);
  layout.byte_offsets.assign(n + 1, 0);
  layout.pieces.assign(n * nc * 3, -1);
  int64_t cursor = 0;
  for (int64_t d = 0; d < n; ++d) {
    layout.byte_offsets[d] = cursor;
    int64_t rows = 0;
    for (int t = 0; t < t_count; ++t) rows += counts.row(t, d);
    layout.rows[d] = rows;
    for (int64_t c = 0; c < nc; ++c) {
      const ColumnView& col = columns[c];
      int64_t* piece = &layout.pieces[(d * nc + c) * 3];
      if (col.validity != nullptr) {
        piece[0] = cursor;
        cursor += aligned((rows + 7) / 8);
      }
      piece[1] = cursor;
      if (col.kind == Kind::string) {
        int64_t chars = 0;
        for (int t = 0; t < t_count; ++t) chars += counts.ch(t, c, d);
        cursor += aligned((rows + 1) * col.width);
        piece[2] = cursor;
        cursor += aligned(chars);
      } else {
        cursor += aligned(rows * col.width);
      }
    }
  }
  layout.byte_offsets[n] = cursor;
  return layout;
}

void write_offset(uint8_t* offsets, int64_t index, int64_t value, int32_t width) {
  if (width == 4) {
    int32_t v = static_cast<int32_t>(value);
    std::memcpy(offsets + index * 4, &v, 4);
  } else {
    std::memcpy(offsets + index * 8, &value, 8);
  }
}

// Replace each thread's count by the sum of the counts of the threads before it.
template <typename Slot>
void exclusive_scan_over_threads(int t_count, Slot&& slot) {
  int64_t base = 0;
  for (int t = 0; t < t_count; ++t) {
    int64_t count = slot(t);
    slot(t) = base;
    base += count;
  }
}

void set_bit(uint8_t* bitmap, int64_t i) {
  // Neighbouring threads can share the byte at the edge of their ranges.
  __atomic_fetch_or(bitmap + (i >> 3), static_cast<uint8_t>(1u << (i & 7)), __ATOMIC_RELAXED);
}

}  // namespace

PackedLayout partition_and_pack(const std::vector<ColumnView>& columns,
                                const std::vector<int32_t>& key_columns, int64_t n_rows,
                                uint32_t n_destinations, int threads,
                                const std::function<uint8_t*(int64_t)>& allocate) {
  if (n_destinations == 0) throw std::invalid_argument("n_destinations must be at least 1");
  std::vector<ColumnView> keys;
  for (int32_t k : key_columns) {
    if (k < 0 || k >= static_cast<int32_t>(columns.size()))
      throw std::out_of_range("key column index " + std::to_string(k) + " out of range");
    keys.push_back(columns[k]);
  }
  const int64_t n = n_destinations, nc = static_cast<int64_t>(columns.size());
  const int t_count = thread_count(n_rows, threads);
  Counts counts{n, nc, std::vector<int64_t>(t_count * n, 0),
                std::vector<int64_t>(t_count * nc * n, 0)};
  std::vector<uint32_t> dest(n_rows);

  // Pass one: destinations, and what each thread's range sends to each destination.
  parallel_ranges(n_rows, t_count, [&](int t, int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      uint32_t d = destination(hash_row(keys.data(), static_cast<int32_t>(keys.size()), row),
                               n_destinations);
      dest[row] = d;
      ++counts.row(t, d);
      for (int64_t c = 0; c < nc; ++c)
        if (columns[c].kind == Kind::string)
          counts.ch(t, c, d) += columns[c].string_offset(row + 1) - columns[c].string_offset(row);
    }
  });
  PackedLayout layout = make_layout(columns, counts, t_count);
  uint8_t* out = allocate(layout.total_bytes());
  if (layout.total_bytes() > 0 && out == nullptr)
    throw std::runtime_error("allocating the packed output failed");

  // Each thread starts where the threads before it stop, so the partition stays stable.
  for (int64_t d = 0; d < n; ++d) {
    exclusive_scan_over_threads(t_count, [&](int t) -> int64_t& { return counts.row(t, d); });
    for (int64_t c = 0; c < nc; ++c) {
      exclusive_scan_over_threads(t_count, [&](int t) -> int64_t& { return counts.ch(t, c, d); });
      const int64_t* piece = &layout.pieces[(d * nc + c) * 3];
      if (piece[0] >= 0) std::memset(out + piece[0], 0, (layout.rows[d] + 7) / 8);
      if (columns[c].kind == Kind::string) write_offset(out + piece[1], 0, 0, columns[c].width);
    }
  }

  // Pass two: scatter every column of every row to its place.
  parallel_ranges(n_rows, t_count, [&](int t, int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t d = dest[row];
      const int64_t at = counts.row(t, d)++;
      for (int64_t c = 0; c < nc; ++c) {
        const ColumnView& col = columns[c];
        const int64_t* piece = &layout.pieces[(d * nc + c) * 3];
        if (piece[0] >= 0 && col.valid(row)) set_bit(out + piece[0], at);
        if (col.kind == Kind::string) {
          int64_t start = col.string_offset(row), length = col.string_offset(row + 1) - start;
          int64_t& cursor = counts.ch(t, c, d);
          std::memcpy(out + piece[2] + cursor, col.data + start, length);
          cursor += length;
          write_offset(out + piece[1], at + 1, cursor, col.width);
        } else {
          std::memcpy(out + piece[1] + at * col.width, col.data + (row + col.offset) * col.width,
                      col.width);
        }
      }
    }
  });
  return layout;
}

}  // namespace gpuframe
