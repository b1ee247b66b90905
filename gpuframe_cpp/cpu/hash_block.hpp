// Row hashes of a block of rows, one key column at a time: the kind, width and nullability are
// looked at once per column and block rather than once per value, so the inner loops are tight.
// The values are those of hash_row in gpuframe/hash.hpp, bit for bit.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "gpuframe/hash.hpp"

namespace gpuframe {
namespace detail {

// h[i] = the value's hash (the first key column) or combine(h[i], it) (the others).
template <typename T, bool kFloat>
void combine_fixed(const ColumnView& col, bool first, int64_t begin, int64_t count,
                   uint64_t* h) {
  const uint8_t* data = col.data + (begin + col.offset) * static_cast<int64_t>(sizeof(T));
  for (int64_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, data + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    uint64_t bits = static_cast<uint64_t>(value);
    if (kFloat) bits = canonical_float_bits(bits, sizeof(T));
    uint64_t v = hash_fixed(bits);
    if (col.validity != nullptr && !col.valid(begin + i)) v = kNullHash;
    h[i] = first ? v : combine(h[i], v);
  }
}

}  // namespace detail

// h[i] = hash_row(keys, begin + i) for i in [0, count).
inline void hash_block(const std::vector<ColumnView>& keys, int64_t begin, int64_t count,
                       uint64_t* h) {
  bool first = true;
  for (const ColumnView& col : keys) {
    if (col.kind == Kind::floating) {
      if (col.width == 4)
        detail::combine_fixed<uint32_t, true>(col, first, begin, count, h);
      else
        detail::combine_fixed<uint64_t, true>(col, first, begin, count, h);
    } else if (col.kind == Kind::fixed) {
      switch (col.width) {
        case 1: detail::combine_fixed<uint8_t, false>(col, first, begin, count, h); break;
        case 2: detail::combine_fixed<uint16_t, false>(col, first, begin, count, h); break;
        case 4: detail::combine_fixed<uint32_t, false>(col, first, begin, count, h); break;
        default: detail::combine_fixed<uint64_t, false>(col, first, begin, count, h); break;
      }
    } else {
      for (int64_t i = 0; i < count; ++i) {
        const uint64_t v = hash_value(col, begin + i);
        h[i] = first ? v : combine(h[i], v);
      }
    }
    first = false;
  }
}

}  // namespace gpuframe
