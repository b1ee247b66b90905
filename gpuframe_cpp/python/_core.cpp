// gpuframe._core: the thin binding over gpuframe_cpp. Columns arrive as tuples of raw addresses
// (kind, width, offset, data, validity, offsets) that the Python side takes from Arrow, NumPy,
// CuPy or cuDF buffers and keeps alive for the call; nothing is copied on the way in.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <tuple>
#include <vector>

#include "gpuframe/hash.hpp"
#include "gpuframe/partition.hpp"

namespace nb = nanobind;
using namespace gpuframe;

namespace {

using ColumnTuple = std::tuple<int32_t, int32_t, int64_t, uintptr_t, uintptr_t, uintptr_t>;

std::vector<ColumnView> views(const std::vector<ColumnTuple>& columns) {
  std::vector<ColumnView> out;
  for (const auto& [kind, width, offset, data, validity, offsets] : columns) {
    if (kind < 0 || kind > 2) throw nb::value_error("column kind must be 0, 1 or 2");
    bool string = kind == static_cast<int32_t>(Kind::string);
    if (string ? (width != 4 && width != 8) : (width != 1 && width != 2 && width != 4 && width != 8))
      throw nb::value_error("unsupported column width");
    out.push_back(ColumnView{static_cast<Kind>(kind), width, offset,
                             reinterpret_cast<const uint8_t*>(data),
                             reinterpret_cast<const uint8_t*>(validity),
                             reinterpret_cast<const uint8_t*>(offsets)});
  }
  return out;
}

// A NumPy array that owns a heap vector.
template <typename T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T>&& data, std::vector<size_t> shape) {
  auto* owned = new std::vector<T>(std::move(data));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner);
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "gpuframe's native core: row hashes and hash partition-and-pack, CPU and CUDA";
  m.attr("built_with_cuda") = built_with_cuda();
  m.def("cuda_device_count", &cuda_device_count,
        "CUDA devices usable by this process; 0 without a driver or a build without CUDA.");

  m.def(
      "hash_rows",
      [](const std::vector<ColumnTuple>& columns, int64_t n_rows, int threads) {
        auto keys = views(columns);
        std::vector<uint64_t> out(n_rows);
        {
          nb::gil_scoped_release released;
          hash_rows(keys, n_rows, out.data(), threads);
        }
        return to_numpy(std::move(out), {static_cast<size_t>(n_rows)});
      },
      nb::arg("columns"), nb::arg("n_rows"), nb::arg("threads") = 0,
      "64-bit hash of each row over host key columns.");

  m.def(
      "hash_rows_cuda",
      [](const std::vector<ColumnTuple>& columns, int64_t n_rows, uintptr_t out,
         uintptr_t destinations, uint32_t n_destinations, uintptr_t stream) {
        auto keys = views(columns);
        nb::gil_scoped_release released;
        hash_rows_cuda(keys, n_rows, reinterpret_cast<uint64_t*>(out),
                       reinterpret_cast<uint32_t*>(destinations), n_destinations, stream);
      },
      nb::arg("columns"), nb::arg("n_rows"), nb::arg("out"), nb::arg("destinations"),
      nb::arg("n_destinations"), nb::arg("stream") = 0,
      "The same hashes (and destinations, where `destinations` is not 0) for device columns, "
      "into device memory at `out`, on `stream`.");

  m.def(
      "partition_and_pack",
      [](const std::vector<ColumnTuple>& columns, const std::vector<int32_t>& key_columns,
         int64_t n_rows, uint32_t n_destinations, int threads) {
        auto cols = views(columns);
        std::vector<uint8_t> buffer;
        PackedLayout layout;
        {
          nb::gil_scoped_release released;
          layout = partition_and_pack(cols, key_columns, n_rows, n_destinations, threads,
                                      [&buffer](int64_t bytes) {
                                        buffer.resize(static_cast<size_t>(bytes));
                                        return buffer.data();
                                      });
        }
        size_t n = static_cast<size_t>(layout.n_destinations);
        size_t nc = static_cast<size_t>(layout.n_columns);
        size_t bytes = buffer.size();
        return std::make_tuple(to_numpy(std::move(buffer), {bytes}),
                               to_numpy(std::move(layout.rows), {n}),
                               to_numpy(std::move(layout.byte_offsets), {n + 1}),
                               to_numpy(std::move(layout.pieces), {n, nc, 3}));
      },
      nb::arg("columns"), nb::arg("key_columns"), nb::arg("n_rows"), nb::arg("n_destinations"),
      nb::arg("threads") = 0,
      "Hash-partition host columns into one packed buffer: returns (buffer, rows per "
      "destination, byte offsets per destination, piece offsets [destination, column, 3]).");
}
