#include "gpuframe/hash.hpp"

#include "parallel.hpp"

namespace gpuframe {

void hash_rows(const std::vector<ColumnView>& keys, int64_t n_rows, uint64_t* out, int threads) {
  parallel_ranges(n_rows, threads, [&](int, int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row)
      out[row] = hash_row(keys.data(), static_cast<int32_t>(keys.size()), row);
  });
}

}  // namespace gpuframe
