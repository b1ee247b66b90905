// Built instead of the CUDA sources when gpuframe is compiled without CUDA.
#include "gpuframe/hash.hpp"
#include "gpuframe/partition.hpp"
#include "gpuframe/range.hpp"

namespace gpuframe {
namespace {

[[noreturn]] void no_cuda() {
  throw CudaError("gpuframe was built without CUDA: rebuild with nvcc on the PATH");
}

}  // namespace

void hash_rows_cuda(const std::vector<ColumnView>&, int64_t, uint64_t*, uintptr_t) { no_cuda(); }

int64_t longest_repeat_scratch_bytes(int64_t) { no_cuda(); }

int64_t longest_repeat_cuda(const uint64_t*, int64_t, uint64_t*, uint8_t*, int64_t, uintptr_t) {
  no_cuda();
}

void range_destinations_cuda(const std::vector<ColumnView>&, int64_t,
                             const std::vector<ColumnView>&, int64_t,
                             const std::vector<KeyOrder>&, uint32_t*, uintptr_t) {
  no_cuda();
}

CudaPartition::CudaPartition(std::vector<ColumnView>, std::vector<int32_t>, int64_t, uint32_t) {
  no_cuda();
}

CudaPartition::CudaPartition(std::vector<ColumnView>, GivenDestinations, int64_t, uint32_t) {
  no_cuda();
}

void CudaPartition::count(uint8_t*, int64_t, uintptr_t, int64_t*, int64_t) { no_cuda(); }

const PackedLayout& CudaPartition::layout() { no_cuda(); }

void CudaPartition::scatter(uint8_t*, int64_t, uintptr_t) { no_cuda(); }

bool built_with_cuda() { return false; }

int cuda_device_count() { return 0; }

}  // namespace gpuframe
