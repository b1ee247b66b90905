// The host partition-and-pack. Each thread owns one contiguous range of input rows, in order;
// thread t's rows going to destination d are written after those of threads before t, which is
// what keeps the partition stable.
#include <cstring>
#include <string>

#include "gpuframe/hash.hpp"
#include "gpuframe/partition.hpp"
#include "hash_block.hpp"
#include "parallel.hpp"

namespace gpuframe {
namespace {

// Rows handled together in pass two: their positions stay in L1 while each column is scattered.
constexpr int64_t kBlockRows = 2048;

template <typename T>
void scatter_values(const uint8_t* in, uint8_t* const* out, const uint32_t* dest,
                    const uint32_t* pos, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, in + i * sizeof(T), sizeof(T));
    std::memcpy(out[dest[i]] + static_cast<int64_t>(pos[i]) * sizeof(T), &value, sizeof(T));
  }
}

void write_offset(uint8_t* offsets, int64_t index, int64_t value, int32_t width) {
  if (width == 4) {
    int32_t v = static_cast<int32_t>(value);
    std::memcpy(offsets + index * 4, &v, 4);
  } else {
    std::memcpy(offsets + index * 8, &value, 8);
  }
}

}  // namespace

HostPartition::HostPartition(std::vector<ColumnView> columns, int64_t n_rows,
                             uint32_t n_destinations, int threads)
    : columns_(std::move(columns)), n_rows_(n_rows), n_destinations_(n_destinations) {
  check_partition_args(columns_, n_rows, n_destinations);
  threads_ = thread_count(n_rows_, threads);
}

HostPartition::HostPartition(std::vector<ColumnView> columns, std::vector<int32_t> key_columns,
                             int64_t n_rows, uint32_t n_destinations, int threads)
    : HostPartition(std::move(columns), n_rows, n_destinations, threads) {
  check_key_columns(columns_, key_columns);
  std::vector<ColumnView> keys;
  for (int32_t k : key_columns) keys.push_back(columns_[k]);
  count_rows([&keys, n_destinations](int64_t first, int64_t rows, uint32_t* dest) -> int64_t {
    uint64_t hashes[kBlockRows];
    hash_block(keys, first, rows, hashes);
    for (int64_t i = 0; i < rows; ++i) dest[i] = destination(hashes[i], n_destinations);
    return -1;
  });
}

HostPartition::HostPartition(std::vector<ColumnView> columns, GivenDestinations destinations,
                             int64_t n_rows, uint32_t n_destinations, int threads)
    : HostPartition(std::move(columns), n_rows, n_destinations, threads) {
  check_given_destinations(destinations, n_rows);
  const int64_t refused = count_rows(
      [&destinations, n_destinations](int64_t first, int64_t rows, uint32_t* dest) -> int64_t {
        for (int64_t i = 0; i < rows; ++i) {
          const uint64_t bits = destinations.bits(first + i);
          if (!destinations.names_destination(bits, n_destinations)) return first + i;
          dest[i] = static_cast<uint32_t>(bits);
        }
        return -1;
      });
  if (refused >= 0)
    throw destination_error(destinations, refused, destinations.bits(refused), n_destinations);
}

int64_t HostPartition::count_rows(const Route& route) {
  const int64_t n = n_destinations_, nc = static_cast<int64_t>(columns_.size());
  const int t_count = threads_;
  dest_.reset(new uint32_t[n_rows_]);  // no zeroing: pass one writes every entry
  std::vector<int64_t> rows(t_count * n, 0);        // [thread][destination]
  std::vector<int64_t> refused(t_count, -1);        // [thread]: its first refused row
  char_base_.assign(t_count * nc * n, 0);           // counts first, bases after the scan
  parallel_ranges(n_rows_, t_count, [&](int t, int64_t begin, int64_t end) {
    int64_t* my_rows = &rows[t * n];
    for (int64_t block = begin; block < end; block += kBlockRows) {
      const int64_t count = std::min(kBlockRows, end - block);
      uint32_t* dest = &dest_[block];
      refused[t] = route(block, count, dest);
      if (refused[t] >= 0) return;
      for (int64_t i = 0; i < count; ++i) ++my_rows[dest[i]];
    }
    for (int64_t c = 0; c < nc; ++c) {
      const ColumnView& col = columns_[c];
      if (col.kind != Kind::string) continue;
      int64_t* my_chars = &char_base_[(t * nc + c) * n];
      for (int64_t row = begin; row < end; ++row)
        my_chars[dest_[row]] += col.string_offset(row + 1) - col.string_offset(row);
    }
  });
  for (int64_t row : refused)  // threads' ranges are in row order: the first refusal is the first
    if (row >= 0) return row;

  // Exclusive scans over threads, per destination: where each thread's rows and chars start.
  std::vector<int64_t> totals(n, 0), chars(n * nc, 0);
  row_base_.assign((t_count + 1) * n, 0);
  for (int64_t d = 0; d < n; ++d) {
    for (int t = 0; t < t_count; ++t) {
      row_base_[t * n + d] = totals[d];
      totals[d] += rows[t * n + d];
    }
    row_base_[t_count * n + d] = totals[d];
    for (int64_t c = 0; c < nc; ++c) {
      for (int t = 0; t < t_count; ++t) {
        int64_t& slot = char_base_[(t * nc + c) * n + d];
        int64_t count = slot;
        slot = chars[d * nc + c];
        chars[d * nc + c] += count;
      }
    }
  }
  layout_ = plan_layout(columns_, totals, chars);
  return -1;
}

