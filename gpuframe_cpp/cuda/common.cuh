// Helpers shared by the CUDA sources: error checks and key columns as a kernel parameter.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gpuframe/column.hpp"
#include "gpuframe/partition.hpp"

namespace gpuframe {
namespace cuda {

constexpr int kMaxKeys = 16;
constexpr unsigned kFullMask = 0xffffffffu;

// Key columns travel by value as a kernel parameter: no device allocation, no copy to set up.
struct Keys {
  ColumnView columns[kMaxKeys];
  int32_t count;
};

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw CudaError(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(status) +
                    ": " + cudaGetErrorString(status));
}

// A launch reports its own failure only through cudaGetLastError, which also returns an error an
// earlier call on this thread left: `check_pending` before the launch tells the two apart, and
// the launch's shape in the message says which argument the driver refused.
inline void check_pending(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw CudaError(std::string("CUDA error left by an earlier call, found before launching ") +
                    kernel + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

inline void check_launch(const char* kernel, int64_t blocks, int threads, size_t shared_bytes) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw CudaError(std::string("CUDA error in ") + kernel + " launch (" +
                    std::to_string(blocks) + " blocks of " + std::to_string(threads) +
                    " threads, " + std::to_string(shared_bytes) + " bytes of shared memory): " +
                    cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

// A kernel's cap on dynamic shared memory is one for the whole process, not one per launch:
// set before each launch, another thread's smaller setting could land between a thread's setting
// and its launch, which the driver then refuses (cudaErrorInvalidValue). So it is only ever
// raised, once per kernel, device and size, under a lock.
inline void allow_shared_bytes(const void* kernel, size_t bytes, const char* what) {
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, size_t> allowed;
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mutex);
  size_t& cap = allowed[{device, kernel}];
  if (bytes <= cap) return;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(bytes)),
        what);
  cap = bytes;
}

inline Keys pack_keys(const std::vector<ColumnView>& keys) {
  if (keys.empty() || keys.size() > static_cast<size_t>(kMaxKeys))
    throw std::invalid_argument("between 1 and " + std::to_string(kMaxKeys) +
                                " key columns can be hashed on the GPU, not " +
                                std::to_string(keys.size()));
  Keys packed{};
  for (size_t k = 0; k < keys.size(); ++k) packed.columns[k] = keys[k];
  packed.count = static_cast<int32_t>(keys.size());
  return packed;
}

inline cudaStream_t as_stream(uintptr_t stream) { return reinterpret_cast<cudaStream_t>(stream); }

constexpr int kGridThreads = 256;

// Blocks of kGridThreads for a grid-stride kernel over `n` items: one item a thread, at most 8
// blocks per SM of the current device (each thread then takes several).
inline int grid_blocks(int64_t n) {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute");
  const int64_t wanted = (n + kGridThreads - 1) / kGridThreads;
  return static_cast<int>(wanted < sms * 8LL ? wanted : sms * 8LL);
}

}  // namespace cuda
}  // namespace gpuframe
