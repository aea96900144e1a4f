// The device layer: one entry point per op dispatched on a Device, element types refused
// once, CUDA absent as a compile-time fact, and the counters the trainer prints.
#include <catch2/catch.hpp>

#include <vector>

#include "decomp/error.hpp"
#include "kernels/activation.hpp"
#include "kernels/device/device.hpp"
#include "kernels/elementwise.hpp"

using namespace tessera;

TEST_CASE("Device: host by default, of(space) picks the space", "[device]") {
  CHECK(Device{}.is_host());
  CHECK(Device::host().is_host());
  CHECK(Device::of(MemSpace::Host).is_host());
  CHECK(device::built_with_cuda() == kCudaEnabled);
}

TEST_CASE("Entry points run the host backend on a host Device", "[device]") {
  std::vector<double> x{-1.0, 0.5, 2.0}, y(3, 7.0);
  kernels::activation_forward(Device::host(), kernels::Activation::ReLU, DType::f64, 3, x.data(),
                              y.data());
  CHECK(y == std::vector<double>{0.0, 0.5, 2.0});
  kernels::axpy(Device::host(), DType::f64, 3, 2.0, x.data(), y.data());
  CHECK(y == std::vector<double>{-2.0, 1.5, 6.0});
}

TEST_CASE("Compute kernels refuse non-float element types with one message", "[device]") {
  std::vector<long long> x(3, 1), y(3, 0);
  try {
    kernels::activation_forward(Device::host(), kernels::Activation::ReLU, DType::i64, 3, x.data(),
                                y.data());
    FAIL("int64 activation accepted");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("float32 or float64") && Catch::Contains("int64"));
  }
}

TEST_CASE("Without CUDA, a CUDA Device is refused by name", "[device]") {
  if constexpr (kCudaEnabled) {
    SUCCEED("built with CUDA: the CUDA paths are covered by the gpu-labelled tests");
  } else {
    try {
      (void)Device::cuda();
      FAIL("a CUDA device in a build without CUDA");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("built without CUDA"));
    }
    CHECK(device::count() == 0);
  }
}

TEST_CASE("Device stats count launches and reset", "[device]") {
  device::reset_stats();
  CHECK(device::stats().launches == 0);
  device::count_launches(3);
  device::count_launches();
  const device::Stats s = device::stats();
  CHECK(s.launches == 4);
  CHECK(s.h2d_copies == 0);
  CHECK(s.d2h_bytes == 0);
  device::reset_stats();
  CHECK(device::stats().launches == 0);
}
