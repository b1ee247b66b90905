// The CUDA partition-and-pack (CudaPartition in partition.hpp). Stable, like the host one, so both
// write the same bytes for the same input.
//
// Rows are cut into tiles of consecutive rows. Pass one (count) is a count and a scan, pass two
// the scatter:
//   count    each row's destination (its keys' hash, or the caller's: see Hashed and Given) is
//            stored (one byte a row up to 256 destinations, two up to 65536: the scatter reads
//            them back, so the narrower the less traffic; not where the scatter hashes one plain
//            key column again, see StagedKey), and each tile's rows (and string bytes) per
//            destination are counted into counts[array][destination][tile] (array 0: rows,
//            array 1 + s: bytes of the s-th string column);
//   scan     one CUB exclusive sum over all of counts turns every count into the tile's start;
//            each (array, destination)'s start and total follow, and the totals go back to the
//            host, which plans the layout (plan_layout, shared with the CPU);
//   scatter  every tile writes its rows after its start, in input order.
// Two ways to scatter, chosen by the number of destinations n:
//   n <= kStagedMaxDestinations  one block per tile, walking it in chunks of rows (ChunkShape): the
//            chunk's rows are sorted by destination, stably, in shared memory (warp ranks from
//            __match_any_sync, then a scan over destinations), so consecutive threads write
//            consecutive places of one destination: coalesced writes, the GPU's full bandwidth.
//            Fixed-width columns are read whole into shared memory by asynchronous copies
//            (cp.async), the next column while the block writes one: coalesced reads too;
//   larger n one warp per tile, 32 rows at a time: lanes bound for one destination take
//            consecutive places in lane order; writes are scattered, but no shared memory is
//            needed whatever n is.
// Only validity bits need atomics (a 32-bit word can hold bits of rows from two tiles).
#include <cub/device/device_scan.cuh>
#include <cuda_pipeline.h>

#include <algorithm>
#include <cstring>

#include "common.cuh"
#include "gpuframe/hash.hpp"
#include "gpuframe/partition.hpp"

namespace gpuframe {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * 32;
constexpr uint32_t kNoDestination = 0xffffffffu;

constexpr uint32_t kStagedMaxDestinations = 1024;
// The staged scatter's bound on blocks per SM (scatter_blocks_per_sm): 4 for short chunks, so
// that its registers leave room for 4 blocks and the SM keeps more loads and stores in flight
// (unbounded, they leave room for 2, and 3 or 6 do worse: measured on a scatter that kept each
// column's values in registers, benchmarks/results/2026-11-22-partition-phases-h100.md).
// 8192-row chunks in one stage take the shared memory of 2 blocks, so their bound is 2
// (benchmarks/results/2026-11-25-long-chunks-h100.md).

// How the staged scatter walks a tile: `chunk` rows sorted in shared memory at a time, and
// `stages` shared-memory stages of fixed-width columns, each a chunk of 8-byte values and 16
// bytes more for the source's alignment (with two, the next column loads while one is written).
// Longer chunks give longer runs per destination (fuller sectors written) but fewer blocks per
// SM. With the sorted rows and destinations kept as narrow as they go (2 and 1-2 bytes), 8192
// rows in one stage fit 2 blocks per SM and do best from 32 destinations on, the same below;
// 4096-row chunks lose at 256 and more (more blocks a SM, each with shorter runs). A string
// column's lengths take a chunk of 8-byte values more: up to kStringTwoStageMaxDestinations, or
// where 8192 rows do not fit the device's shared memory (sm_80's 163 KiB a block at 1024
// destinations), tables with strings are walked in 2048-row chunks with two stages, which do
// better there (benchmarks/results/2026-11-25-long-chunks-h100.md; the tables this comment held:
// benchmarks/results/2026-11-25-figures-from-code-comments.md).
struct ChunkShape {
  int chunk;
  int stages;
};
constexpr ChunkShape kLongChunks{8192, 1}, kTwoStages{2048, 2};
constexpr uint32_t kStringTwoStageMaxDestinations = 128;

__host__ __device__ constexpr int scatter_blocks_per_sm(int chunk, int stages) {
  return chunk == kLongChunks.chunk && stages == kLongChunks.stages ? 2 : 4;
}

__host__ __device__ constexpr int stage_bytes(int chunk) { return chunk * 8 + 16; }

bool staged(uint32_t n_destinations) { return n_destinations <= kStagedMaxDestinations; }

// Calls f with a value of the type that stores the destinations of n: uint8_t, uint16_t or
// uint32_t.
template <typename F>
void with_dest_type(uint32_t n, F&& f) {
  if (n <= 0x100u)
    f(uint8_t{});
  else if (n <= 0x10000u)
    f(uint16_t{});
  else
    f(uint32_t{});
}

int64_t dest_bytes(uint32_t n) {
  int64_t bytes = 0;
  with_dest_type(n, [&](auto d) { bytes = sizeof(d); });
  return bytes;
}

// Rows per tile: whole units (the staged scatter's chunks, or warps' steps), and long enough
// that the counts (n per tile, 8 bytes each) take at most one byte per row.
int64_t tile_rows(uint32_t n_destinations, int64_t unit) {
  const int64_t wanted = std::max<int64_t>(2048, static_cast<int64_t>(n_destinations) * 8);
  return (wanted + unit - 1) / unit * unit;
}

// Dynamic shared memory of the staged scatter for n destinations.
size_t staged_shared_bytes(uint32_t n, bool strings, ChunkShape shape) {
  const size_t chunk = static_cast<size_t>(shape.chunk);
  return static_cast<size_t>(shape.stages * stage_bytes(shape.chunk))  // column stages
         + static_cast<size_t>(n) * 8 * 2                      // base and place
         + chunk * (2 + dest_bytes(n))                         // sorted_row, sorted_dest
         + (kWarpsPerBlock + 2) * static_cast<size_t>(n) * 4   // warp counts, offsets, counts
         + (strings ? (chunk + 1) * 8 : 0);                    // string lengths, then sums
}

// The staged scatter's shape for n destinations, on the current device.
ChunkShape chunk_shape(uint32_t n, bool strings) {
  if (strings && n <= kStringTwoStageMaxDestinations) return kTwoStages;
  int device = 0, shared_limit = 0;
  cuda::check(cudaGetDevice(&device), "cudaGetDevice");
  cuda::check(cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                     device),
              "cudaDeviceGetAttribute (shared memory per block)");
  return staged_shared_bytes(n, strings, kLongChunks) <= static_cast<size_t>(shared_limit)
             ? kLongChunks
             : kTwoStages;
}

int64_t round_up(int64_t bytes) { return (bytes + 255) / 256 * 256; }

int64_t string_columns(const std::vector<ColumnView>& columns) {
  return std::count_if(columns.begin(), columns.end(),
                       [](const ColumnView& c) { return c.kind == Kind::string; });
}

// Where each part of the caller's scratch lies, in the order they are laid out.
struct Scratch {
  void* dest;           // [row], dest_bytes(n) each; none where the scatter hashes staged keys
  int64_t* counts;      // [array][destination][tile], then one more: the grand total
  int64_t* starts;      // [array][destination]: its first tile's start after the scan
  int64_t* totals;      // [array][destination], then the first refused row (Given)
  ColumnView* columns;  // [column]
  int64_t* pieces;      // [destination][column][3], as in PackedLayout
  int64_t* ranges;      // [range][2]: what the scatter does not write, zeroed first
  void* cub_temp;
  int64_t bytes;

