// A read-only view of one Arrow-layout column, host or device memory alike.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GPUFRAME_HD __host__ __device__ __forceinline__
#else
#define GPUFRAME_HD inline
#endif

namespace gpuframe {

enum class Kind : int32_t { fixed = 0, floating = 1, string = 2 };

// Fixed-width and floating columns: `width` bytes per value in `data`. String columns: `width`
// is the byte width of the offsets (4 or 8), `offsets` holds length + 1 of them, `data` the
// chars. `offset` is Arrow's slice offset, in elements, applied to values, offsets and validity.
struct ColumnView {
  Kind kind;
  int32_t width;
  int64_t offset;
  const uint8_t* data;
  const uint8_t* validity;  // Arrow LSB bitmap, or nullptr when every value is valid
  const uint8_t* offsets;   // strings only

  GPUFRAME_HD bool valid(int64_t row) const {
    if (validity == nullptr) return true;
    int64_t i = row + offset;
    return (validity[i >> 3] >> (i & 7)) & 1;
  }

  GPUFRAME_HD int64_t string_offset(int64_t row) const {
    int64_t i = row + offset;
    if (width == 4) {
      int32_t v;
      memcpy(&v, offsets + i * 4, 4);
      return v;
    }
    int64_t v;
    memcpy(&v, offsets + i * 8, 8);
    return v;
  }

  // Fixed-width value bits, zero-extended to 64 bits.
  GPUFRAME_HD uint64_t bits(int64_t row) const {
    uint64_t v = 0;
    memcpy(&v, data + (row + offset) * width, width);
    return v;
  }
};

}  // namespace gpuframe
