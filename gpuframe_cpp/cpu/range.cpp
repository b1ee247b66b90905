// Host range destinations, on several threads, and the checks shared with the CUDA ones.
#include "gpuframe/range.hpp"

#include <limits>
#include <string>

#include "parallel.hpp"

namespace gpuframe {

void check_range_args(const std::vector<ColumnView>& keys, int64_t n_rows,
                      const std::vector<ColumnView>& boundaries, int64_t n_boundaries,
                      const std::vector<KeyOrder>& orders) {
  if (n_rows < 0) throw std::invalid_argument("n_rows must not be negative");
  if (n_boundaries < 0) throw std::invalid_argument("n_boundaries must not be negative");
  if (n_boundaries >= static_cast<int64_t>(std::numeric_limits<uint32_t>::max()))
    throw std::invalid_argument("at most 2^32 - 2 boundaries can be given, not " +
                                std::to_string(n_boundaries));
  if (keys.empty()) throw std::invalid_argument("at least one key column is needed");
  if (boundaries.size() != keys.size() || orders.size() != keys.size())
    throw std::invalid_argument(std::to_string(keys.size()) + " key columns need as many "
                                "boundary columns and orders, not " +
                                std::to_string(boundaries.size()) + " and " +
                                std::to_string(orders.size()));
  for (size_t k = 0; k < keys.size(); ++k) {
    const std::string which = "key column " + std::to_string(k);
    auto check_column = [&which](const ColumnView& col, int64_t rows, const char* what) {
      if (!supported(col.kind, col.width))
        throw std::invalid_argument(which + ": unsupported kind " +
                                    std::to_string(static_cast<int>(col.kind)) + " of width " +
                                    std::to_string(col.width) + " in the " + what);
      if (col.offset < 0) throw std::invalid_argument(which + ": negative offset in the " + what);
      if (rows > 0 && col.data == nullptr && col.kind != Kind::string)
        throw std::invalid_argument(which + ": no data buffer in the " + what);
      if (col.kind == Kind::string && col.offsets == nullptr)
        throw std::invalid_argument(which + ": no offsets buffer in the " + what);
    };
    check_column(keys[k], n_rows, "keys");
    check_column(boundaries[k], n_boundaries, "boundaries");
    const ColumnView &key = keys[k], &boundary = boundaries[k];
    if (key.kind != boundary.kind || (key.kind != Kind::string && key.width != boundary.width))
      throw std::invalid_argument(which + ": the boundaries are of kind " +
                                  std::to_string(static_cast<int>(boundary.kind)) + " and width " +
                                  std::to_string(boundary.width) + ", the keys of kind " +
                                  std::to_string(static_cast<int>(key.kind)) + " and width " +
                                  std::to_string(key.width) + ": cast the boundaries first");
  }
}

void check_boundaries(const std::vector<ColumnView>& boundaries, int64_t n_boundaries,
                      const std::vector<KeyOrder>& orders) {
  if (orders.size() != boundaries.size())
    throw std::invalid_argument(std::to_string(boundaries.size()) + " boundary columns need as "
                                "many orders, not " + std::to_string(orders.size()));
  const int32_t n_keys = static_cast<int32_t>(boundaries.size());
  for (int64_t b = 1; b < n_boundaries; ++b)
    if (compare_rows(boundaries.data(), b - 1, boundaries.data(), b, orders.data(), n_keys) > 0)
      throw BoundaryOrderError("boundary rows " + std::to_string(b - 1) + " and " +
                               std::to_string(b) + " are out of order: sort the boundaries in "
                               "the order asked for");
}

void range_destinations(const std::vector<ColumnView>& keys, int64_t n_rows,
                        const std::vector<ColumnView>& boundaries, int64_t n_boundaries,
                        const std::vector<KeyOrder>& orders, uint32_t* out, int threads) {
  check_range_args(keys, n_rows, boundaries, n_boundaries, orders);
  check_boundaries(boundaries, n_boundaries, orders);
  if (n_rows > 0 && out == nullptr) throw std::invalid_argument("no output buffer");
  const int32_t n_keys = static_cast<int32_t>(keys.size());
  parallel_ranges(n_rows, threads, [&](int, int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row)
      out[row] = range_destination(keys.data(), row, boundaries.data(), n_boundaries,
                                   orders.data(), n_keys);
  });
}

}  // namespace gpuframe