  Scratch(uint8_t* base, int64_t n_rows, int64_t n, int64_t nc, int64_t arrays, int64_t n_tiles,
          int64_t cub_temp_bytes, bool stored_dest) {
    int64_t at = 0;
    auto take = [&](int64_t size) {
      void* p = base == nullptr ? nullptr : base + at;
      at += round_up(size);
      return p;
    };
    dest = stored_dest ? take(n_rows * dest_bytes(static_cast<uint32_t>(n))) : nullptr;
    counts = static_cast<int64_t*>(take((arrays * n * n_tiles + 1) * 8));
    starts = static_cast<int64_t*>(take(arrays * n * 8));
    totals = static_cast<int64_t*>(take((arrays * n + 1) * 8));
    columns = static_cast<ColumnView*>(take(nc * static_cast<int64_t>(sizeof(ColumnView))));
    pieces = static_cast<int64_t*>(take(n * nc * 3 * 8));
    ranges = static_cast<int64_t*>(take(n * nc * 4 * 2 * 8));  // zero_ranges: <= 4 per piece set
    cub_temp = take(cub_temp_bytes);
    bytes = at;
  }
};

__device__ __forceinline__ int64_t string_length(const ColumnView& col, int64_t row) {
  return col.string_offset(row + 1) - col.string_offset(row);
}

// For each string column (s = 1, 2, ... in column order), the leader of each group of lanes bound
// for one destination (`peers`) gets the group's string bytes: add(s, bytes). `lengths` is the
// warp's own shared-memory row of 32 slots.
template <typename Add>
__device__ __forceinline__ void add_peer_string_bytes(const ColumnView* columns, int32_t n_columns,
                                                      int64_t row, bool active, unsigned peers,
                                                      bool leader, int64_t* lengths, Add&& add) {
  const int lane = threadIdx.x & 31;
  int64_t s = 0;
  for (int32_t c = 0; c < n_columns; ++c) {
    const ColumnView col = columns[c];
    if (col.kind != Kind::string) continue;
    ++s;
    lengths[lane] = active ? string_length(col, row) : 0;
    __syncwarp();
    if (leader) {
      int64_t sum = 0;
      for (unsigned m = peers; m != 0; m &= m - 1) sum += lengths[__ffs(m) - 1];
      add(s, sum);
    }
    __syncwarp();
  }
}

template <typename D, typename Route>
__global__ void count_kernel(Route route, const ColumnView* columns, int32_t n_columns,
                             int64_t n_rows, uint32_t n, int64_t tile, int64_t n_tiles, D* dest,
                             int64_t* counts) {
  __shared__ int64_t lengths[kWarpsPerBlock][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (t >= n_tiles) return;  // the whole warp leaves together
  const int64_t begin = t * tile, end = min(begin + tile, n_rows);
  for (int64_t base = begin; base < end; base += 32) {
    const int64_t row = base + lane;
    const bool active = row < end;
    uint32_t d = kNoDestination;
    if (active) {
      d = route(row);
      dest[row] = static_cast<D>(d);
    }
    const unsigned peers = __match_any_sync(cuda::kFullMask, d);
    const bool leader = active && lane == __ffs(peers) - 1;
    if (leader) counts[static_cast<int64_t>(d) * n_tiles + t] += __popc(peers);
    add_peer_string_bytes(columns, n_columns, row, active, peers, leader, lengths[warp],
                          [&](int64_t s, int64_t bytes) {
                            counts[(s * n + d) * n_tiles + t] += bytes;
                          });
    __syncwarp();  // this step's counts are written before the next step reads them
  }
}

__global__ void totals_kernel(const int64_t* counts, int64_t n_tiles, int64_t m, int64_t* starts,
                              int64_t* totals) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= m) return;
  starts[i] = counts[i * n_tiles];
  totals[i] = counts[(i + 1) * n_tiles] - counts[i * n_tiles];
}

__global__ void zero_kernel(const int64_t* ranges, uint8_t* out) {
  const int64_t begin = ranges[2 * blockIdx.x], end = ranges[2 * blockIdx.x + 1];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) out[i] = 0;
}

// Copies up to 32 strings by the whole warp: lane l's string, `length` bytes from input char
// `src`, goes to `dst` (length 0 for lanes without one). The warp walks the strings' bytes, laid
// one after the other, 32 at a time, 4 steps of them in flight, each lane finding its byte's
// string by a binary search over the lanes' first bytes: consecutive lanes read (and, for strings
// bound one after the other, write) consecutive bytes, where a lane copying its own string would
// make every load of a warp touch up to 32 lines once the strings are sorted by destination. The
// search runs over 32-bit offsets where the warp's bytes fit, with 4 steps in flight: 64-bit
// offsets and 8 steps cost more (benchmarks/results/2026-11-25-long-chunks-h100.md). Every lane
// must call it.
template <typename Offset>
__device__ __forceinline__ void walk_warp_strings(const uint8_t* chars, Offset begin,
                                                  Offset total, int64_t src_less_first,
                                                  uintptr_t dst_less_first) {
  const int lane = threadIdx.x & 31;
  constexpr int kSteps = 4;
  for (Offset step = 0; step < total; step += 32 * kSteps) {
    uint8_t byte[kSteps];
    uint8_t* to[kSteps];
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const Offset x = step + u * 32 + lane;
      int owner = 0;  // the last lane whose string begins at or before x: x's string
      for (int half = 16; half > 0; half >>= 1)
        if (__shfl_sync(cuda::kFullMask, begin, owner + half) <= x) owner += half;
      const int64_t from = __shfl_sync(cuda::kFullMask, src_less_first, owner) + x;
      to[u] = reinterpret_cast<uint8_t*>(__shfl_sync(cuda::kFullMask, dst_less_first, owner) + x);
      byte[u] = x < total ? chars[from] : 0;
    }
#pragma unroll
    for (int u = 0; u < kSteps; ++u)
      if (step + u * 32 + lane < total) *to[u] = byte[u];
  }
}

__device__ __forceinline__ void copy_warp_strings(const uint8_t* chars, int64_t src,
                                                  uint8_t* dst, int64_t length) {
  const int lane = threadIdx.x & 31;
  int64_t first = length;  // the lane's first byte among the warp's output bytes
  for (int k = 1; k < 32; k <<= 1) {
    const int64_t below = __shfl_up_sync(cuda::kFullMask, first, k);
    if (lane >= k) first += below;
  }
  const int64_t total = __shfl_sync(cuda::kFullMask, first, 31);
  first -= length;  // non-decreasing over the lanes; an empty string's is the next's
  const int64_t src_less_first = src - first;
  const uintptr_t dst_less_first = reinterpret_cast<uintptr_t>(dst) - first;
  if (total <= INT32_MAX)
    walk_warp_strings<int32_t>(chars, static_cast<int32_t>(first), static_cast<int32_t>(total),
                               src_less_first, dst_less_first);
  else
    walk_warp_strings<int64_t>(chars, first, total, src_less_first, dst_less_first);
}

__device__ __forceinline__ void copy_value(const uint8_t* src, uint8_t* dst, int32_t width) {
  switch (width) {
    case 1: *dst = *src; break;
    case 2: *reinterpret_cast<uint16_t*>(dst) = *reinterpret_cast<const uint16_t*>(src); break;
    case 4: *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src); break;
    default: *reinterpret_cast<uint64_t*>(dst) = *reinterpret_cast<const uint64_t*>(src); break;
  }
}

__device__ __forceinline__ void write_offset(uint8_t* offsets, int64_t index, int64_t value,
                                             int32_t width) {
  if (width == 4)
    reinterpret_cast<int32_t*>(offsets)[index] = static_cast<int32_t>(value);
  else
    reinterpret_cast<int64_t*>(offsets)[index] = value;
}

