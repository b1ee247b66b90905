// Partition-and-pack: every row goes to destination(hash of its keys, n) (see hash.hpp), or to the
// destination the caller gives for it (destinations.hpp), and each destination's rows of all
// columns are written into one contiguous byte range, ready to send.
//
// Two passes over the input: `count` finds each row's destination (hashing its keys, or reading
// and checking the given one) and counts rows (and string bytes) per destination, which fixes the
// layout; the caller allocates the output (NumPy on the host,
// CuPy or RMM on the device: this library never allocates device memory), of the layout's size
// or, while the GPU counts, of `output_bound` bytes, and `scatter` writes it. The partition is
// stable on both the CPU and the GPU: a destination's rows keep their input order. With the
// same input, the CPU and the GPU write the same bytes, padding included.
//
// Layout of the output: destination d owns bytes [byte_offsets[d], byte_offsets[d + 1]). In it,
// column by column, come up to three pieces, each starting on a kAlignment-byte boundary and
// zero-padded up to the next one:
//   validity  Arrow LSB bitmap of rows[d] bits, bits past the end zero; only for columns whose
//             input has a validity bitmap;
//   values    rows[d] fixed-width values, or for strings rows[d] + 1 offsets of the input's
//             offset width, rebased to start at 0;
//   chars     strings only: the destination's chars, back to back.
// pieces[(d * n_columns + c) * 3 + i] is the absolute byte offset of piece i (0 validity,
// 1 values or offsets, 2 chars) of column c for destination d, or -1 where the piece does not
// exist. Each destination's byte range is thus a set of Arrow buffers a receiver wraps without a
// copy.
//
// Limits: fewer than 2^32 rows per call; a destination's string chars must fit the input's offset
// width (large_utf8 for more than 2 GiB).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gpuframe/column.hpp"
#include "gpuframe/destinations.hpp"

namespace gpuframe {

constexpr int64_t kAlignment = 64;

// A CUDA call failed; the message holds the call and CUDA's error string.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PackedLayout {
  int64_t n_destinations = 0;
  int64_t n_columns = 0;
  std::vector<int64_t> rows;          // [destination]
  std::vector<int64_t> byte_offsets;  // [destination + 1]
  std::vector<int64_t> pieces;        // [destination][column][3], see above
  std::vector<int64_t> chars;         // [destination][column]: string bytes (0: fixed width)
  int64_t total_bytes() const { return byte_offsets.empty() ? 0 : byte_offsets.back(); }
};

// The layout for `rows[d]` rows per destination and `chars[d * n_columns + c]` string bytes of
// column c going to destination d (0 for fixed-width columns). Host code shared by both sides.
PackedLayout plan_layout(const std::vector<ColumnView>& columns, const std::vector<int64_t>& rows,
                         const std::vector<int64_t>& chars);

// Bytes enough for the packed output of `n_rows` rows of `columns` into `n_destinations`, however
// the rows fall: their data, bitmaps and every piece's padding. Known before the count, so that
// an output can be allocated while it runs; -1 where there are string columns, whose chars only
// the count finds.
int64_t layout_bound(const std::vector<ColumnView>& columns, int64_t n_rows,
                     int64_t n_destinations);

// Byte ranges [begin, end) of the output that the scatter does not write and that must be
// zeroed before it: whole validity pieces (the scatter ORs bits in) and the padding after every
// piece. String offsets' leading 0 is included too.
std::vector<std::pair<int64_t, int64_t>> zero_ranges(const std::vector<ColumnView>& columns,
                                                     const PackedLayout& layout);

// Checks shared by both implementations; throw std::invalid_argument naming what is wrong.
void check_partition_args(const std::vector<ColumnView>& columns, int64_t n_rows,
                          uint32_t n_destinations);
void check_key_columns(const std::vector<ColumnView>& columns,
                       const std::vector<int32_t>& key_columns);

// Host columns, host output, `threads` std::threads (0: one per core).
class HostPartition {
 public:
  // Pass one: hashes, destinations and counts. The columns' memory must outlive the object.
  HostPartition(std::vector<ColumnView> columns, std::vector<int32_t> key_columns, int64_t n_rows,
                uint32_t n_destinations, int threads);
  // Pass one with the caller's destinations, which need to live through this call only. Throws
  // DestinationError for the first row whose destination is outside [0, n_destinations).
  HostPartition(std::vector<ColumnView> columns, GivenDestinations destinations, int64_t n_rows,
                uint32_t n_destinations, int threads);
  const PackedLayout& layout() const { return layout_; }
  int64_t output_bound() const { return layout_bound(columns_, n_rows_, n_destinations_); }
  // Pass two: writes every byte of out[0, layout().total_bytes()). `out_bytes` is its capacity.
  void scatter(uint8_t* out, int64_t out_bytes) const;

