// Row hashes on the device, with the same inline definition as the host (hash.hpp).
#include "common.cuh"
#include "gpuframe/hash.hpp"

namespace gpuframe {
namespace {

__global__ void hash_rows_kernel(cuda::Keys keys, int64_t n_rows, uint64_t* out) {
  for (int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; row < n_rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[row] = hash_row(keys.columns, keys.count, row);
}

}  // namespace

void hash_rows_cuda(const std::vector<ColumnView>& keys, int64_t n_rows, uint64_t* out,
                    uintptr_t stream) {
  const cuda::Keys packed = cuda::pack_keys(keys);
  if (n_rows < 0) throw std::invalid_argument("n_rows must not be negative");
  if (n_rows == 0) return;
  if (out == nullptr) throw std::invalid_argument("no output buffer");
  hash_rows_kernel<<<cuda::grid_blocks(n_rows), cuda::kGridThreads, 0,
                     cuda::as_stream(stream)>>>(packed, n_rows, out);
  cuda::check(cudaGetLastError(), "hash_rows_kernel launch");
}

bool built_with_cuda() { return true; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the "no driver" error
    return 0;
  }
  return count;
}

}  // namespace gpuframe
