// Destinations a caller gives, one integer per row, for a partition that does not hash (a range
// split, a round robin, rows a caller has already placed).
//
// The caller's integers are read as they are, of any width and signedness, so that no conversion
// pass runs before the partition; the reading below compiles for the host and the device alike, so
// both accept and refuse the same values.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "gpuframe/column.hpp"

namespace gpuframe {

// One destination per row: `width` bytes (1, 2, 4 or 8) each at `data`, two's complement integers
// where `is_signed`. Row r's destination is the r-th integer; it must lie in [0, n_destinations).
struct GivenDestinations {
  const uint8_t* data;
  int32_t width;
  bool is_signed;

  // The row's integer, zero-extended to 64 bits.
  GPUFRAME_HD uint64_t bits(int64_t row) const {
    const uint8_t* p = data + row * width;
    switch (width) {
      case 1: return *p;
      case 2: return load<uint16_t>(p);
      case 4: return load<uint32_t>(p);
      default: return load<uint64_t>(p);
    }
  }

  // Whether an integer read by bits() names one of n destinations: a negative one never does.
  GPUFRAME_HD bool names_destination(uint64_t bits, uint32_t n) const {
    const bool negative = is_signed && ((bits >> (8 * width - 1)) & 1) != 0;
    return !negative && bits < n;
  }
};

// A given destination lies outside [0, n_destinations); the message names the row and the value.
class DestinationError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Checks the description (width, buffer) of destinations for `n_rows` rows; throws
// std::invalid_argument naming what is wrong. The values are checked by the partition's count.
void check_given_destinations(const GivenDestinations& given, int64_t n_rows);

// The DestinationError for row `row`, whose integer read by bits() is `bits`.
DestinationError destination_error(const GivenDestinations& given, int64_t row, uint64_t bits,
                                   uint32_t n_destinations);

}  // namespace gpuframe
