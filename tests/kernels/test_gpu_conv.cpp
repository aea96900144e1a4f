// cuDNN convolution against the CPU kernels (themselves checked against a naive float64
// reference in tests/unit/test_conv_cpu.cpp), over the same sweep of descriptors:
// forward, backward-data (windowed dx untouched outside its window), backward-weights
// and bias, float32 and float64. Skips, saying so, where no device exists.
#include <cmath>
#include <iostream>
#include <limits>

#include "kernels/conv.hpp"
#include "kernels/device/device.hpp"
#include "tests/support/have_device.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"
#include "tests/kernels/conv_reference.hpp"

using namespace tessera;
using namespace tessera::test_conv;
using tessera::kernels::ConvDesc;

namespace {

// A device copy of a host vector, freed on scope exit.
template <class T>
struct DeviceVec {
  void* p = nullptr;
  std::size_t n = 0;
  explicit DeviceVec(const std::vector<T>& h)
      : p(device::alloc(h.size() * sizeof(T))), n(h.size()) {
    device::copy(p, h.data(), n * sizeof(T), device::Copy::HostToDevice);
  }
  ~DeviceVec() { device::free(p); }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  std::vector<T> host() const {
    std::vector<T> h(n);
    device::copy(h.data(), p, n * sizeof(T), device::Copy::DeviceToHost);
    return h;
  }
  T* at(Index off) const { return static_cast<T*>(p) + off; }
};

template <class T>
double max_rel(const std::vector<T>& a, const std::vector<T>& b) {
  return rel_error(a, std::vector<double>(b.begin(), b.end()));
}

template <class T>
void check_case(const SweepCase& sc, unsigned seed, double tol, Index cuda_limit = 0) {
  ConvDesc c = sc.c;
  const Window win = sc.margin ? make_windowed(c, sc.margin) : dense_window(c);
  const auto x = cast<T>(random_vector(sz(win.size), seed));
  const auto w = cast<T>(random_vector(sz(c.w_elems()), seed + 1));
  const auto b = cast<T>(random_vector(sz(c.c_out), seed + 2));
  const auto dy = cast<T>(random_vector(sz(c.y_elems()), seed + 3));
  const T sentinel = T(12345);
  // CPU.
  std::vector<T> y(sz(c.y_elems())), dx(sz(win.size), sentinel), dw(sz(c.w_elems())),
      db(sz(c.c_out));
  kernels::conv_forward(Device::host(), c, x.data() + win.offset, w.data(), b.data(), y.data());
  kernels::conv_backward_data(Device::host(), c, dy.data(), w.data(), dx.data() + win.offset);
  kernels::conv_backward_weights(Device::host(), c, x.data() + win.offset, dy.data(), dw.data(),
                                 db.data());
  // CUDA.
  DeviceVec<T> gx(x), gw(w), gb(b), gdy(dy), gy(std::vector<T>(y.size(), sentinel)),
      gdx(std::vector<T>(dx.size(), sentinel)), gdw(std::vector<T>(dw.size(), sentinel)),
      gdb(std::vector<T>(db.size(), sentinel));
  {
    // Under a lowered per-call limit the device runs the conv in pieces (the CPU above
    // ran it whole).
    const kernels::ScopedConvCallLimit scope(cuda_limit);
    kernels::conv_forward(Device::cuda(), c, gx.at(win.offset), gw.at(0), gb.at(0), gy.at(0));
    kernels::conv_backward_data(Device::cuda(), c, gdy.at(0), gw.at(0), gdx.at(win.offset));
    kernels::conv_backward_weights(Device::cuda(), c, gx.at(win.offset), gdy.at(0), gdw.at(0),
                                   gdb.at(0));
  }
  INFO(c.str() << (sc.margin ? " (windowed x)" : ""));
  MPI_CHECK(max_rel(gy.host(), y) <= tol);
  // dx: cells outside the window keep the sentinel on both sides, then drop out of the
  // comparison so they do not inflate its scale.
  auto gdx_h = gdx.host();
  bool outside_kept = true;
  for (std::size_t i = 0; i < dx.size(); ++i)
    if (dx[i] == sentinel)
      outside_kept = outside_kept && gdx_h[i] == sentinel, dx[i] = gdx_h[i] = 0;
  MPI_CHECK(outside_kept);
  MPI_CHECK(max_rel(gdx_h, dx) <= tol);
  MPI_CHECK(max_rel(gdw.host(), dw) <= tol);
  MPI_CHECK(max_rel(gdb.host(), db) <= tol);
}

}  // namespace

TEST_CASE("cuDNN convolution float32 equals the CPU over the sweep", "[gpu][conv]") {
  if (!test::have_device()) return;
  unsigned seed = 11;
  for (const auto& sc : sweep(DType::f32)) check_case<float>(sc, seed += 7, 1e-5);
}

TEST_CASE("cuDNN convolution float64 equals the CPU over the sweep", "[gpu][conv]") {
  if (!test::have_device()) return;
  unsigned seed = 13;
  for (const auto& sc : sweep(DType::f64)) check_case<double>(sc, seed += 7, 1e-12);
}

TEST_CASE("cuDNN convolution in pieces (chunks, slabs) equals the CPU over the sweep",
          "[gpu][conv]") {
  if (!test::have_device()) return;
  unsigned seed = 17;
  for (const auto& sc : sweep(DType::f64))
    for (const Index limit : {sample_limit(sc.c), slab_limit(sc.c, 2), slab_limit(sc.c, 1)})
      check_case<double>(sc, seed += 7, 1e-12, limit);
  for (const auto& sc : sweep(DType::f32))
    check_case<float>(sc, seed += 7, 1e-5, slab_limit(sc.c, 1));
}

TEST_CASE("cuDNN convolution without bias and with a larger 2-D problem", "[gpu][conv]") {
  if (!test::have_device()) return;
  for (DType t : {DType::f32, DType::f64}) {
    ConvDesc c;
    c.nd = 2, c.type = t, c.n = 2, c.c_in = 16, c.c_out = 32;
    c.in[0] = 40, c.in[1] = 33, c.kernel[0] = c.kernel[1] = 3;
    c.pad_lo[0] = 1, c.pad_hi[0] = 0, c.pad_lo[1] = c.pad_hi[1] = 1, c.stride[0] = 2;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const auto x = cast<T>(random_vector(sz(c.x_elems()), 3));
      const auto w = cast<T>(random_vector(sz(c.w_elems()), 4));
      std::vector<T> y(sz(c.y_elems()));
      kernels::conv_forward(Device::host(), c, x.data(), w.data(), nullptr, y.data());
      DeviceVec<T> gx(x), gw(w), gy(y);
      kernels::conv_forward(Device::cuda(), c, gx.at(0), gw.at(0), nullptr, gy.at(0));
      INFO(c.str());
      MPI_CHECK(max_rel(gy.host(), y) <= (t == DType::f32 ? 1e-5 : 1e-12));
      std::vector<T> dw(sz(c.w_elems()));
      kernels::conv_backward_weights(Device::host(), c, x.data(), y.data(), dw.data(), nullptr);
      DeviceVec<T> gdw(dw);
      kernels::conv_backward_weights(Device::cuda(), c, gx.at(0), gy.at(0), gdw.at(0), nullptr);
      MPI_CHECK(max_rel(gdw.host(), dw) <= (t == DType::f32 ? 1e-5 : 1e-12));
    };
    if (t == DType::f32)
      run(float{});
    else
      run(double{});
  }
}