template <typename D>
__global__ void scatter_kernel(const ColumnView* columns, int32_t n_columns, int64_t n_rows,
                               uint32_t n, int64_t tile, int64_t n_tiles, const D* dest,
                               int64_t* cursors, const int64_t* starts, const int64_t* pieces,
                               uint8_t* out) {
  __shared__ int64_t lengths[kWarpsPerBlock][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (t >= n_tiles) return;  // the whole warp leaves together
  const int64_t begin = t * tile, end = min(begin + tile, n_rows);
  const unsigned lanes_below = (1u << lane) - 1u;
  for (int64_t base = begin; base < end; base += 32) {
    const int64_t row = base + lane;
    const bool active = row < end;
    const uint32_t d = active ? dest[row] : kNoDestination;
    const unsigned peers = __match_any_sync(cuda::kFullMask, d);
    const unsigned below = peers & lanes_below;
    const bool leader = active && lane == __ffs(peers) - 1;
    int64_t at = 0;  // the row's place inside its destination
    if (active) at = cursors[static_cast<int64_t>(d) * n_tiles + t] - starts[d] + __popc(below);
    __syncwarp();  // every lane has read the cursor before the leader moves it
    if (leader) cursors[static_cast<int64_t>(d) * n_tiles + t] += __popc(peers);
    int64_t s = 0;
    for (int32_t c = 0; c < n_columns; ++c) {
      const ColumnView col = columns[c];
      const int64_t* piece = pieces + (static_cast<int64_t>(d) * n_columns + c) * 3;
      if (col.kind == Kind::string) {
        ++s;
        int64_t start = 0, length = 0;
        if (active) {
          start = col.string_offset(row);
          length = col.string_offset(row + 1) - start;
        }
        lengths[warp][lane] = length;
        __syncwarp();
        const int64_t slot = (s * n + d) * n_tiles + t;
        uint8_t* dst = nullptr;
        if (active) {
          int64_t to = cursors[slot] - starts[s * n + d];
          for (unsigned m = below; m != 0; m &= m - 1) to += lengths[warp][__ffs(m) - 1];
          dst = out + piece[2] + to;
          write_offset(out + piece[1], at + 1, to + length, col.width);
        }
        copy_warp_strings(col.data, start, dst, length);
        __syncwarp();
        if (leader) {
          int64_t sum = 0;
          for (unsigned m = peers; m != 0; m &= m - 1) sum += lengths[warp][__ffs(m) - 1];
          cursors[slot] += sum;
        }
      } else if (active) {
        copy_value(col.data + (row + col.offset) * col.width, out + piece[1] + at * col.width,
                   col.width);
      }
      if (active && col.validity != nullptr && col.valid(row))
        atomicOr(reinterpret_cast<unsigned*>(out + piece[0]) + (at >> 5), 1u << (at & 31));
    }
    __syncwarp();  // this step's cursors are written before the next step reads them
  }
}

// Exclusive prefix sum of a[0, m) in shared memory, by the whole block (kThreads threads), in
// place; each thread sums a contiguous run. Must be reached by every thread of the block.
template <typename T>
__device__ void block_exclusive_scan(T* a, int m) {
  __shared__ T warp_sums[kWarpsPerBlock];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int per = (m + kThreads - 1) / kThreads;
  const int first = min(m, static_cast<int>(threadIdx.x) * per), last = min(m, first + per);
  T own = 0;
  for (int i = first; i < last; ++i) own += a[i];
  T inclusive = own;
  for (int k = 1; k < 32; k <<= 1) {
    T up = __shfl_up_sync(cuda::kFullMask, inclusive, k);
    if (lane >= k) inclusive += up;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  T before = inclusive - own;
  for (int w = 0; w < warp; ++w) before += warp_sums[w];
  for (int i = first; i < last; ++i) {
    T v = a[i];
    a[i] = before;
    before += v;
  }
  __syncthreads();
}

// How the staged count hashes its rows: any keys through hash_row; one key column without nulls,
// of 4 or 8 bytes (the usual join key), by reading its values directly, with no branch a row on
// kind, width or validity: the same hash, bit for bit. Through hash_row the count is bound by
// its instructions, not by memory (benchmarks/results/2026-11-23-partition-ingest-h200-eve.md).
// A thread hashes `rows` consecutive rows at a time: for one key column whose values are 16-byte
// aligned, those of one 16-byte load (2 int64 or 4 int32 keys), whose destinations then go out
// in one store: fewer instructions a row (benchmarks/results/2026-11-24-late-h200.md).
struct AnyKeys {
  static constexpr int rows = 1;
  cuda::Keys keys;
  __device__ __forceinline__ uint64_t operator()(int64_t row) const {
    return hash_row(keys.columns, keys.count, row);
  }
  __device__ __forceinline__ void group(int64_t first, uint64_t (&hashes)[1]) const {
    hashes[0] = (*this)(first);
  }
};

// kRows consecutive values of T at p (aligned to their size), loaded or stored as one word.
template <int kBytes>
struct WordOf;
template <> struct WordOf<1> { using type = uint8_t; };
template <> struct WordOf<2> { using type = uint16_t; };
template <> struct WordOf<4> { using type = uint32_t; };
template <> struct WordOf<8> { using type = uint64_t; };
template <> struct WordOf<16> { using type = uint4; };

template <typename T, int kRows>
__device__ __forceinline__ void load_group(const T* p, T (&values)[kRows]) {
  using Word = typename WordOf<sizeof(T) * kRows>::type;
  const Word word = *reinterpret_cast<const Word*>(p);
  memcpy(values, &word, sizeof(Word));
}

template <typename T, int kRows>
__device__ __forceinline__ void store_group(T* p, const T (&values)[kRows]) {
  using Word = typename WordOf<sizeof(T) * kRows>::type;
  Word word;
  memcpy(&word, values, sizeof(Word));
  *reinterpret_cast<Word*>(p) = word;
}

template <typename T, bool kFloating, int kRows>
struct OneKey {
  static constexpr int rows = kRows;
  const T* values;  // the column's data, its slice offset applied; 16-byte aligned if kRows > 1
  __device__ __forceinline__ static uint64_t hash_value(T value) {
    uint64_t bits = value;  // zero-extended, as ColumnView::bits
    if (kFloating) bits = canonical_float_bits(bits, sizeof(T));
    return hash_fixed(bits);
  }
  __device__ __forceinline__ uint64_t operator()(int64_t row) const {
    return hash_value(values[row]);
  }
  // Rows [first, first + kRows), first a multiple of kRows.
  __device__ __forceinline__ void group(int64_t first, uint64_t (&hashes)[kRows]) const {
    T group[kRows];
    load_group(values + first, group);
#pragma unroll
    for (int r = 0; r < kRows; ++r) hashes[r] = hash_value(group[r]);
  }
};

// Calls f(T{}, floating) for one key column without nulls whose values are 4 or 8 bytes wide,
// T their unsigned type and floating a std::bool_constant; false, calling nothing, for any other
// keys.
template <typename F>
bool with_plain_key(const cuda::Keys& keys, F&& f) {
  const ColumnView& key = keys.columns[0];
  if (keys.count != 1 || key.validity != nullptr || key.kind == Kind::string ||
      (key.width != 8 && key.width != 4))
    return false;
  auto typed = [&](auto type) {
    if (key.kind == Kind::floating)
      f(type, std::true_type{});
    else
      f(type, std::false_type{});
  };
  if (key.width == 8)
    typed(uint64_t{});
  else
    typed(uint32_t{});
  return true;
}

// Calls f with the hasher for `keys`.
template <typename F>
void with_hasher(const cuda::Keys& keys, F&& f) {
  const bool plain = with_plain_key(keys, [&](auto type, auto floating) {
    using T = decltype(type);
    constexpr bool kFloating = decltype(floating)::value;
    const ColumnView& key = keys.columns[0];
    const T* values = reinterpret_cast<const T*>(key.data) + key.offset;
    if (reinterpret_cast<uintptr_t>(values) % 16 == 0)
      f(OneKey<T, kFloating, 16 / sizeof(T)>{values});
    else
      f(OneKey<T, kFloating, 1>{values});
  });
  if (!plain) f(AnyKeys{keys});
}

// Where the count sends each row: route(row) is its destination, route.group(first, d) those of
// rows [first, first + rows), first a multiple of rows. Hashed: the destination of the hash that a
// hasher above gives.
template <typename Hasher>
struct Hashed {
  static constexpr int rows = Hasher::rows;
  Hasher hash;
  uint32_t n;
  __device__ __forceinline__ uint32_t operator()(int64_t row) const {
    return destination(hash(row), n);
  }
  __device__ __forceinline__ void group(int64_t first, uint32_t (&d)[rows]) const {
    uint64_t hashes[rows];
    hash.group(first, hashes);
#pragma unroll
    for (int r = 0; r < rows; ++r) d[r] = destination(hashes[r], n);
  }
};

// Given: the caller's destination. A row whose destination is not in [0, n) is counted in
// destination 0, so that the count stays in bounds, and the first such row is kept in `refused`
// (set to all ones before the count): the layout then refuses the partition.
struct Given {
  static constexpr int rows = 1;
  GivenDestinations given;
  uint32_t n;
  unsigned long long* refused;
  __device__ __forceinline__ uint32_t operator()(int64_t row) const {
    const uint64_t bits = given.bits(row);
    if (given.names_destination(bits, n)) return static_cast<uint32_t>(bits);
    atomicMin(refused, static_cast<unsigned long long>(row));
    return 0;
  }
  __device__ __forceinline__ void group(int64_t first, uint32_t (&d)[1]) const {
    d[0] = (*this)(first);
  }
};

// Shared memory of the staged count for n destinations: row counts, then (with string columns)
// one string column's bytes.
size_t staged_count_shared_bytes(uint32_t n, bool strings) {
  const size_t rows = (static_cast<size_t>(n) + 1) / 2 * 8;  // int32 counts, to 8 bytes
  return rows + (strings ? static_cast<size_t>(n) * (8 + 4) : 0);
}

// A staged tile's string bytes are counted in 32 bits, strings of kLongString bytes or more
// (which could overflow them) in 64: shared-memory atomics on 64 bits cost more
// (benchmarks/results/2026-11-25-long-chunks-h100.md).
constexpr int64_t kLongString = int64_t{1} << 18;
static_assert(kStagedMaxDestinations * 8 * kLongString <= (int64_t{1} << 32) &&
                  kLongChunks.chunk * kLongString <= (int64_t{1} << 32),
              "a staged tile's short strings must fit 32 bits");

// Staged count: one block per tile; rows strided over the block, counted in shared memory, one
// count per destination: every row adds itself by a shared-memory atomic. That costs no more
// than a count per thread and destination summed once per tile (up to 32 destinations), and
// less than grouping lanes bound for one destination (__match_any_sync, beyond)
// (benchmarks/results/2026-11-24-late-h200.md).
// Then each string column's bytes are counted the same way, a column at a time, from the
// destinations just stored, which costs less than the leader of each warp's lanes bound for one
// destination adding their rows and bytes (benchmarks/results/2026-11-25-long-chunks-h100.md).
// Destinations are stored unless `dest` is null (StagedKey). With none stored, counting up to 8
// destinations in registers (summed by the warp) instead of by atomics, or taking 8 rows a thread
// a step, gains nothing (benchmarks/results/2026-11-25-staged-key-h100-h200.md). This comment's
// own figures: benchmarks/results/2026-11-25-figures-from-code-comments.md.
template <typename D, typename Route>
__global__ void staged_count_kernel(Route route, const ColumnView* columns, int32_t n_columns,
                                    int64_t n_rows, uint32_t n, int64_t tile, int64_t n_tiles,
                                    D* dest, int64_t* counts) {
  extern __shared__ int64_t shared_counts[];  // staged_count_shared_bytes(n, strings)
  int32_t* hist = reinterpret_cast<int32_t*>(shared_counts);  // [n]
  // With string columns, one column's bytes: of long strings, then of the others (kLongString).
  unsigned long long* long_bytes =
      reinterpret_cast<unsigned long long*>(shared_counts + (n + 1) / 2);  // [n]
  unsigned* bytes = reinterpret_cast<unsigned*>(long_bytes + n);          // [n]
  const int64_t t = blockIdx.x;
  const int64_t begin = t * tile, end = min(begin + tile, n_rows);
  for (uint32_t d = threadIdx.x; d < n; d += kThreads) hist[d] = 0;
  __syncthreads();
  // Each thread takes 4 rows a step, in kItems groups of kRows consecutive rows: their key loads
  // are in flight together. (A step of 4 rows a thread divides every tile.)
  constexpr int kRows = Route::rows, kItems = 4 / kRows, kStep = kThreads * 4;
  int64_t base = begin;
  // Whole steps with no bound check: the loads go out together; checked, nvcc issues each load
  // in its own branch after the hash of the one before
  // (benchmarks/results/2026-11-23-partition-ingest-h200-eve.md).
  for (; base + kStep <= end; base += kStep) {
    uint32_t dests[kItems][kRows];  // every load before the first store, which could alias them
#pragma unroll
    for (int k = 0; k < kItems; ++k)
      route.group(base + (k * kThreads + threadIdx.x) * kRows, dests[k]);
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      D group[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const uint32_t d = dests[k][r];
        group[r] = static_cast<D>(d);
        atomicAdd(&hist[d], 1);
      }
      if (dest != nullptr) store_group(dest + base + (k * kThreads + threadIdx.x) * kRows, group);
    }
  }
  for (int64_t row = base + threadIdx.x; row < end; row += kThreads) {
    const uint32_t d = route(row);
    if (dest != nullptr) dest[row] = static_cast<D>(d);
    atomicAdd(&hist[d], 1);
  }
  __syncthreads();  // the tile's counts are done, and its destinations stored (if asked)
  for (uint32_t d = threadIdx.x; d < n; d += kThreads)
    counts[static_cast<int64_t>(d) * n_tiles + t] = hist[d];
  int64_t s = 0;
  for (int32_t c = 0; c < n_columns; ++c) {
    const ColumnView col = columns[c];
    if (col.kind != Kind::string) continue;
    ++s;
    for (uint32_t d = threadIdx.x; d < n; d += kThreads) {
      long_bytes[d] = 0;
      bytes[d] = 0;
    }
    __syncthreads();
    for (int64_t row = begin + threadIdx.x; row < end; row += kThreads) {
      const int64_t length = string_length(col, row);
      if (length < kLongString)
        atomicAdd(&bytes[dest[row]], static_cast<unsigned>(length));
      else
        atomicAdd(&long_bytes[dest[row]], static_cast<unsigned long long>(length));
    }
    __syncthreads();
    for (uint32_t d = threadIdx.x; d < n; d += kThreads)
      counts[(s * n + d) * n_tiles + t] = static_cast<int64_t>(long_bytes[d] + bytes[d]);
    __syncthreads();  // before the next column's bytes start from 0
  }
}

// Where stage_fixed puts a column's first value in `buffer`: at the source's address mod 16, so
// that source and copy share their alignment.
template <typename Byte>
__device__ __forceinline__ Byte* staged_values(const ColumnView& col, int64_t chunk,
                                               Byte* buffer) {
  const uint8_t* src = col.data + (col.offset + chunk) * col.width;
  return buffer + (reinterpret_cast<uintptr_t>(src) & 15);
}

// Copies rows [chunk, chunk + rows) of a fixed-width column into `buffer` (stage_bytes(kChunk),
// 16-byte aligned) at staged_values, with asynchronous 16-byte copies (cp.async) and plain ones
// for the < 16 bytes either side, and commits them as one group (__pipeline_commit): every
// thread of the block must call it. Reads are coalesced and hold no registers while in flight;
// the writes then gather the chunk's rows from shared memory.
__device__ __forceinline__ void stage_fixed(const ColumnView& col, int64_t chunk, int rows,
                                            uint8_t* buffer) {
  const uint8_t* src = col.data + (col.offset + chunk) * col.width;
  uint8_t* dst = staged_values(col, chunk, buffer);
  const int bytes = rows * col.width;
  const int misalignment = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15);
  const int head = min(bytes, (16 - misalignment) & 15);
  const int vectors = (bytes - head) / 16;
  for (int i = threadIdx.x; i < vectors; i += kThreads)
    __pipeline_memcpy_async(dst + head + 16 * i, src + head + 16 * i, 16);
  for (int i = threadIdx.x; i < head; i += kThreads) dst[i] = src[i];
  for (int i = head + 16 * vectors + threadIdx.x; i < bytes; i += kThreads) dst[i] = src[i];
  __pipeline_commit();
}

