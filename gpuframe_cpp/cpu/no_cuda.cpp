// Built instead of the CUDA sources when gpuframe is compiled without CUDA.
#include <stdexcept>

#include "gpuframe/hash.hpp"

namespace gpuframe {

void hash_rows_cuda(const std::vector<ColumnView>&, int64_t, uint64_t*, uint32_t*, uint32_t,
                    uintptr_t) {
  throw std::runtime_error("gpuframe was built without CUDA: rebuild with nvcc on the PATH");
}

bool built_with_cuda() { return false; }

int cuda_device_count() { return 0; }

}  // namespace gpuframe
