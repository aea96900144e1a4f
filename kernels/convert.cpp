// Entry point of kernels/convert.hpp and its host loop.
#include "kernels/convert.hpp"

#include <cstring>

#include "decomp/error.hpp"
#include "kernels/convert_impl.hpp"
#include "kernels/cpu/host_loops.hpp"
#include "kernels/device/device.hpp"

namespace tessera::kernels {

bool convertible(DType from, DType to) {
  return from == to || with_converter(from, to, nullptr, nullptr, [](const auto&) {});
}

void convert(const Device& dev, DType from, DType to, std::int64_t n, const void* x, void* y) {
  TESSERA_CHECK(convertible(from, to) && n >= 0,
                "convert: no conversion from " << name_of(from) << " to " << name_of(to));
  if (n == 0) return;
  if (from == to) {
    const std::size_t bytes = static_cast<std::size_t>(n) * size_of(from);
    if (dev.is_host()) return static_cast<void>(std::memcpy(y, x, bytes));
    return device::copy(y, x, bytes, device::Copy::DeviceToDevice);
  }
  if (dev.is_host()) return cpu::convert(from, to, n, x, y);
  if constexpr (kCudaEnabled) return cuda::convert(dev, from, to, n, x, y);
  throw_without_cuda("convert");
}

namespace cpu {
void convert(DType from, DType to, std::int64_t n, const void* x, void* y) {
  with_converter(from, to, x, y, [&](const auto& f) { host_for_each(n, f); });
}
}  // namespace cpu

}  // namespace tessera::kernels