// Writes a staged fixed-width column of a sorted chunk: consecutive threads, consecutive places
// of one destination (coalesced writes), values gathered from shared memory. Sorted position j
// of destination d goes to place[d] + j values.
template <typename T, typename D>
__device__ __forceinline__ void write_fixed(const T* __restrict__ staged, int rows,
                                            const D* __restrict__ sorted_dest,
                                            const uint16_t* __restrict__ sorted_row,
                                            uint8_t* const* __restrict__ place) {
#pragma unroll 4
  for (int j = threadIdx.x; j < rows; j += kThreads)
    reinterpret_cast<T*>(place[sorted_dest[j]])[j] = staged[sorted_row[j]];
}

// The next fixed-width column after c (n_columns if none).
__device__ __forceinline__ int32_t next_fixed(const ColumnView* columns, int32_t n_columns,
                                              int32_t c) {
  do ++c;
  while (c < n_columns && columns[c].kind == Kind::string);
  return c;
}

// Asks L2 for the fixed-width column that the block stages `ahead` fixed-width columns after
// column c of `chunk` (on into the tile's next chunks, up to `end`), a 128-byte line a thread.
// The two-stage scatter calls it once column c is staged, while the next one loads and c is
// written: that staging then reads from L2. Two stages only: in the one-stage scatter the
// prefetch gains on some devices and loses on others, and asked for earlier or two columns
// ahead it loses (benchmarks/results/2026-11-25-scratch-fix-interleaved-h100-h200.md).
__device__ __forceinline__ void prefetch_staged(const ColumnView* columns, int32_t n_columns,
                                                int32_t c, int ahead, int64_t chunk, int64_t end,
                                                int chunk_rows) {
  for (int a = 0; a < ahead; ++a) {
    c = next_fixed(columns, n_columns, c);
    if (c == n_columns) {
      chunk += chunk_rows;
      c = next_fixed(columns, n_columns, -1);
      if (c == n_columns || chunk >= end) return;
    }
  }
  const ColumnView& col = columns[c];
  const int64_t rows = min(static_cast<int64_t>(chunk_rows), end - chunk);
  const uintptr_t first = reinterpret_cast<uintptr_t>(col.data + (col.offset + chunk) * col.width);
  const uintptr_t last = first + rows * col.width - 1;
  for (uintptr_t line = (first & ~uintptr_t{127}) + 128 * threadIdx.x; line <= last;
       line += 128 * kThreads)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
}

