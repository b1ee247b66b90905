// gpuframe._core: the thin binding over gpuframe_cpp.
//
// A column is a tuple (kind, width, offset, data, validity, offsets): kind FIXED, FLOATING or
// STRING, width and offset as in ColumnView (column.hpp), and its buffers as arrays (NumPy or
// anything with the buffer protocol on the host, CuPy or anything with DLPack on the device), None
// where absent; device buffers may also be (address, bytes) pairs of integers, taken on trust as
// device memory that the caller keeps allocated (a CuPy view of each of a cuDF frame's buffers
// would add host time to every call: benchmarks/results/2026-11-25-staged-key-h100-h200.md).
// Only addresses are taken: nothing is copied on the way in, and the partition objects keep the
// column tuples alive as long as they live. Memory the core writes comes from the caller too
// (NumPy on the host, CuPy on the device), so RMM pools are honoured.
// Given destinations are a 1-D integer array of any width and signedness, on the columns' device.
// A key order is a tuple (is_signed, ascending, nulls_last), as KeyOrder (range.hpp).
// CudaError (a RuntimeError) carries CUDA's error string; bad arguments raise ValueError, and so
// do DestinationError (a given destination out of range) and BoundaryOrderError (unsorted
// boundaries), as classes of their own.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "gpuframe/destinations.hpp"
#include "gpuframe/hash.hpp"
#include "gpuframe/partition.hpp"
#include "gpuframe/range.hpp"

namespace nb = nanobind;
using namespace gpuframe;

