// Host code shared by the CPU and the CUDA partition: argument checks, the error for a given
// destination out of range, and the packed layout. One layout function for both is what lets
// their outputs match byte for byte.
#include <limits>
#include <string>

#include "gpuframe/partition.hpp"

namespace gpuframe {
namespace {

int64_t aligned(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

void check_partition_args(const std::vector<ColumnView>& columns, int64_t n_rows,
                          uint32_t n_destinations) {
  if (n_destinations == 0) throw std::invalid_argument("n_destinations must be at least 1");
  if (n_rows < 0) throw std::invalid_argument("n_rows must not be negative");
  if (n_rows >= static_cast<int64_t>(std::numeric_limits<uint32_t>::max()))
    throw std::invalid_argument("at most 2^32 - 2 rows can be partitioned in one call, not " +
                                std::to_string(n_rows));
  for (size_t c = 0; c < columns.size(); ++c) {
    const ColumnView& col = columns[c];
    if (!supported(col.kind, col.width))
      throw std::invalid_argument("column " + std::to_string(c) + ": unsupported kind " +
                                  std::to_string(static_cast<int>(col.kind)) + " of width " +
                                  std::to_string(col.width));
    if (col.offset < 0)
      throw std::invalid_argument("column " + std::to_string(c) + ": negative offset");
    if (n_rows > 0 && col.data == nullptr && col.kind != Kind::string)
      throw std::invalid_argument("column " + std::to_string(c) + ": no data buffer");
    if (col.kind == Kind::string && col.offsets == nullptr)
      throw std::invalid_argument("column " + std::to_string(c) + ": no offsets buffer");
  }
}

void check_key_columns(const std::vector<ColumnView>& columns,
                       const std::vector<int32_t>& key_columns) {
  if (key_columns.empty()) throw std::invalid_argument("at least one key column is needed");
  for (int32_t k : key_columns)
    if (k < 0 || k >= static_cast<int32_t>(columns.size()))
      throw std::invalid_argument("key column index " + std::to_string(k) + " is out of range");
}

void check_given_destinations(const GivenDestinations& given, int64_t n_rows) {
  if (given.width != 1 && given.width != 2 && given.width != 4 && given.width != 8)
    throw std::invalid_argument("destinations of " + std::to_string(given.width) +
                                " bytes each: give integers of 1, 2, 4 or 8 bytes");
  if (n_rows > 0 && given.data == nullptr)
    throw std::invalid_argument("no destinations buffer");
}

DestinationError destination_error(const GivenDestinations& given, int64_t row, uint64_t bits,
                                   uint32_t n_destinations) {
  std::string value;
  if (given.is_signed) {
    const int shift = 64 - 8 * given.width;  // sign-extend the width's two's complement
    value = std::to_string(static_cast<int64_t>(bits << shift) >> shift);
  } else {
    value = std::to_string(bits);
  }
  return DestinationError("row " + std::to_string(row) + " has destination " + value +
                          ", outside [0, " + std::to_string(n_destinations) + ")");
}

PackedLayout plan_layout(const std::vector<ColumnView>& columns, const std::vector<int64_t>& rows,
                         const std::vector<int64_t>& chars) {
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t nc = static_cast<int64_t>(columns.size());
  PackedLayout layout;
  layout.n_destinations = n;
  layout.n_columns = nc;
  layout.rows = rows;
  layout.chars = chars;
  layout.byte_offsets.assign(n + 1, 0);
  layout.pieces.assign(n * nc * 3, -1);
  int64_t cursor = 0;
  for (int64_t d = 0; d < n; ++d) {
    layout.byte_offsets[d] = cursor;
    for (int64_t c = 0; c < nc; ++c) {
      const ColumnView& col = columns[c];
      int64_t* piece = &layout.pieces[(d * nc + c) * 3];
      if (col.validity != nullptr) {
        piece[0] = cursor;
        cursor += aligned((rows[d] + 7) / 8);
      }
      piece[1] = cursor;
      if (col.kind == Kind::string) {
        int64_t limit = col.width == 4 ? std::numeric_limits<int32_t>::max()
                                       : std::numeric_limits<int64_t>::max();
        if (chars[d * nc + c] > limit)
          throw std::invalid_argument("column " + std::to_string(c) + ": " +
                                      std::to_string(chars[d * nc + c]) +
                                      " string bytes for one destination overflow 32-bit "
                                      "offsets; use large strings");
        cursor += aligned((rows[d] + 1) * col.width);
        piece[2] = cursor;
        cursor += aligned(chars[d * nc + c]);
      } else {
        cursor += aligned(rows[d] * col.width);
      }
    }
  }
  layout.byte_offsets[n] = cursor;
  return layout;
}

int64_t layout_bound(const std::vector<ColumnView>& columns, int64_t n_rows,
                     int64_t n_destinations) {
  // Every piece is padded by less than kAlignment bytes, and the bitmaps of all destinations
  // hold at most (n_rows + 7 * n) / 8 bytes.
  const int64_t n = n_destinations, padding = (kAlignment - 1) * n;
  int64_t bytes = 0;
  for (const ColumnView& col : columns) {
    if (col.kind == Kind::string) return -1;
    if (col.validity != nullptr) bytes += (n_rows + 7 * n) / 8 + padding;
    bytes += n_rows * col.width + padding;
  }
  return bytes;
}

std::vector<std::pair<int64_t, int64_t>> zero_ranges(const std::vector<ColumnView>& columns,
                                                     const PackedLayout& layout) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  auto add = [&ranges](int64_t begin, int64_t used) {
    int64_t end = begin + aligned(used);
    if (begin + used < end) ranges.emplace_back(begin + used, end);
  };
  const int64_t nc = layout.n_columns;
  for (int64_t d = 0; d < layout.n_destinations; ++d) {
    const int64_t rows = layout.rows[d];
    for (int64_t c = 0; c < nc; ++c) {
      const ColumnView& col = columns[c];
      const int64_t* piece = &layout.pieces[(d * nc + c) * 3];
      if (piece[0] >= 0 && rows > 0)
        ranges.emplace_back(piece[0], piece[0] + aligned((rows + 7) / 8));
      if (col.kind == Kind::string) {
        ranges.emplace_back(piece[1], piece[1] + col.width);  // the leading offset, 0
        add(piece[1], (rows + 1) * col.width);
        add(piece[2], layout.chars[d * nc + c]);
      } else {
        add(piece[1], rows * col.width);
      }
    }
  }
  return ranges;
}

}  // namespace gpuframe