// Where the staged scatter finds a row's destination: stored by the count...
template <typename D>
struct StoredDestinations {
  static constexpr bool kStagedKey = false;
  const D* dest;
  __device__ __forceinline__ uint32_t operator()(int64_t chunk, int local, const uint8_t*,
                                                 uint32_t) const {
    return dest[chunk + local];
  }
};

// ... or, for one plain key column (with_plain_key) of a table without strings, up to 256
// destinations, by hashing its values once they are staged in shared memory for their own
// write: the scatter then writes that column first (the host puts it at columns[0]) and the
// count stores no destinations, a byte a row less written and read back
// (benchmarks/results/2026-11-25-staged-key-h100-h200.md). Hashing the key from global memory
// instead costs more than the byte saved: the column is read twice
// (benchmarks/results/2026-11-24-night-partition-host-h200.md).
template <typename T, bool kFloating>
struct StagedKey {
  static constexpr bool kStagedKey = true;
  __device__ __forceinline__ uint32_t operator()(int64_t, int local, const uint8_t* staged,
                                                 uint32_t n) const {
    const T value = reinterpret_cast<const T*>(staged)[local];
    return destination(OneKey<T, kFloating, 1>::hash_value(value), n);
  }
};

// Staged scatter: one block per tile, kChunk rows at a time sorted by destination in shared
// memory, then written out by consecutive threads to consecutive places.
template <int kChunk, int kStages, typename D, typename Destinations>
__global__ void __launch_bounds__(kThreads, scatter_blocks_per_sm(kChunk, kStages))
    staged_scatter_kernel(const ColumnView* columns, int32_t n_columns, int64_t n_rows,
                          uint32_t n, int64_t tile, int64_t n_tiles, Destinations where,
                          int64_t* cursors, const int64_t* starts, const int64_t* pieces,
                          uint8_t* out) {
  constexpr int kItems = kChunk / kThreads;  // rows per thread in a chunk
  static_assert(kChunk % kThreads == 0 && kChunk <= 65536, "rows in a chunk: see sorted_row");
  extern __shared__ __align__(16) int64_t shared[];
  // stage_buffers[kStages][stage_bytes(kChunk)]: fixed-width columns of the chunk, the next one
  // loading while the block writes the one before (with two stages). base[n]: the place inside
  // each destination of the chunk's sorted position 0, so sorted position j of destination d goes
  // to base[d] + j. staged[kChunk + 1] (string columns only): lengths in sorted order, then their
  // prefix sums.
  uint8_t* stage_buffers = reinterpret_cast<uint8_t*>(shared);
  int64_t* base = shared + kStages * stage_bytes(kChunk) / 8;
  uint8_t** place = reinterpret_cast<uint8_t**>(base + n);  // [n]: see write_fixed
  int32_t* warp_counts = reinterpret_cast<int32_t*>(place + n);  // [warp][n], then first places
  int32_t* chunk_offset = warp_counts + kWarpsPerBlock * n;  // [n]
  int32_t* chunk_count = chunk_offset + n;                   // [n]
  // The chunk's rows sorted by destination: their rows in the chunk and their destinations, as
  // narrow as they go (less shared memory a block, so more blocks a multiprocessor).
  uint16_t* sorted_row = reinterpret_cast<uint16_t*>(chunk_count + n);  // [kChunk]
  D* sorted_dest = reinterpret_cast<D*>(sorted_row + kChunk);             // [kChunk]
  // After an even count of int32s and kChunk (a multiple of 8) rows of each: 8-byte aligned.
  int64_t* staged = reinterpret_cast<int64_t*>(sorted_dest + kChunk);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned lanes_below = (1u << lane) - 1u;
  const int64_t t = blockIdx.x;
  const int64_t begin = t * tile, end = min(begin + tile, n_rows);
  for (int64_t chunk = begin; chunk < end; chunk += kChunk) {
    const int rows = static_cast<int>(min(static_cast<int64_t>(kChunk), end - chunk));
    for (int i = threadIdx.x; i < kWarpsPerBlock * static_cast<int>(n); i += kThreads)
      warp_counts[i] = 0;
    // The first fixed-width column loads while the chunk is sorted (StagedKey: before, since
    // the sort hashes it).
    const int32_t first_fixed = next_fixed(columns, n_columns, -1);
    if (first_fixed < n_columns)
      stage_fixed(columns[first_fixed], chunk, rows, stage_buffers);
    int fixed_seen = 0;
    if (Destinations::kStagedKey) __pipeline_wait_prior(0);
    __syncthreads();
    const uint8_t* staged_key =
        Destinations::kStagedKey ? staged_values(columns[0], chunk, stage_buffers) : nullptr;
    // Each warp ranks its kItems * 32 consecutive rows, in order, per destination.
    uint32_t d_of[kItems];
    int32_t rank_of[kItems];
    int32_t* mine = warp_counts + warp * n;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {  // all loads first: kItems of them in flight
      const int local = warp * kItems * 32 + k * 32 + lane;
      d_of[k] = local < rows ? where(chunk, local, staged_key, n) : kNoDestination;
    }
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int local = warp * kItems * 32 + k * 32 + lane;
      const bool active = local < rows;
      const uint32_t d = d_of[k];
      const unsigned peers = __match_any_sync(cuda::kFullMask, d);
      rank_of[k] = active ? mine[d] + __popc(peers & lanes_below) : 0;
      __syncwarp();
      if (active && lane == __ffs(peers) - 1) mine[d] += __popc(peers);
      __syncwarp();
    }
    __syncthreads();
    for (uint32_t d = threadIdx.x; d < n; d += kThreads) {
      int32_t total = 0;
      for (int w = 0; w < kWarpsPerBlock; ++w) total += warp_counts[w * n + d];
      chunk_count[d] = total;
      chunk_offset[d] = total;
    }
    __syncthreads();
    block_exclusive_scan(chunk_offset, static_cast<int>(n));
    for (uint32_t d = threadIdx.x; d < n; d += kThreads) {
      int32_t place = chunk_offset[d];
      for (int w = 0; w < kWarpsPerBlock; ++w) {
        const int32_t count = warp_counts[w * n + d];
        warp_counts[w * n + d] = place;
        place += count;
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int local = warp * kItems * 32 + k * 32 + lane;
      if (local >= rows) continue;
      const int32_t p = mine[d_of[k]] + rank_of[k];
      sorted_dest[p] = static_cast<D>(d_of[k]);
      sorted_row[p] = static_cast<uint16_t>(local);
    }
    for (uint32_t d = threadIdx.x; d < n; d += kThreads)
      base[d] = cursors[static_cast<int64_t>(d) * n_tiles + t] - starts[d] - chunk_offset[d];
    __syncthreads();
    int64_t s = 0;
    for (int32_t c = 0; c < n_columns; ++c) {
      const ColumnView col = columns[c];
      if (col.kind == Kind::string) {
        ++s;
        for (int j = threadIdx.x; j <= rows; j += kThreads)
          staged[j] = j < rows ? string_length(col, chunk + sorted_row[j]) : 0;
        __syncthreads();
        block_exclusive_scan(staged, rows + 1);
        // Where the chunk's chars bound for d start, less staged[its first sorted position]:
        // `place` holds these while string columns are written (see write_fixed).
        int64_t* chars_to = reinterpret_cast<int64_t*>(place);
        for (uint32_t d = threadIdx.x; d < n; d += kThreads)
          chars_to[d] = cursors[(s * n + d) * n_tiles + t] - starts[s * n + d] -
                        staged[chunk_offset[d]];
        __syncthreads();
        for (int first = 0; first < rows; first += kThreads) {  // every lane, every step
          const int j = first + static_cast<int>(threadIdx.x);
          int64_t src = 0, length = 0;
          uint8_t* dst = nullptr;
          if (j < rows) {
            const uint32_t d = sorted_dest[j];
            const int64_t* piece = pieces + (static_cast<int64_t>(d) * n_columns + c) * 3;
            const int64_t to = chars_to[d] + staged[j];
            length = staged[j + 1] - staged[j];
            src = col.string_offset(chunk + sorted_row[j]);
            dst = out + piece[2] + to;
            write_offset(out + piece[1], base[d] + j + 1, to + length, col.width);
          }
          copy_warp_strings(col.data, src, dst, length);
        }
        __syncthreads();  // every thread is done with the chunk's strings before the cursors move
        for (uint32_t d = threadIdx.x; d < n; d += kThreads)
          cursors[(s * n + d) * n_tiles + t] +=
              staged[chunk_offset[d] + chunk_count[d]] - staged[chunk_offset[d]];
        __syncthreads();  // `staged` is rewritten by the next string column
      } else {
        // The fixed_seen-th fixed-width column of the chunk is in stage fixed_seen % kStages. The
        // next one loads into the other stage before this one is written, once every thread is
        // done with what that held (two stages), or into this one after (one stage).
        uint8_t* buffer = stage_buffers + (fixed_seen % kStages) * stage_bytes(kChunk);
        const int32_t next = next_fixed(columns, n_columns, c);
        if (kStages == 2) {
          __syncthreads();
          if (next < n_columns)
            stage_fixed(columns[next], chunk, rows,
                        stage_buffers + ((fixed_seen + 1) % 2) * stage_bytes(kChunk));
        }
        // `place` was last read by the writes of the fixed-width column before, which a barrier
        // since ends (the one above, or the one before stage_fixed below).
        for (uint32_t d = threadIdx.x; d < n; d += kThreads)
          place[d] = out + pieces[(static_cast<int64_t>(d) * n_columns + c) * 3 + 1] +
                     base[d] * col.width;
        __pipeline_wait_prior(kStages == 2 && next < n_columns ? 1 : 0);
        __syncthreads();
        if (kStages == 2) prefetch_staged(columns, n_columns, c, kStages, chunk, end, kChunk);
        const uint8_t* values = staged_values(col, chunk, buffer);
        switch (col.width) {
          case 1:
            write_fixed(values, rows, sorted_dest, sorted_row, place);
            break;
          case 2:
            write_fixed(reinterpret_cast<const uint16_t*>(values), rows, sorted_dest, sorted_row,
                        place);
            break;
          case 4:
            write_fixed(reinterpret_cast<const uint32_t*>(values), rows, sorted_dest, sorted_row,
                        place);
            break;
          default:
            write_fixed(reinterpret_cast<const uint64_t*>(values), rows, sorted_dest, sorted_row,
                        place);
        }
        if (kStages == 1 && next < n_columns) {
          __syncthreads();
          stage_fixed(columns[next], chunk, rows, buffer);
        }
        ++fixed_seen;
      }
      if (col.validity != nullptr) {
        for (int j = threadIdx.x; j < rows; j += kThreads) {
          if (!col.valid(chunk + sorted_row[j])) continue;
          const uint32_t d = sorted_dest[j];
          const int64_t at = base[d] + j;
          uint8_t* bitmap = out + pieces[(static_cast<int64_t>(d) * n_columns + c) * 3];
          atomicOr(reinterpret_cast<unsigned*>(bitmap) + (at >> 5), 1u << (at & 31));
        }
      }
    }
    for (uint32_t d = threadIdx.x; d < n; d += kThreads)
      cursors[static_cast<int64_t>(d) * n_tiles + t] += chunk_count[d];
    __syncthreads();  // the cursors and shared arrays are read again by the next chunk
  }
}

