// Range destinations on the device, with the same inline comparison as the host (range.hpp).
#include "common.cuh"
#include "gpuframe/range.hpp"

namespace gpuframe {
namespace {

// Key columns, boundary columns and orders travel by value as one kernel parameter.
struct RangeKeys {
  ColumnView keys[cuda::kMaxKeys];
  ColumnView boundaries[cuda::kMaxKeys];
  KeyOrder orders[cuda::kMaxKeys];
  int32_t count;
};

__global__ void range_kernel(RangeKeys keys, int64_t n_rows, int64_t n_boundaries,
                             uint32_t* out) {
  for (int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; row < n_rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[row] = range_destination(keys.keys, row, keys.boundaries, n_boundaries, keys.orders,
                                 keys.count);
}

}  // namespace

void range_destinations_cuda(const std::vector<ColumnView>& keys, int64_t n_rows,
                             const std::vector<ColumnView>& boundaries, int64_t n_boundaries,
                             const std::vector<KeyOrder>& orders, uint32_t* out,
                             uintptr_t stream) {
  check_range_args(keys, n_rows, boundaries, n_boundaries, orders);
  if (keys.size() > static_cast<size_t>(cuda::kMaxKeys))
    throw std::invalid_argument("at most " + std::to_string(cuda::kMaxKeys) +
                                " key columns can be compared on the GPU, not " +
                                std::to_string(keys.size()));
  if (n_rows == 0) return;
  if (out == nullptr) throw std::invalid_argument("no output buffer");
  RangeKeys packed{};
  for (size_t k = 0; k < keys.size(); ++k) {
    packed.keys[k] = keys[k];
    packed.boundaries[k] = boundaries[k];
    packed.orders[k] = orders[k];
  }
  packed.count = static_cast<int32_t>(keys.size());
  range_kernel<<<cuda::grid_blocks(n_rows), cuda::kGridThreads, 0, cuda::as_stream(stream)>>>(
      packed, n_rows, n_boundaries, out);
  cuda::check(cudaGetLastError(), "range_kernel launch");
}

}  // namespace gpuframe
