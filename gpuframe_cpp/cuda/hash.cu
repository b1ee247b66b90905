#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "gpuframe/hash.hpp"

namespace gpuframe {
namespace {

constexpr int kMaxKeys = 16;

struct Keys {
  ColumnView columns[kMaxKeys];
  int32_t count;
};

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error in ") + what + ": " +
                             cudaGetErrorString(status));
}

// Keys travel by value as a kernel parameter: no device allocation, no copy to set up.
__global__ void hash_rows_kernel(Keys keys, int64_t n_rows, uint64_t* out, uint32_t* destinations,
                                 uint32_t n_destinations) {
  for (int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; row < n_rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint64_t h = hash_row(keys.columns, keys.count, row);
    out[row] = h;
    if (destinations != nullptr) destinations[row] = destination(h, n_destinations);
  }
}

}  // namespace

void hash_rows_cuda(const std::vector<ColumnView>& keys, int64_t n_rows, uint64_t* out,
                    uint32_t* destinations, uint32_t n_destinations, uintptr_t stream) {
  if (keys.empty() || keys.size() > kMaxKeys)
    throw std::invalid_argument("between 1 and " + std::to_string(kMaxKeys) +
                                " key columns can be hashed on the GPU, not " +
                                std::to_string(keys.size()));
  if (destinations != nullptr && n_destinations == 0)
    throw std::invalid_argument("n_destinations must be at least 1");
  if (n_rows == 0) return;
  Keys packed{};
  for (size_t k = 0; k < keys.size(); ++k) packed.columns[k] = keys[k];
  packed.count = static_cast<int32_t>(keys.size());
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute");
  const int threads = 256;
  const int64_t wanted = (n_rows + threads - 1) / threads;
  const int blocks = static_cast<int>(wanted < sms * 8LL ? wanted : sms * 8LL);
  hash_rows_kernel<<<blocks, threads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
      packed, n_rows, out, destinations, n_destinations);
  check(cudaGetLastError(), "hash_rows_kernel launch");
}

bool built_with_cuda() { return true; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

}  // namespace gpuframe
