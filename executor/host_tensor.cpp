#include "executor/host_tensor.hpp"

#include <cstdint>
#include <cstring>

#include "core/checked_math.hpp"
#include "core/error.hpp"

namespace pw {
namespace {

constexpr std::uint32_t kHostTag = 0x54485750;  // "PWHT" read little-endian
constexpr size_t kHeader = sizeof(std::uint32_t) + 2 * sizeof(std::int64_t);

template <typename T>
void put(std::vector<std::byte>& out, const T& v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
T get(std::span<const std::byte> wire, size_t at) {
  T v;
  std::memcpy(&v, wire.data() + at, sizeof(T));
  return v;
}

}  // namespace

void HostTensor::append_wire(std::vector<std::byte>& out) const {
  put(out, kHostTag);
  put(out, static_cast<std::int64_t>(value.rows()));
  put(out, static_cast<std::int64_t>(value.cols()));
  const auto* data = reinterpret_cast<const std::byte*>(value.data());
  out.insert(out.end(), data, data + sizeof(float) * static_cast<size_t>(value.size()));
}

TensorPtr host_tensor_from_wire(std::span<const std::byte> wire) {
  if (wire.size() < kHeader || get<std::uint32_t>(wire, 0) != kHostTag) return nullptr;
  const auto rows = get<std::int64_t>(wire, 4), cols = get<std::int64_t>(wire, 12);
  // The sizes must account for the bytes that came, so the matrix is never larger than the message.
  const std::optional<std::int64_t> data_bytes = checked_product({rows, cols, std::int64_t{sizeof(float)}});
  if (!data_bytes || static_cast<std::uint64_t>(*data_bytes) != wire.size() - kHeader)
    throw_runtime("a host tensor of {} x {} floats arrived with {} bytes of data", rows, cols, wire.size() - kHeader);
  Mat m(rows, cols);
  if (m.size() > 0) std::memcpy(m.data(), wire.data() + kHeader, wire.size() - kHeader);
  return std::make_shared<HostTensor>(std::move(m));
}

}  // namespace pw