unsigned grid(int64_t blocks, const char* what) {
  if (blocks > 0x7fffffffLL)
    throw std::invalid_argument(std::string("too large a grid for ") + what);
  return static_cast<unsigned>(blocks);
}

cuda::Keys key_views(const std::vector<ColumnView>& columns,
                     const std::vector<int32_t>& key_columns) {
  std::vector<ColumnView> keys;
  for (int32_t k : key_columns) keys.push_back(columns[k]);
  return cuda::pack_keys(keys);  // checks the number of keys
}

}  // namespace

CudaPartition::CudaPartition(std::vector<ColumnView> columns, std::vector<int32_t> key_columns,
                             int64_t n_rows, uint32_t n_destinations)
    : CudaPartition(std::move(columns), std::move(key_columns), std::nullopt, n_rows,
                    n_destinations) {}

CudaPartition::CudaPartition(std::vector<ColumnView> columns, GivenDestinations destinations,
                             int64_t n_rows, uint32_t n_destinations)
    : CudaPartition(std::move(columns), {}, destinations, n_rows, n_destinations) {}

CudaPartition::CudaPartition(std::vector<ColumnView> columns, std::vector<int32_t> key_columns,
                             std::optional<GivenDestinations> given, int64_t n_rows,
                             uint32_t n_destinations)
    : columns_(std::move(columns)),
      key_columns_(std::move(key_columns)),
      given_(given),
      n_rows_(n_rows),
      n_destinations_(n_destinations) {
  check_partition_args(columns_, n_rows_, n_destinations_);
  bool plain_key = false;
  if (given_) {
    check_given_destinations(*given_, n_rows_);
  } else {
    check_key_columns(columns_, key_columns_);
    plain_key = with_plain_key(key_views(columns_, key_columns_), [](auto, auto) {});
  }
  string_columns_ = string_columns(columns_);
  const int64_t n = n_destinations_, arrays = 1 + string_columns_;
  if (staged(n_destinations_)) chunk_ = chunk_shape(n_destinations_, string_columns_ > 0).chunk;
  if (n_destinations_ <= 0x100u && chunk_ == kLongChunks.chunk && string_columns_ == 0 &&
      plain_key)
    staged_key_ = key_columns_[0];
  tile_ = tile_rows(n_destinations_, staged(n_destinations_) ? chunk_ : 32);
  n_tiles_ = (n_rows_ + tile_ - 1) / tile_;
  size_t temp = 0;
  cuda::check(cub::DeviceScan::ExclusiveSum(nullptr, temp, static_cast<int64_t*>(nullptr),
                                            static_cast<int64_t*>(nullptr),
                                            arrays * n * n_tiles_ + 1),
              "cub::DeviceScan::ExclusiveSum (size)");
  cub_temp_bytes_ = static_cast<int64_t>(temp);
  scratch_bytes_ = Scratch(nullptr, n_rows_, n, static_cast<int64_t>(columns_.size()), arrays,
                           n_tiles_, cub_temp_bytes_, staged_key_ < 0)
                       .bytes;
}

