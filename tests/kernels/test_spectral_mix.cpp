// Spectral (per-mode) channel mixing against direct sums in complex arithmetic, and its two
// backward products as the adjoints of the forward: <mix(x), y> == <x, mix_dx(y)> and
// <mix_w(w), y> == <w, mix_dw(y)> in the real inner product of the (re, im) parts.
#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <complex>
#include <random>
#include <vector>

#include "kernels/spectral_mix.hpp"

using namespace tessera;
using namespace tessera::kernels;
using cd = std::complex<double>;

namespace {
std::vector<cd> rnd(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<cd> v(n);
  for (auto& x : v) x = cd(u(g), u(g));
  return v;
}
double dot(const std::vector<cd>& a, const std::vector<cd>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += (std::conj(a[i]) * b[i]).real();
  return s;
}
}  // namespace

TEST_CASE("spectral_mix equals the per-mode complex matrix product") {
  const MixShape s{3, 4, 5, 7};
  const auto x = rnd(static_cast<std::size_t>(s.batch * s.cin * s.modes), 1);
  const auto w = rnd(static_cast<std::size_t>(s.cin * s.cout * s.modes), 2);
  std::vector<cd> out(static_cast<std::size_t>(s.batch * s.cout * s.modes));
  spectral_mix(Device::host(), DType::c128, s, x.data(), w.data(), out.data());
  for (Index n = 0; n < s.batch; ++n)
    for (Index o = 0; o < s.cout; ++o)
      for (Index m = 0; m < s.modes; ++m) {
        cd ref = 0;
        for (Index i = 0; i < s.cin; ++i)
          ref += x[(n * s.cin + i) * s.modes + m] * w[(i * s.cout + o) * s.modes + m];
        CHECK(std::abs(out[(n * s.cout + o) * s.modes + m] - ref) < 1e-13);
      }
  std::vector<std::complex<float>> xf(x.begin(), x.end()), wf(w.begin(), w.end()), of(out.size());
  spectral_mix(Device::host(), DType::c64, s, xf.data(), wf.data(), of.data());
  for (std::size_t i = 0; i < out.size(); ++i) CHECK(std::abs(cd(of[i]) - out[i]) < 1e-5);
}

TEST_CASE("the backward products are the adjoints of the forward") {
  const MixShape s{2, 3, 4, 9};
  const auto x = rnd(static_cast<std::size_t>(s.batch * s.cin * s.modes), 3);
  const auto w = rnd(static_cast<std::size_t>(s.cin * s.cout * s.modes), 4);
  const auto y = rnd(static_cast<std::size_t>(s.batch * s.cout * s.modes), 5);
  std::vector<cd> fx(y.size()), dx(x.size()), dw(w.size(), cd(0, 0));
  spectral_mix(Device::host(), DType::c128, s, x.data(), w.data(), fx.data());
  spectral_mix_dx(Device::host(), DType::c128, s, y.data(), w.data(), dx.data());
  spectral_mix_dw(Device::host(), DType::c128, s, x.data(), y.data(), dw.data());
  CHECK(dot(fx, y) == Approx(dot(x, dx)).epsilon(1e-12));
  CHECK(dot(fx, y) == Approx(dot(w, dw)).epsilon(1e-12));
  // dw accumulates
  spectral_mix_dw(Device::host(), DType::c128, s, x.data(), y.data(), dw.data());
  CHECK(dot(fx, y) * 2 == Approx(dot(w, dw)).epsilon(1e-12));
}