 private:
  // Writes the destinations of rows [first, first + count) to dest[0, count) and returns -1, or
  // returns the first of those rows whose destination is not valid.
  using Route = std::function<int64_t(int64_t first, int64_t count, uint32_t* dest)>;
  HostPartition(std::vector<ColumnView> columns, int64_t n_rows, uint32_t n_destinations,
                int threads);
  // Pass one for any route: the first row `route` refused, or -1 once the layout is planned.
  int64_t count_rows(const Route& route);

  std::vector<ColumnView> columns_;
  int64_t n_rows_;
  int64_t n_destinations_;
  int threads_;
  std::unique_ptr<uint32_t[]> dest_;     // [row]
  std::vector<int64_t> row_base_;        // [thread + 1][destination]: first output row
  std::vector<int64_t> char_base_;       // [thread][column][destination]: first char, strings
  PackedLayout layout_;
};

// Device columns, device output and scratch, kernels on a caller-given CUDA stream (a
// cudaStream_t as an integer; 0 is the legacy default stream). Throws CudaError. One object is
// for one thread: count and scatter change its layout and totals (the Python binding releases
// the GIL in them), so threads partition at once with objects of their own.
class CudaPartition {
 public:
  // No CUDA work yet, except asking the device for CUB's temporary storage size and its shared
  // memory per block.
  CudaPartition(std::vector<ColumnView> columns, std::vector<int32_t> key_columns,
                int64_t n_rows, uint32_t n_destinations);
  // The same with the caller's destinations in device memory, read by `count`: they must stay
  // allocated until it has run on its stream. `layout` throws DestinationError for the first row
  // whose destination is outside [0, n_destinations).
  CudaPartition(std::vector<ColumnView> columns, GivenDestinations destinations, int64_t n_rows,
                uint32_t n_destinations);
  // Device scratch memory `count` and `scatter` need, in bytes.
  int64_t scratch_bytes() const { return scratch_bytes_; }
  // int64s of the count's totals, which come back to the host (with given destinations, one more:
  // the first row whose destination is not valid).
  int64_t totals_size() const {
    return (1 + string_columns_) * n_destinations_ + (given_ ? 1 : 0);
  }
  // Pass one, queued on `stream`, into `scratch` (which must stay allocated until `scatter` has
  // run). Its totals come back into `totals` (totals_size() int64s of host memory) or, given
  // none, into this object's. Into page-locked memory the copy is queued too and this returns at
  // once, so that the caller can allocate the output (output_bound()) while the GPU counts; into
  // pageable memory it returns once the count is done.
  void count(uint8_t* scratch, int64_t scratch_capacity, uintptr_t stream,
             int64_t* totals = nullptr, int64_t totals_capacity = 0);
  int64_t output_bound() const { return layout_bound(columns_, n_rows_, n_destinations_); }
  // The layout, planned from the totals after waiting for the count's stream the first time.
  const PackedLayout& layout();
  // Pass two, asynchronous on `stream`: writes every byte of out[0, layout().total_bytes()).
  void scatter(uint8_t* out, int64_t out_bytes, uintptr_t stream);

 private:
  CudaPartition(std::vector<ColumnView> columns, std::vector<int32_t> key_columns,
                std::optional<GivenDestinations> given, int64_t n_rows, uint32_t n_destinations);

  std::vector<ColumnView> columns_;
  std::vector<int32_t> key_columns_;      // hashed, where no destinations are given
  std::optional<GivenDestinations> given_;
  int64_t n_rows_;
  uint32_t n_destinations_;
  int64_t string_columns_ = 0;
  int32_t chunk_ = 0;  // rows the staged scatter sorts at a time (up to 1024 destinations)
  int32_t staged_key_ = -1;  // the key column the staged scatter hashes again; -1: none
  int64_t tile_ = 0;   // rows per tile
  int64_t n_tiles_ = 0;
  int64_t scratch_bytes_ = 0;
  int64_t cub_temp_bytes_ = 0;
  uint8_t* scratch_ = nullptr;
  bool counted_ = false;
  uintptr_t count_stream_ = 0;
  std::vector<int64_t> own_totals_;
  const int64_t* totals_ = nullptr;  // where the count's totals land; nullptr once planned
  PackedLayout layout_;
};

}  // namespace gpuframe