void CudaPartition::count(uint8_t* scratch, int64_t scratch_capacity, uintptr_t stream_handle,
                          int64_t* totals, int64_t totals_capacity) {
  if (scratch_capacity < scratch_bytes_)
    throw std::invalid_argument("the scratch holds " + std::to_string(scratch_capacity) +
                                " bytes; the partition needs " + std::to_string(scratch_bytes_));
  if (scratch == nullptr || reinterpret_cast<uintptr_t>(scratch) % 256 != 0)
    throw std::invalid_argument("the scratch must be 256-byte aligned device memory");
  const int64_t n = n_destinations_, nc = static_cast<int64_t>(columns_.size());
  const int64_t arrays = 1 + string_columns_;
  if (totals == nullptr) {
    own_totals_.assign(totals_size(), 0);
    totals = own_totals_.data();
  } else if (totals_capacity < totals_size()) {
    throw std::invalid_argument("the totals hold " + std::to_string(totals_capacity) +
                                " int64s; the partition needs " + std::to_string(totals_size()));
  }
  Scratch parts(scratch, n_rows_, n, nc, arrays, n_tiles_, cub_temp_bytes_, staged_key_ < 0);
  // With given destinations, the first refused row comes back after the totals; -1: none.
  auto* refused = reinterpret_cast<unsigned long long*>(parts.totals + arrays * n);
  if (n_rows_ == 0) {
    std::fill(totals, totals + totals_size(), 0);
    if (given_) totals[arrays * n] = -1;
  } else {
    cudaStream_t stream = cuda::as_stream(stream_handle);
    const int64_t n_counts = arrays * n * n_tiles_ + 1;
    cuda::check(cudaMemsetAsync(parts.counts, 0, n_counts * 8, stream), "cudaMemsetAsync");
    if (given_)
      cuda::check(cudaMemsetAsync(refused, 0xff, 8, stream), "cudaMemsetAsync (refused row)");
    // A copy from pageable memory returns once its source is staged: `columns_` may change after.
    cuda::check(cudaMemcpyAsync(parts.columns, columns_.data(), nc * sizeof(ColumnView),
                                cudaMemcpyHostToDevice, stream),
                "cudaMemcpyAsync (columns)");
    with_dest_type(n_destinations_, [&](auto type) {
      using D = decltype(type);
      D* dest = static_cast<D*>(parts.dest);
      if (staged(n_destinations_)) {
        const size_t shared = staged_count_shared_bytes(n_destinations_, string_columns_ > 0);
        auto launch = [&](auto route) {
          auto kernel = staged_count_kernel<D, decltype(route)>;
          cuda::allow_shared_bytes(reinterpret_cast<const void*>(kernel), shared,
                                   "cudaFuncSetAttribute (staged_count_kernel shared memory)");
          cuda::check_pending("staged_count_kernel");
          kernel<<<grid(n_tiles_, "count"), kThreads, shared, stream>>>(
              route, parts.columns, static_cast<int32_t>(nc), n_rows_, n_destinations_, tile_,
              n_tiles_, dest, parts.counts);
          cuda::check_launch("staged_count_kernel", n_tiles_, kThreads, shared);
        };
        if (given_)
          launch(Given{*given_, n_destinations_, refused});
        else
          with_hasher(key_views(columns_, key_columns_), [&](auto hash) {
            launch(Hashed<decltype(hash)>{hash, n_destinations_});
          });
      } else {
        auto launch = [&](auto route) {
          const int64_t blocks = (n_tiles_ + kWarpsPerBlock - 1) / kWarpsPerBlock;
          cuda::check_pending("count_kernel");
          count_kernel<D><<<grid(blocks, "count"), kThreads, 0, stream>>>(
              route, parts.columns, static_cast<int32_t>(nc), n_rows_, n_destinations_, tile_,
              n_tiles_, dest, parts.counts);
          cuda::check_launch("count_kernel", blocks, kThreads, 0);
        };
        if (given_)
          launch(Given{*given_, n_destinations_, refused});
        else
          launch(Hashed<AnyKeys>{AnyKeys{key_views(columns_, key_columns_)}, n_destinations_});
      }
    });
    size_t temp = static_cast<size_t>(cub_temp_bytes_);
    cuda::check(cub::DeviceScan::ExclusiveSum(parts.cub_temp, temp, parts.counts, parts.counts,
                                              n_counts, stream),
                "cub::DeviceScan::ExclusiveSum");
    totals_kernel<<<grid((arrays * n + kThreads - 1) / kThreads, "totals"), kThreads, 0,
                    stream>>>(parts.counts, n_tiles_, arrays * n, parts.starts, parts.totals);
    cuda::check(cudaGetLastError(), "totals_kernel launch");
    cuda::check(cudaMemcpyAsync(totals, parts.totals, totals_size() * 8, cudaMemcpyDeviceToHost,
                                stream),
                "cudaMemcpyAsync (totals)");
  }
  scratch_ = scratch;
  count_stream_ = stream_handle;
  totals_ = totals;
  counted_ = true;
}

