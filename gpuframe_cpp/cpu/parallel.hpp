// Split [0, n) into one contiguous range per thread, in order, and run them concurrently.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace gpuframe {

// Ranges below this many rows are not worth a thread of their own.
constexpr int64_t kRowsPerThread = 1 << 16;

inline int thread_count(int64_t n, int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n / kRowsPerThread)));
}

// fn(thread_index, begin, end) for each range; thread t's range precedes thread t + 1's.
template <typename Fn>
void parallel_ranges(int64_t n, int threads, Fn&& fn) {
  int t_count = thread_count(n, threads);
  int64_t step = (n + t_count - 1) / t_count;
  if (t_count == 1) {
    fn(0, 0, n);
    return;
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < t_count; ++t) {
    int64_t begin = std::min(n, t * step), end = std::min(n, begin + step);
    pool.emplace_back([&fn, t, begin, end] { fn(t, begin, end); });
  }
  for (auto& thread : pool) thread.join();
}

}  // namespace gpuframe