TEST_CASE("every product equals its direct sum on shapes of both kernels") {
  // Packed chunks of 16 modes (37 modes: two chunks and a tail of 5), odd rows and columns
  // (the 2 x 2 blocks' padding), columns past one packed tile of B (64-term sums in float64),
  // and the streamed kernel (one sample; sums of 2 terms).
  const std::vector<MixShape> shapes = {
      {5, 64, 19, 37}, {2, 6, 7, 40}, {1, 9, 4, 33}, {3, 2, 5, 17}, {6, 3, 3, 16}};
  for (const MixShape& s : shapes) {
    INFO("batch " << s.batch << ", " << s.cin << " -> " << s.cout << ", modes " << s.modes);
    const auto x = rnd(static_cast<std::size_t>(s.batch * s.cin * s.modes), 6);
    const auto w = rnd(static_cast<std::size_t>(s.cin * s.cout * s.modes), 7);
    const auto y = rnd(static_cast<std::size_t>(s.batch * s.cout * s.modes), 8);
    const auto w0 = rnd(w.size(), 9);  // dw adds into this
    std::vector<cd> fx(y.size()), dx(x.size()), dw = w0;
    spectral_mix(Device::host(), DType::c128, s, x.data(), w.data(), fx.data());
    spectral_mix_dx(Device::host(), DType::c128, s, y.data(), w.data(), dx.data());
    spectral_mix_dw(Device::host(), DType::c128, s, x.data(), y.data(), dw.data());
    std::vector<std::complex<float>> xf(x.begin(), x.end()), wf(w.begin(), w.end()),
        yf(y.begin(), y.end()), fxf(fx.size()), dxf(dx.size()), dwf(w0.begin(), w0.end());
    spectral_mix(Device::host(), DType::c64, s, xf.data(), wf.data(), fxf.data());
    spectral_mix_dx(Device::host(), DType::c64, s, yf.data(), wf.data(), dxf.data());
    spectral_mix_dw(Device::host(), DType::c64, s, xf.data(), yf.data(), dwf.data());
    auto check = [](const cd& got64, const std::complex<float>& got32, const cd& ref, Index terms) {
      CHECK(std::abs(got64 - ref) < 1e-14 * static_cast<double>(terms));
      CHECK(std::abs(cd(got32) - ref) < 1e-6 * static_cast<double>(terms));
    };
    for (Index m = 0; m < s.modes; ++m) {
      for (Index n = 0; n < s.batch; ++n) {
        for (Index o = 0; o < s.cout; ++o) {
          cd ref = 0;
          for (Index i = 0; i < s.cin; ++i)
            ref += x[(n * s.cin + i) * s.modes + m] * w[(i * s.cout + o) * s.modes + m];
          const std::size_t k = static_cast<std::size_t>((n * s.cout + o) * s.modes + m);
          check(fx[k], fxf[k], ref, s.cin);
        }
        for (Index i = 0; i < s.cin; ++i) {
          cd ref = 0;
          for (Index o = 0; o < s.cout; ++o)
            ref += y[(n * s.cout + o) * s.modes + m] * std::conj(w[(i * s.cout + o) * s.modes + m]);
          const std::size_t k = static_cast<std::size_t>((n * s.cin + i) * s.modes + m);
          check(dx[k], dxf[k], ref, s.cout);
        }
      }
      for (Index i = 0; i < s.cin; ++i)
        for (Index o = 0; o < s.cout; ++o) {
          const std::size_t k = static_cast<std::size_t>((i * s.cout + o) * s.modes + m);
          cd ref = w0[k];
          for (Index n = 0; n < s.batch; ++n)
            ref += std::conj(x[(n * s.cin + i) * s.modes + m]) * y[(n * s.cout + o) * s.modes + m];
          check(dw[k], dwf[k], ref, s.batch + 1);
        }
    }
  }
}

TEST_CASE("the packed and streamed products give the same bits, at any thread count") {
  // Batch 4 takes the packed product for mix and dx and, summing over 4 samples, for dW;
  // each sample alone (batch 1) takes the streamed one. The same sample must come out the
  // same either way (inference runs batch 1, training more), and dW of the 4 samples equals
  // the 4 single-sample dWs added in turn. 20 modes: one chunk and a tail; 1-3 threads split
  // the columns of that chunk among them.
  const MixShape s{4, 6, 9, 20};
  const auto x = rnd(static_cast<std::size_t>(s.batch * s.cin * s.modes), 11);
  const auto w = rnd(static_cast<std::size_t>(s.cin * s.cout * s.modes), 12);
  const auto y = rnd(static_cast<std::size_t>(s.batch * s.cout * s.modes), 13);
  for (int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<std::complex<float>> xf(x.begin(), x.end()), wf(w.begin(), w.end()),
        yf(y.begin(), y.end()), fx(yf.size()), dx(xf.size()), dw(wf.size());
    spectral_mix(Device::host(), DType::c64, s, xf.data(), wf.data(), fx.data());
    spectral_mix_dx(Device::host(), DType::c64, s, yf.data(), wf.data(), dx.data());
    spectral_mix_dw(Device::host(), DType::c64, s, xf.data(), yf.data(), dw.data());
    const MixShape one{1, s.cin, s.cout, s.modes};
    std::vector<std::complex<float>> dw1(wf.size());
    bool same = true;
    for (Index n = 0; n < s.batch; ++n) {
      const auto* xn = xf.data() + n * s.cin * s.modes;
      const auto* yn = yf.data() + n * s.cout * s.modes;
      std::vector<std::complex<float>> f1(static_cast<std::size_t>(s.cout * s.modes)),
          d1(static_cast<std::size_t>(s.cin * s.modes));
      spectral_mix(Device::host(), DType::c64, one, xn, wf.data(), f1.data());
      spectral_mix_dx(Device::host(), DType::c64, one, yn, wf.data(), d1.data());
      spectral_mix_dw(Device::host(), DType::c64, one, xn, yn, dw1.data());
      same = same && std::equal(f1.begin(), f1.end(), fx.begin() + n * s.cout * s.modes) &&
             std::equal(d1.begin(), d1.end(), dx.begin() + n * s.cin * s.modes);
    }
    CHECK(same);
    CHECK(dw1 == dw);
    omp_set_num_threads(before);
  }
}
