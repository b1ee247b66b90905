// The most times one hash occurs, on the device: a radix sort (CUB) and one pass over the sorted
// hashes. Compiled here rather than built from CuPy's elementwise kernels, which CuPy compiles
// with NVRTC on a process's first call: a copied side's repeats are counted on the first query
// of a fresh worker, and that compile cost more than the query.
#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"
#include "gpuframe/hash.hpp"

namespace gpuframe {
namespace {

// The result's slot leads the scratch; CUB's temporary storage follows it, aligned as
// cudaMalloc aligns.
constexpr int64_t kResultBytes = 256;

// The end of the run of `sorted[start]`: doubling steps, then a binary search, so a run costs
// its length's logarithm and a distinct value (the common case) two loads.
__device__ int64_t run_end(const uint64_t* sorted, int64_t n, int64_t start) {
  const uint64_t value = sorted[start];
  int64_t inside = start, step = 1;
  while (inside + step < n && sorted[inside + step] == value) {
    inside += step;
    step *= 2;
  }
  int64_t outside = inside + step < n ? inside + step : n;  // first index known past the run
  while (outside - inside > 1) {
    const int64_t middle = inside + (outside - inside) / 2;
    if (sorted[middle] == value)
      inside = middle;
    else
      outside = middle;
  }
  return outside;
}

__global__ void longest_run_kernel(const uint64_t* sorted, int64_t n,
                                   unsigned long long* longest) {
  unsigned long long mine = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (i == 0 || sorted[i] != sorted[i - 1]) {
      const auto length = static_cast<unsigned long long>(run_end(sorted, n, i) - i);
      mine = length > mine ? length : mine;
    }
  for (int offset = 16; offset > 0; offset /= 2) {
    const unsigned long long other = __shfl_down_sync(cuda::kFullMask, mine, offset);
    mine = other > mine ? other : mine;
  }
  if ((threadIdx.x & 31) == 0 && mine > 0) atomicMax(longest, mine);
}

size_t sort_bytes(int64_t n) {
  size_t bytes = 0;
  cuda::check(cub::DeviceRadixSort::SortKeys(nullptr, bytes, static_cast<const uint64_t*>(nullptr),
                                             static_cast<uint64_t*>(nullptr), n),
              "cub::DeviceRadixSort::SortKeys (sizing)");
  return bytes;
}

}  // namespace

int64_t longest_repeat_scratch_bytes(int64_t n) {
  if (n < 0) throw std::invalid_argument("n must not be negative");
  return kResultBytes + static_cast<int64_t>(sort_bytes(n));
}

int64_t longest_repeat_cuda(const uint64_t* hashes, int64_t n, uint64_t* sorted,
                            uint8_t* scratch, int64_t scratch_bytes, uintptr_t stream) {
  if (n < 0) throw std::invalid_argument("n must not be negative");
  if (n == 0) return 0;
  if (hashes == nullptr || sorted == nullptr || scratch == nullptr)
    throw std::invalid_argument("no hashes, sorted or scratch buffer");
  size_t temp_bytes = sort_bytes(n);
  if (scratch_bytes < kResultBytes + static_cast<int64_t>(temp_bytes))
    throw std::invalid_argument("the scratch buffer holds " + std::to_string(scratch_bytes) +
                                " bytes; " + std::to_string(n) + " hashes need " +
                                std::to_string(kResultBytes + temp_bytes));
  const cudaStream_t on = cuda::as_stream(stream);
  auto* longest = reinterpret_cast<unsigned long long*>(scratch);
  cuda::check(cudaMemsetAsync(longest, 0, sizeof(*longest), on), "cudaMemsetAsync");
  cuda::check(cub::DeviceRadixSort::SortKeys(scratch + kResultBytes, temp_bytes, hashes, sorted,
                                             n, 0, 64, on),
              "cub::DeviceRadixSort::SortKeys");
  longest_run_kernel<<<cuda::grid_blocks(n), cuda::kGridThreads, 0, on>>>(sorted, n, longest);
  cuda::check(cudaGetLastError(), "longest_run_kernel launch");
  unsigned long long result = 0;
  cuda::check(cudaMemcpyAsync(&result, longest, sizeof(result), cudaMemcpyDeviceToHost, on),
              "cudaMemcpyAsync");
  cuda::check(cudaStreamSynchronize(on), "cudaStreamSynchronize");
  return static_cast<int64_t>(result);
}

}  // namespace gpuframe
