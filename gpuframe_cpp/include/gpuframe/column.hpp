// A read-only view of one Arrow-layout column, in host or device memory alike.
//
// The same struct describes columns for the CPU and the CUDA code; its accessors compile for both
// (GPUFRAME_HD), which is what makes the CPU and the GPU read every value the same way.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GPUFRAME_HD __host__ __device__ __forceinline__
#else
#define GPUFRAME_HD inline
#endif

namespace gpuframe {

// One value of type T at p. On the device, one aligned load: memcpy from a uint8_t* would be
// compiled to single-byte loads. The caller's buffers must then be aligned to T there (the binding
// checks it; Arrow, CuPy and cuDF buffers are). On the host, memcpy, which any alignment allows.
template <typename T>
GPUFRAME_HD T load(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const T*>(p);
#else
  T v;
  memcpy(&v, p, sizeof(T));
  return v;
#endif
}

// fixed: integers, timestamps, dates, booleans stored one byte each (1, 2, 4 or 8 bytes).
// floating: float32 and float64 (4 or 8 bytes), hashed after canonicalising -0.0 and NaNs.
// string: Arrow utf8/large_utf8 layout, offsets (4 or 8 bytes each) plus chars.
enum class Kind : int32_t { fixed = 0, floating = 1, string = 2 };

// Fixed-width and floating columns: `width` bytes per value in `data`. String columns: `width`
// is the byte width of the offsets (4 or 8), `offsets` holds length + 1 of them, `data` the
// chars. `offset` is Arrow's slice offset, in elements, applied to values, offsets and validity
// alike (string offsets are used as they are: they index `data` directly).
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
    if (width == 4) return load<int32_t>(offsets + i * 4);
    return load<int64_t>(offsets + i * 8);
  }

  // Fixed-width value bits, zero-extended to 64 bits.
  GPUFRAME_HD uint64_t bits(int64_t row) const {
    const uint8_t* p = data + (row + offset) * width;
    switch (width) {
      case 1: return *p;
      case 2: return load<uint16_t>(p);
      case 4: return load<uint32_t>(p);
      default: return load<uint64_t>(p);
    }
  }
};

// Whether `kind` and `width` form a column this library handles.
inline bool supported(Kind kind, int32_t width) {
  switch (kind) {
    case Kind::fixed: return width == 1 || width == 2 || width == 4 || width == 8;
    case Kind::floating:
    case Kind::string: return width == 4 || width == 8;
  }
  return false;
}

}  // namespace gpuframe
