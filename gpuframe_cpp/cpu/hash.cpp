// Host row hashes, on several threads.
#include "gpuframe/hash.hpp"

#include "hash_block.hpp"
#include "parallel.hpp"

namespace gpuframe {

void hash_rows(const std::vector<ColumnView>& keys, int64_t n_rows, uint64_t* out, int threads) {
  parallel_ranges(n_rows, threads, [&](int, int64_t begin, int64_t end) {
    hash_block(keys, begin, end - begin, out + begin);
  });
}

}  // namespace gpuframe