namespace {

using Address = std::tuple<uintptr_t, int64_t>;  // a device buffer's address and bytes
using Buffer = std::optional<std::variant<Address, nb::ndarray<nb::ro>>>;
using ColumnTuple = std::tuple<int32_t, int32_t, int64_t, Buffer, Buffer, Buffer>;
using HostBytes = nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using DeviceBytes = nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cuda>;
using HostTotals = nb::ndarray<int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using DeviceHashes = nb::ndarray<uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cuda>;
using DeviceHashesIn = nb::ndarray<const uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cuda>;
using Destinations = nb::ndarray<nb::ro, nb::ndim<1>, nb::c_contig>;
using HostDestinationsOut = nb::ndarray<uint32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using DeviceDestinationsOut = nb::ndarray<uint32_t, nb::ndim<1>, nb::c_contig, nb::device::cuda>;
using OrderTuple = std::tuple<bool, bool, bool>;  // is_signed, ascending, nulls_last

// Column views over the tuples' buffers, which must all live on `device` (nb::device::cpu::value
// or nb::device::cuda::value) and be large enough for `n_rows` rows: the core reads raw memory,
// so a short buffer is refused here, with the column's position, rather than read past its end.
std::vector<ColumnView> views(const std::vector<ColumnTuple>& columns, int32_t device,
                              int64_t n_rows) {
  if (n_rows < 0) throw nb::value_error("n_rows must not be negative");
  const bool host = device == nb::device::cpu::value;
  std::vector<ColumnView> out;
  for (size_t c = 0; c < columns.size(); ++c) {
    const auto& [kind, width, offset, data, validity, offsets] = columns[c];
    auto fail = [c](const std::string& what) {
      throw nb::value_error(("column " + std::to_string(c) + ": " + what).c_str());
    };
    if (kind < 0 || kind > 2 || !supported(static_cast<Kind>(kind), width))
      fail("kind " + std::to_string(kind) + " of width " + std::to_string(width) +
           " is not supported");
    if (offset < 0) fail("negative offset " + std::to_string(offset));
    // The buffer's address, after checking where it lives and that it holds `bytes` bytes.
    auto address = [&](const Buffer& buffer, const char* what, int64_t bytes) -> const uint8_t* {
      if (!buffer) {
        if (bytes > 0) fail(std::string("no ") + what + " buffer");
        return nullptr;
      }
      const uint8_t* data = nullptr;
      int64_t held = 0;
      if (const auto* pair = std::get_if<Address>(&*buffer)) {
        if (host) fail(std::string("the ") + what + " buffer is an address: give host arrays");
        data = reinterpret_cast<const uint8_t*>(std::get<0>(*pair));
        held = std::get<1>(*pair);
      } else {
        const auto& array = std::get<nb::ndarray<nb::ro>>(*buffer);
        if (array.device_type() != device)
          fail(std::string("the ") + what + " buffer is not in " +
               (host ? "host" : "CUDA device") + " memory");
        data = static_cast<const uint8_t*>(array.data());
        held = static_cast<int64_t>(array.nbytes());
      }
      if (held < bytes)
        fail(std::string("the ") + what + " buffer holds " + std::to_string(held) + " bytes; " +
             std::to_string(n_rows) + " rows at offset " + std::to_string(offset) + " need " +
             std::to_string(bytes));
      return data;
    };
    const int64_t end = n_rows > 0 ? offset + n_rows : 0;  // elements read, from the buffer start
    ColumnView view{static_cast<Kind>(kind), width, offset, nullptr,
                    address(validity, "validity", validity ? (end + 7) / 8 : 0), nullptr};
    if (view.kind == Kind::string) {
      view.offsets = address(offsets, "offsets", n_rows > 0 ? (end + 1) * width : 0);
      int64_t chars = 0;  // bytes of chars the rows reach (checked where the host can read them)
      if (host && n_rows > 0) {
        const int64_t first = view.string_offset(0), last = view.string_offset(n_rows);
        if (first < 0 || last < first)
          fail("string offsets run from " + std::to_string(first) + " to " +
               std::to_string(last));
        chars = last;
      }
      view.data = address(data, "chars", chars);
    } else {
      view.data = address(data, "data", end * width);
    }
    // The device reads values and offsets with one aligned load each; a misaligned one would
    // end the CUDA context.
    const uint8_t* typed = view.kind == Kind::string ? view.offsets : view.data;
    if (!host && reinterpret_cast<uintptr_t>(typed) % width != 0)
      fail(std::string("the ") + (view.kind == Kind::string ? "offsets" : "data") +
           " buffer is not aligned to its " + std::to_string(width) + "-byte values");
    out.push_back(view);
  }
  return out;
}

// The core's view of an integer array of one destination per row on `device`, refused unless it
// is one (the core reads raw memory: its width and length are checked here).
GivenDestinations given_destinations(const Destinations& array, int32_t device, int64_t n_rows) {
  const bool host = device == nb::device::cpu::value;
  if (array.device_type() != device)
    throw nb::value_error(host ? "the destinations are not in host memory"
                               : "the destinations are not in CUDA device memory");
  const nb::dlpack::dtype dtype = array.dtype();
  const bool is_signed = dtype.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Int);
  const bool integers =
      is_signed || dtype.code == static_cast<uint8_t>(nb::dlpack::dtype_code::UInt);
  if (!integers || dtype.lanes != 1 ||
      (dtype.bits != 8 && dtype.bits != 16 && dtype.bits != 32 && dtype.bits != 64))
    throw nb::value_error("the destinations must be integers of 8, 16, 32 or 64 bits");
  if (static_cast<int64_t>(array.shape(0)) != n_rows)
    throw nb::value_error((std::to_string(array.shape(0)) + " destinations for " +
                           std::to_string(n_rows) + " rows: give one per row").c_str());
  const auto* data = static_cast<const uint8_t*>(array.data());
  const int32_t width = dtype.bits / 8;
  if (!host && reinterpret_cast<uintptr_t>(data) % width != 0)
    throw nb::value_error("the destinations are not aligned to their width");
  return GivenDestinations{data, width, is_signed};
}

std::vector<KeyOrder> key_orders(const std::vector<OrderTuple>& orders) {
  std::vector<KeyOrder> out;
  for (const auto& [is_signed, ascending, nulls_last] : orders)
    out.push_back(KeyOrder{is_signed, ascending, nulls_last});
  return out;
}

// A NumPy array that owns a copy of `data`.
template <typename T>
nb::ndarray<nb::numpy, T> to_numpy(const std::vector<T>& data, std::vector<size_t> shape) {
  auto* owned = new std::vector<T>(data);
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner);
}

// A partition's layout. A CUDA one may wait for its count first, which it does without the GIL.
const PackedLayout& settled(const HostPartition& p) { return p.layout(); }
const PackedLayout& settled(CudaPartition& p) {
  nb::gil_scoped_release released;
  return p.layout();
}