const PackedLayout& CudaPartition::layout() {
  if (totals_ == nullptr) return layout_;
  cudaStream_t stream = cuda::as_stream(count_stream_);
  if (n_rows_ > 0) cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  const int64_t n = n_destinations_, nc = static_cast<int64_t>(columns_.size());
  if (given_ && totals_[totals_size() - 1] >= 0) {
    const int64_t row = totals_[totals_size() - 1];
    uint64_t bits = 0;  // little endian: the value's bytes are the low ones
    cuda::check(cudaMemcpyAsync(&bits, given_->data + row * given_->width, given_->width,
                                cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync (refused destination)");
    cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    throw destination_error(*given_, row, bits, n_destinations_);
  }
  std::vector<int64_t> rows(totals_, totals_ + n), chars(n * nc, 0);
  for (int64_t c = 0, s = 0; c < nc; ++c) {
    if (columns_[c].kind != Kind::string) continue;
    ++s;
    for (int64_t d = 0; d < n; ++d) chars[d * nc + c] = totals_[s * n + d];
  }
  layout_ = plan_layout(columns_, rows, chars);
  totals_ = nullptr;
  return layout_;
}

void CudaPartition::scatter(uint8_t* out, int64_t out_bytes, uintptr_t stream_handle) {
  if (!counted_) throw std::logic_error("CudaPartition::scatter called before count");
  layout();
  if (out_bytes < layout_.total_bytes())
    throw std::invalid_argument("the output holds " + std::to_string(out_bytes) +
                                " bytes; the packed partitions need " +
                                std::to_string(layout_.total_bytes()));
  if (layout_.total_bytes() == 0) return;
  if (out == nullptr || reinterpret_cast<uintptr_t>(out) % kAlignment != 0)
    throw std::invalid_argument("the output must be 64-byte aligned device memory");
  const int64_t n = n_destinations_, nc = static_cast<int64_t>(columns_.size());
  const int64_t arrays = 1 + string_columns_;
  Scratch parts(scratch_, n_rows_, n, nc, arrays, n_tiles_, cub_temp_bytes_, staged_key_ < 0);
  std::vector<int64_t> ranges;
  for (const auto& [begin, end] : zero_ranges(columns_, layout_)) {
    ranges.push_back(begin);
    ranges.push_back(end);
  }
  const int64_t n_ranges = static_cast<int64_t>(ranges.size()) / 2;
  if (n_ranges > n * nc * 4) throw std::logic_error("more zero ranges than the scratch holds");
  // Where the scatter hashes staged keys, the key column goes first (StagedKey), and so do its
  // pieces in every destination's.
  std::vector<ColumnView> columns = columns_;
  std::vector<int64_t> pieces = layout_.pieces;
  if (staged_key_ >= 0) {
    std::rotate(columns.begin(), columns.begin() + staged_key_,
                columns.begin() + staged_key_ + 1);
    for (int64_t d = 0; d < n; ++d) {
      auto first = pieces.begin() + d * nc * 3;
      std::rotate(first, first + staged_key_ * 3, first + (staged_key_ + 1) * 3);
    }
  }
  // Columns, pieces and zero ranges lie in this order in the scratch, so that one copy from
  // pageable memory takes them there, not three: each such copy costs host time
  // (benchmarks/results/2026-11-25-figures-from-code-comments.md).
  auto* to = reinterpret_cast<uint8_t*>(parts.columns);
  std::vector<uint8_t> small(reinterpret_cast<uint8_t*>(parts.ranges) + n_ranges * 2 * 8 - to);
  auto put = [&](void* at, const void* from, size_t bytes) {
    if (bytes > 0) std::memcpy(small.data() + (static_cast<uint8_t*>(at) - to), from, bytes);
  };
  put(parts.columns, columns.data(), nc * sizeof(ColumnView));
  put(parts.pieces, pieces.data(), n * nc * 3 * 8);
  put(parts.ranges, ranges.data(), n_ranges * 2 * 8);
  cudaStream_t stream = cuda::as_stream(stream_handle);
  cuda::check(cudaMemcpyAsync(to, small.data(), small.size(), cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync (columns, pieces, zero ranges)");
  if (n_ranges > 0) {
    zero_kernel<<<grid(n_ranges, "zero"), kThreads, 0, stream>>>(parts.ranges, out);
    cuda::check(cudaGetLastError(), "zero_kernel launch");
  }
  if (n_rows_ == 0) return;
  const bool strings = string_columns_ > 0;
  with_dest_type(n_destinations_, [&](auto type) {
    using D = decltype(type);
    const D* dest = static_cast<const D*>(parts.dest);
    if (staged(n_destinations_)) {
      const ChunkShape shape = chunk_ == kTwoStages.chunk ? kTwoStages : kLongChunks;
      const size_t shared = staged_shared_bytes(n_destinations_, strings, shape);
      auto launch = [&](auto kernel, auto where) {
        cuda::allow_shared_bytes(reinterpret_cast<const void*>(kernel), shared,
                                 "cudaFuncSetAttribute (staged_scatter_kernel shared memory)");
        cuda::check_pending("staged_scatter_kernel");
        kernel<<<grid(n_tiles_, "scatter"), kThreads, shared, stream>>>(
            parts.columns, static_cast<int32_t>(nc), n_rows_, n_destinations_, tile_, n_tiles_,
            where, parts.counts, parts.starts, parts.pieces, out);
        cuda::check_launch("staged_scatter_kernel", n_tiles_, kThreads, shared);
      };
      constexpr ChunkShape kLong = kLongChunks, kTwo = kTwoStages;
      using Stored = StoredDestinations<D>;
      if constexpr (sizeof(D) == 1) {
        if (staged_key_ >= 0) {
          with_plain_key(cuda::pack_keys({columns_[staged_key_]}), [&](auto key, auto floating) {
            using Key = StagedKey<decltype(key), decltype(floating)::value>;
            launch(staged_scatter_kernel<kLong.chunk, kLong.stages, D, Key>, Key{});
          });
          return;
        }
      }
      if (chunk_ == kTwo.chunk)
        launch(staged_scatter_kernel<kTwo.chunk, kTwo.stages, D, Stored>, Stored{dest});
      else
        launch(staged_scatter_kernel<kLong.chunk, kLong.stages, D, Stored>, Stored{dest});
    } else {
      const int64_t blocks = (n_tiles_ + kWarpsPerBlock - 1) / kWarpsPerBlock;
      cuda::check_pending("scatter_kernel");
      scatter_kernel<D><<<grid(blocks, "scatter"), kThreads, 0, stream>>>(
          parts.columns, static_cast<int32_t>(nc), n_rows_, n_destinations_, tile_, n_tiles_,
          dest, parts.counts, parts.starts, parts.pieces, out);
      cuda::check_launch("scatter_kernel", blocks, kThreads, 0);
    }
  });
  // The cursors have moved: a second scatter would need a second count.
  counted_ = false;
}

}  // namespace gpuframe