void HostPartition::scatter(uint8_t* out, int64_t out_bytes) const {
  if (out_bytes < layout_.total_bytes())
    throw std::invalid_argument("the output holds " + std::to_string(out_bytes) +
                                " bytes; the packed partitions need " +
                                std::to_string(layout_.total_bytes()));
  if (layout_.total_bytes() > 0 && out == nullptr)
    throw std::invalid_argument("no output buffer");
  for (const auto& [begin, end] : zero_ranges(columns_, layout_))
    std::memset(out + begin, 0, end - begin);
  const int64_t n = n_destinations_, nc = static_cast<int64_t>(columns_.size());
  // Where each column's pieces start, per destination.
  std::vector<uint8_t*> validity(nc * n), values(nc * n), chars(nc * n);
  for (int64_t c = 0; c < nc; ++c)
    for (int64_t d = 0; d < n; ++d) {
      const int64_t* piece = &layout_.pieces[(d * nc + c) * 3];
      validity[c * n + d] = piece[0] >= 0 ? out + piece[0] : nullptr;
      values[c * n + d] = out + piece[1];
      chars[c * n + d] = piece[2] >= 0 ? out + piece[2] : nullptr;
    }

  parallel_ranges(n_rows_, threads_, [&](int t, int64_t begin, int64_t end) {
    std::vector<int64_t> next(row_base_.begin() + t * n, row_base_.begin() + (t + 1) * n);
    const int64_t* first = &row_base_[t * n];        // this thread's rows in d: [first, last)
    const int64_t* last = &row_base_[(t + 1) * n];
    std::vector<int64_t> char_cursor(char_base_.begin() + t * nc * n,
                                     char_base_.begin() + (t + 1) * nc * n);
    uint32_t pos[kBlockRows];
    for (int64_t block = begin; block < end; block += kBlockRows) {
      const int64_t count = std::min(kBlockRows, end - block);
      const uint32_t* dest = &dest_[block];
      for (int64_t i = 0; i < count; ++i) pos[i] = static_cast<uint32_t>(next[dest[i]]++);
      for (int64_t c = 0; c < nc; ++c) {
        const ColumnView& col = columns_[c];
        if (col.validity != nullptr) {
          uint8_t* const* bitmaps = &validity[c * n];
          for (int64_t i = 0; i < count; ++i) {
            if (!col.valid(block + i)) continue;
            const uint32_t d = dest[i];
            const int64_t p = pos[i];
            uint8_t* byte = bitmaps[d] + (p >> 3);
            const uint8_t bit = static_cast<uint8_t>(1u << (p & 7));
            // Only the first and last byte of a thread's rows in d are shared with a neighbour.
            if ((p >> 3) == (first[d] >> 3) || (p >> 3) == ((last[d] - 1) >> 3))
              __atomic_fetch_or(byte, bit, __ATOMIC_RELAXED);
            else
              *byte |= bit;
          }
        }
        if (col.kind == Kind::string) {
          uint8_t* const* offsets = &values[c * n];
          uint8_t* const* bytes = &chars[c * n];
          int64_t* cursor = &char_cursor[c * n];
          for (int64_t i = 0; i < count; ++i) {
            const uint32_t d = dest[i];
            const int64_t start = col.string_offset(block + i);
            const int64_t length = col.string_offset(block + i + 1) - start;
            if (length > 0) std::memcpy(bytes[d] + cursor[d], col.data + start, length);
            cursor[d] += length;
            write_offset(offsets[d], pos[i] + 1, cursor[d], col.width);
          }
          continue;
        }
        const uint8_t* in = col.data + (block + col.offset) * col.width;
        uint8_t* const* to = &values[c * n];
        switch (col.width) {
          case 1: scatter_values<uint8_t>(in, to, dest, pos, count); break;
          case 2: scatter_values<uint16_t>(in, to, dest, pos, count); break;
          case 4: scatter_values<uint32_t>(in, to, dest, pos, count); break;
          default: scatter_values<uint64_t>(in, to, dest, pos, count); break;
        }
      }
    }
  });
}

}  // namespace gpuframe