// The layout's properties, shared by both partition classes; each getter returns a fresh NumPy
// array (hence rv_policy::automatic: the array owns its copy).
template <typename Partition>
void layout_properties(nb::class_<Partition>& cls) {
  constexpr auto fresh = nb::rv_policy::automatic;
  cls.def_prop_ro(
         "total_bytes", [](Partition& p) { return settled(p).total_bytes(); },
         "Bytes of the packed output.")
      .def_prop_ro("output_bound", &Partition::output_bound,
                   "Bytes that hold the packed output however the rows fall, known before the "
                   "count: -1 for tables with string columns.")
      .def_prop_ro(
          "rows",
          [](Partition& p) {
            const PackedLayout& l = settled(p);
            return to_numpy(l.rows, {l.rows.size()});
          },
          fresh, "Rows per destination, int64 [n].")
      .def_prop_ro(
          "byte_offsets",
          [](Partition& p) {
            const PackedLayout& l = settled(p);
            return to_numpy(l.byte_offsets, {l.byte_offsets.size()});
          },
          fresh, "Destination d owns bytes [byte_offsets[d], byte_offsets[d + 1]), int64 [n + 1].")
      .def_prop_ro(
          "pieces",
          [](Partition& p) {
            const PackedLayout& l = settled(p);
            return to_numpy(l.pieces, {static_cast<size_t>(l.n_destinations),
                                       static_cast<size_t>(l.n_columns), 3});
          },
          fresh,
          "Absolute offsets of (validity, values or offsets, chars) per destination and column, "
          "-1 where absent, int64 [n, columns, 3].")
      .def_prop_ro(
          "chars",
          [](Partition& p) {
            const PackedLayout& l = settled(p);
            return to_numpy(l.chars, {static_cast<size_t>(l.n_destinations),
                                      static_cast<size_t>(l.n_columns)});
          },
          fresh,
          "String bytes per destination and column (0 for fixed width), int64 [n, columns].");
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() =
      "gpuframe's native core: row hashes, range destinations and partition-and-pack, CPU and "
      "CUDA";
  m.attr("built_with_cuda") = built_with_cuda();
  m.attr("ALIGNMENT") = kAlignment;
  m.attr("FIXED") = static_cast<int32_t>(Kind::fixed);
  m.attr("FLOATING") = static_cast<int32_t>(Kind::floating);
  m.attr("STRING") = static_cast<int32_t>(Kind::string);
  nb::exception<CudaError>(m, "CudaError", PyExc_RuntimeError);
  nb::exception<DestinationError>(m, "DestinationError", PyExc_ValueError);
  nb::exception<BoundaryOrderError>(m, "BoundaryOrderError", PyExc_ValueError);
  m.def("cuda_device_count", &cuda_device_count,
        "CUDA devices usable by this process; 0 without a driver or a build without CUDA.");

  m.def(
      "hash_rows",
      [](const std::vector<ColumnTuple>& columns, int64_t n_rows, int threads) {
        auto keys = views(columns, nb::device::cpu::value, n_rows);
        std::vector<uint64_t> out(static_cast<size_t>(n_rows));
        {
          nb::gil_scoped_release released;
          hash_rows(keys, n_rows, out.data(), threads);
        }
        return to_numpy(out, {out.size()});
      },
      nb::arg("keys"), nb::arg("n_rows"), nb::arg("threads") = 0,
      "64-bit hash of each row over host key columns, as a NumPy uint64 array.");

  m.def(
      "hash_rows_cuda",
      [](const std::vector<ColumnTuple>& columns, int64_t n_rows, DeviceHashes out,
         uintptr_t stream) {
        auto keys = views(columns, nb::device::cuda::value, n_rows);
        if (n_rows < 0 || static_cast<int64_t>(out.size()) < n_rows)
          throw nb::value_error("the output must hold one uint64 per row");
        nb::gil_scoped_release released;
        hash_rows_cuda(keys, n_rows, out.data(), stream);
      },
      nb::arg("keys"), nb::arg("n_rows"), nb::arg("out"), nb::arg("stream") = 0,
      "The same hashes for device columns, into `out` (a CuPy uint64 array), enqueued on "
      "`stream` (an integer cudaStream_t, e.g. cupy.cuda.get_current_stream().ptr).");

  m.def("longest_repeat_scratch_bytes", &longest_repeat_scratch_bytes, nb::arg("n"),
        "Device bytes longest_repeat_cuda needs as scratch for `n` hashes.");

  m.def(
      "longest_repeat_cuda",
      [](DeviceHashesIn hashes, DeviceHashes sorted, DeviceBytes scratch, uintptr_t stream) {
        const auto n = static_cast<int64_t>(hashes.size());
        if (sorted.size() < hashes.size())
          throw nb::value_error("`sorted` must hold as many uint64 as the hashes");
        nb::gil_scoped_release released;
        return longest_repeat_cuda(hashes.data(), n, sorted.data(), scratch.data(),
                                   static_cast<int64_t>(scratch.size()), stream);
      },
      nb::arg("hashes"), nb::arg("sorted"), nb::arg("scratch"), nb::arg("stream") = 0,
      "The most times one value occurs in `hashes` (a CuPy uint64 array), sorting them into "
      "`sorted` with `scratch` (CuPy uint8, longest_repeat_scratch_bytes long) on `stream`; "
      "waits for the stream.");

  m.def(
      "range_destinations",
      [](const std::vector<ColumnTuple>& keys, int64_t n_rows,
         const std::vector<ColumnTuple>& boundaries, int64_t n_boundaries,
         const std::vector<OrderTuple>& orders, HostDestinationsOut out, int threads) {
        auto key_views = views(keys, nb::device::cpu::value, n_rows);
        auto boundary_views = views(boundaries, nb::device::cpu::value, n_boundaries);
        if (n_rows < 0 || static_cast<int64_t>(out.size()) < n_rows)
          throw nb::value_error("the output must hold one uint32 per row");
        nb::gil_scoped_release released;
        range_destinations(key_views, n_rows, boundary_views, n_boundaries, key_orders(orders),
                           out.data(), threads);
      },
      nb::arg("keys"), nb::arg("n_rows"), nb::arg("boundaries"), nb::arg("n_boundaries"),
      nb::arg("orders"), nb::arg("out"), nb::arg("threads") = 0,
      "Each row's range destination over host key columns into `out` (a NumPy uint32 array): "
      "the number of boundary rows that sort at or before it. Raises BoundaryOrderError unless "
      "the boundaries are sorted.");

  m.def(
      "range_destinations_cuda",
      [](const std::vector<ColumnTuple>& keys, int64_t n_rows,
         const std::vector<ColumnTuple>& boundaries, int64_t n_boundaries,
         const std::vector<OrderTuple>& orders, DeviceDestinationsOut out, uintptr_t stream) {
        auto key_views = views(keys, nb::device::cuda::value, n_rows);
        auto boundary_views = views(boundaries, nb::device::cuda::value, n_boundaries);
        if (n_rows < 0 || static_cast<int64_t>(out.size()) < n_rows)
          throw nb::value_error("the output must hold one uint32 per row");
        nb::gil_scoped_release released;
        range_destinations_cuda(key_views, n_rows, boundary_views, n_boundaries,
                                key_orders(orders), out.data(), stream);
      },
      nb::arg("keys"), nb::arg("n_rows"), nb::arg("boundaries"), nb::arg("n_boundaries"),
      nb::arg("orders"), nb::arg("out"), nb::arg("stream") = 0,
      "The same for device columns, into `out` (a CuPy uint32 array), enqueued on `stream`. "
      "The boundaries' order is not checked: check_boundaries does it on a host copy.");

  m.def(
      "check_boundaries",
      [](const std::vector<ColumnTuple>& boundaries, int64_t n_boundaries,
         const std::vector<OrderTuple>& orders) {
        auto boundary_views = views(boundaries, nb::device::cpu::value, n_boundaries);
        nb::gil_scoped_release released;
        check_boundaries(boundary_views, n_boundaries, key_orders(orders));
      },
      nb::arg("boundaries"), nb::arg("n_boundaries"), nb::arg("orders"),
      "Raise BoundaryOrderError unless the host boundary columns are sorted in `orders`.");

  nb::class_<HostPartition> host(
      m, "HostPartition",
      "Partition-and-pack of host columns on `threads` threads (0: one per core), by the hash "
      "of key columns or (by_destinations) to given destinations. Constructing it runs pass one "
      "(destinations and counts); scatter(out) runs pass two.");
  host.def(
          "__init__",
          [](HostPartition* self, const std::vector<ColumnTuple>& columns,
             const std::vector<int32_t>& key_columns, int64_t n_rows, uint32_t n_destinations,
             int threads) {
            auto cols = views(columns, nb::device::cpu::value, n_rows);
            nb::gil_scoped_release released;
            new (self) HostPartition(std::move(cols), key_columns, n_rows, n_destinations, threads);
          },
          nb::arg("columns"), nb::arg("key_columns"), nb::arg("n_rows"),
          nb::arg("n_destinations"), nb::arg("threads") = 0, nb::keep_alive<1, 2>())
      .def_static(
          "by_destinations",
          [](const std::vector<ColumnTuple>& columns, Destinations destinations, int64_t n_rows,
             uint32_t n_destinations, int threads) {
            auto cols = views(columns, nb::device::cpu::value, n_rows);
            const GivenDestinations given =
                given_destinations(destinations, nb::device::cpu::value, n_rows);
            nb::gil_scoped_release released;
            return new HostPartition(std::move(cols), given, n_rows, n_destinations, threads);
          },
          nb::arg("columns"), nb::arg("destinations"), nb::arg("n_rows"),
          nb::arg("n_destinations"), nb::arg("threads") = 0, nb::keep_alive<0, 1>(),
          "Pass one with row r sent to destinations[r] (a 1-D NumPy integer array), read during "
          "this call. Raises DestinationError for the first row whose destination is outside "
          "[0, n_destinations).")
      .def(
          "scatter",
          [](const HostPartition& self, HostBytes out) {
            nb::gil_scoped_release released;
            self.scatter(out.data(), static_cast<int64_t>(out.size()));
          },
          nb::arg("out"),
          "Pass two: write every byte of out[:total_bytes] (a writable NumPy uint8 array).");
  layout_properties(host);

  nb::class_<CudaPartition> device(
      m, "CudaPartition",
      "Partition-and-pack of device columns, by the hash of key columns or (by_destinations) to "
      "given destinations, in two passes on a caller-given stream; the columns' memory must stay "
      "allocated until the scatter has run on the stream.");
  device
      .def(
          "__init__",
          [](CudaPartition* self, const std::vector<ColumnTuple>& columns,
             const std::vector<int32_t>& key_columns, int64_t n_rows, uint32_t n_destinations) {
            new (self) CudaPartition(views(columns, nb::device::cuda::value, n_rows), key_columns,
                                     n_rows, n_destinations);
          },
          nb::arg("columns"), nb::arg("key_columns"), nb::arg("n_rows"),
          nb::arg("n_destinations"), nb::keep_alive<1, 2>())
      .def_static(
          "by_destinations",
          [](const std::vector<ColumnTuple>& columns, Destinations destinations, int64_t n_rows,
             uint32_t n_destinations) {
            auto cols = views(columns, nb::device::cuda::value, n_rows);
            const GivenDestinations given =
                given_destinations(destinations, nb::device::cuda::value, n_rows);
            return new CudaPartition(std::move(cols), given, n_rows, n_destinations);
          },
          nb::arg("columns"), nb::arg("destinations"), nb::arg("n_rows"),
          nb::arg("n_destinations"), nb::keep_alive<0, 1>(), nb::keep_alive<0, 2>(),
          "With row r sent to destinations[r] (a 1-D CuPy integer array), which the count reads "
          "on its stream (this object holds on to it). The layout raises DestinationError for "
          "the first row whose destination is outside [0, n_destinations).")
      .def_prop_ro("scratch_bytes", &CudaPartition::scratch_bytes,
                   "Bytes of device scratch count() needs (count() holds on to it).")
      .def_prop_ro("totals_size", &CudaPartition::totals_size,
                   "int64s of the totals that count() brings back to the host.")
      .def(
          "count",
          [](CudaPartition& self, DeviceBytes scratch, uintptr_t stream,
             std::optional<HostTotals> totals) {
            nb::gil_scoped_release released;
            self.count(scratch.data(), static_cast<int64_t>(scratch.size()), stream,
                       totals ? totals->data() : nullptr,
                       totals ? static_cast<int64_t>(totals->size()) : 0);
          },
          nb::arg("scratch"), nb::arg("stream") = 0, nb::arg("totals") = nb::none(),
          nb::keep_alive<1, 2>(), nb::keep_alive<1, 4>(),
          "Pass one, queued on `stream`, into `scratch` (a CuPy uint8 array). Its totals come "
          "back into `totals` (a host int64 array of totals_size) or this object's own memory; "
          "into page-locked memory (cupyx.empty_pinned) this returns at once, while the GPU "
          "counts, into pageable memory once the count is done. The layout properties wait for "
          "it. This object holds on to both arrays: a caller may drop its references.")
      .def(
          "scatter",
          [](CudaPartition& self, DeviceBytes out, uintptr_t stream) {
            nb::gil_scoped_release released;
            self.scatter(out.data(), static_cast<int64_t>(out.size()), stream);
          },
          nb::arg("out"), nb::arg("stream") = 0,
          "Pass two, enqueued on `stream`: write every byte of out[:total_bytes] (a CuPy uint8 "
          "array, 64-byte aligned). Each count() allows one scatter().");
  layout_properties(device);
}
