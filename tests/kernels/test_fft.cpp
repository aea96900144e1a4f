// Local FFT kernels against a brute-force DFT (long double), along every dim of (outer, n,
// inner) blocks with odd and prime extents, float64 and float32; the Hermitian weights give
// exact adjoints (<R x, y> == <x, R* y>); normalizations as numpy names them; plan reuse.
#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "kernels/fft.hpp"
#include "tests/support/random_values.hpp"

using namespace tessera;
using namespace tessera::kernels;
using cd = std::complex<double>;
using cld = std::complex<long double>;

namespace {

const long double kPi = 3.141592653589793238462643383279502884L;

// DFT along n of a complex (outer, n, inner) array, sign s, unscaled.
std::vector<cd> dft(const std::vector<cd>& x, const FftBlock& b, int s) {
  std::vector<cd> y(x.size());
  for (Index o = 0; o < b.outer; ++o)
    for (Index i = 0; i < b.inner; ++i)
      for (Index k = 0; k < b.n; ++k) {
        cld acc = 0;
        for (Index j = 0; j < b.n; ++j) {
          const long double a = s * 2 * kPi * static_cast<long double>((j * k) % b.n) / b.n;
          const cd v = x[(o * b.n + j) * b.inner + i];
          acc += cld(v.real(), v.imag()) * cld(std::cos(a), std::sin(a));
        }
        y[(o * b.n + k) * b.inner + i] =
            cd(static_cast<double>(acc.real()), static_cast<double>(acc.imag()));
      }
  return y;
}

std::vector<double> random_real(std::size_t n, unsigned seed) {
  return test::random_values(n, seed);
}

std::vector<cd> random_complex(std::size_t n, unsigned seed) {
  const auto r = random_real(2 * n, seed);
  std::vector<cd> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = cd(r[2 * i], r[2 * i + 1]);
  return v;
}

double max_rel(const std::vector<cd>& a, const std::vector<cd>& b) {
  double m = 0, s = 1e-300;
  for (std::size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::abs(a[i] - b[i]));
    s = std::max(s, std::abs(b[i]));
  }
  return m / s;
}

const std::vector<FftBlock> kBlocks = {{1, 1, 1},  {1, 8, 1}, {3, 7, 1},  {1, 13, 5},
                                       {2, 12, 3}, {4, 1, 6}, {2, 17, 2}, {1, 32, 4}};

}  // namespace

TEST_CASE("c2c equals the DFT along any dim, both signs, float64 and float32") {
  for (const auto& b : kBlocks)
    for (int sign : {-1, 1}) {
      const auto x = random_complex(static_cast<std::size_t>(b.outer * b.n * b.inner), 7);
      const auto ref = dft(x, b, sign);
      std::vector<cd> y(x.size());
      fft_c2c(Device::host(), DType::c128, b, x.data(), y.data(), sign, 1.0);
      CHECK(max_rel(y, ref) < 1e-13);
      std::vector<cd> z = x;  // in place
      fft_c2c(Device::host(), DType::c128, b, z.data(), z.data(), sign, 0.5);
      for (auto& v : z) v *= 2.0;
      CHECK(max_rel(z, ref) < 1e-13);
      std::vector<std::complex<float>> xf(x.begin(), x.end()), yf(x.size());
      fft_c2c(Device::host(), DType::c64, b, xf.data(), yf.data(), sign, 1.0);
      CHECK(max_rel(std::vector<cd>(yf.begin(), yf.end()), ref) < 2e-6);
    }
}

TEST_CASE("r2c keeps bins 0..n/2 of the DFT; c2r inverts it (numpy's irfft)") {
  for (const auto& b : kBlocks) {
    const auto xr = random_real(static_cast<std::size_t>(b.outer * b.n * b.inner), 11);
    const std::vector<cd> xc(xr.begin(), xr.end());
    const auto full = dft(xc, b, -1);
    const FftBlock half{b.outer, b.bins(), b.inner};
    std::vector<cd> ref(static_cast<std::size_t>(b.outer * b.bins() * b.inner));
    for (Index o = 0; o < b.outer; ++o)
      for (Index k = 0; k < b.bins(); ++k)
        for (Index i = 0; i < b.inner; ++i)
          ref[(o * b.bins() + k) * b.inner + i] = full[(o * b.n + k) * b.inner + i];
    std::vector<cd> y(ref.size());
    fft_r2c(Device::host(), DType::f64, b, xr.data(), y.data(), 1.0);
    CHECK(max_rel(y, ref) < 1e-13);
    const auto y_before = y;
    std::vector<double> back(xr.size());
    fft_c2r(Device::host(), DType::f64, b, y.data(), back.data(), 1.0 / b.n);
    CHECK(y == y_before);  // the input survives
    double err = 0;
    for (std::size_t i = 0; i < xr.size(); ++i) err = std::max(err, std::abs(back[i] - xr[i]));
    CHECK(err < 1e-13);
    std::vector<float> xf(xr.begin(), xr.end());
    std::vector<std::complex<float>> yf(ref.size());
    fft_r2c(Device::host(), DType::f32, b, xf.data(), yf.data(), 1.0);
    CHECK(max_rel(std::vector<cd>(yf.begin(), yf.end()), ref) < 2e-6);
    (void)half;
  }
}

TEST_CASE("weighted r2c and c2r are each other's adjoints: <R x, y> == <x, R* y>") {
  for (const auto& b : kBlocks) {
    const std::size_t nr = static_cast<std::size_t>(b.outer * b.n * b.inner),
                      nc = static_cast<std::size_t>(b.outer * b.bins() * b.inner);
    const auto x = random_real(nr, 3);
    const auto z = random_complex(nc, 4);
    // R = r2c; R* = c2r with the interior halved.
    std::vector<cd> rx(nc);
    fft_r2c(Device::host(), DType::f64, b, x.data(), rx.data(), 1.0);
    std::vector<double> rtz(nr);
    fft_c2r(Device::host(), DType::f64, b, z.data(), rtz.data(), 1.0, HalfWeight::HalveInterior);
    double lhs = 0, rhs = 0, scale = 0;
    for (std::size_t i = 0; i < nc; ++i) lhs += (std::conj(rx[i]) * z[i]).real();
    for (std::size_t i = 0; i < nr; ++i) rhs += x[i] * rtz[i], scale += std::abs(x[i] * rtz[i]);
    CHECK(std::abs(lhs - rhs) <= 1e-12 * std::max(1.0, scale));
    // C = c2r; C* = r2c with the interior doubled (C ignores Im of bins 0 and n/2, and so
    // does the inner product once those bins of y are real: r2c of a real x makes them so).
    std::vector<double> cz(nr);
    fft_c2r(Device::host(), DType::f64, b, z.data(), cz.data(), 1.0);
    std::vector<cd> ctx(nc);
    fft_r2c(Device::host(), DType::f64, b, x.data(), ctx.data(), 1.0, HalfWeight::DoubleInterior);
    lhs = rhs = scale = 0;
    for (std::size_t i = 0; i < nr; ++i) lhs += cz[i] * x[i], scale += std::abs(cz[i] * x[i]);
    for (std::size_t i = 0; i < nc; ++i) rhs += (std::conj(z[i]) * ctx[i]).real();
    CHECK(std::abs(lhs - rhs) <= 1e-12 * std::max(1.0, scale));
  }
}

TEST_CASE("normalizations follow numpy: backward, ortho, forward") {
  CHECK(fft_scale(FftNorm::Backward, false, 16) == 1.0);
  CHECK(fft_scale(FftNorm::Backward, true, 16) == 1.0 / 16);
  CHECK(fft_scale(FftNorm::Ortho, false, 16) == 0.25);
  CHECK(fft_scale(FftNorm::Ortho, true, 16) == 0.25);
  CHECK(fft_scale(FftNorm::Forward, false, 16) == 1.0 / 16);
  CHECK(fft_scale(FftNorm::Forward, true, 16) == 1.0);
  CHECK(fft_norm_from_name("ortho") == FftNorm::Ortho);
  CHECK_THROWS_WITH(fft_norm_from_name("unitary"), Catch::Contains("backward, ortho or forward"));
}

TEST_CASE("plans are made once per shape and reused; Measure plans give the same result") {
  const FftBlock b{2, 24, 3};
  const auto x = random_complex(static_cast<std::size_t>(b.outer * b.n * b.inner), 5);
  std::vector<cd> y(x.size()), y2(x.size());
  fft_c2c(Device::host(), DType::c128, b, x.data(), y.data(), -1, 1.0);
  const std::size_t plans = fft_cached_plans();
  fft_c2c(Device::host(), DType::c128, b, x.data(), y2.data(), -1, 1.0);
  CHECK(fft_cached_plans() == plans);
  set_fft_planning(FftPlanning::Measure);
  std::vector<cd> y3(x.size());
  fft_c2c(Device::host(), DType::c128, b, x.data(), y3.data(), -1, 1.0);
  set_fft_planning(FftPlanning::Estimate);
  CHECK(max_rel(y3, y) < 1e-14);
  CHECK(fft_cached_plans() == plans + 1);
}

TEST_CASE("bad arguments are refused with a message") {
  std::vector<double> x(4);
  std::vector<cd> y(3);
  CHECK_THROWS_WITH(fft_r2c(Device::host(), DType::c64, {1, 4, 1}, x.data(), y.data(), 1.0),
                    Catch::Contains("float32 or float64"));
  CHECK_THROWS_WITH(fft_c2c(Device::host(), DType::f64, {1, 4, 1}, y.data(), y.data(), -1, 1.0),
                    Catch::Contains("complex64 or complex128"));
  CHECK_THROWS_WITH(fft_c2c(Device::host(), DType::c128, {1, 4, 1}, y.data(), y.data(), 2, 1.0),
                    Catch::Contains("sign"));
}

TEST_CASE("multi-dim transforms equal the 1-D transforms one dim after another") {
  const std::vector<Index> shape{2, 6, 5, 7};
  const std::vector<int> dims{1, 3};
  const std::size_t nr = 2 * 6 * 5 * 7, nc = 2 * 6 * 5 * 4;
  const auto x = random_real(nr, 21);
  // r2c over {1, 3} with doubled interior and a scale, against r2c along 3 then c2c along 1.
  std::vector<cd> want(nc), got(nc);
  fft_r2c(Device::host(), DType::f64, fft_block_around(shape, 3), x.data(), want.data(), 0.5,
          HalfWeight::DoubleInterior);
  const std::vector<Index> half{2, 6, 5, 4};
  fft_c2c(Device::host(), DType::c128, fft_block_around(half, 1), want.data(), want.data(), -1, 1);
  fft_r2c_dims(Device::host(), DType::f64, shape, dims, x.data(), got.data(), 0.5,
               HalfWeight::DoubleInterior);
  CHECK(max_rel(got, want) < 1e-13);
  // c2r over {1, 3} with halved interior: c2c (+1) along 1, then c2r along 3.
  const auto z = random_complex(nc, 22);
  std::vector<cd> tmp(nc);
  fft_c2c(Device::host(), DType::c128, fft_block_around(half, 1), z.data(), tmp.data(), 1, 1);
  std::vector<double> xw(nr), xg(nr);
  fft_c2r(Device::host(), DType::f64, fft_block_around(shape, 3), tmp.data(), xw.data(), 0.25,
          HalfWeight::HalveInterior);
  const auto z_before = z;
  fft_c2r_dims(Device::host(), DType::f64, shape, dims, z.data(), xg.data(), 0.25,
               HalfWeight::HalveInterior);
  CHECK(z == z_before);
  double err = 0;
  for (std::size_t i = 0; i < nr; ++i) err = std::max(err, std::abs(xg[i] - xw[i]));
  CHECK(err < 1e-12);
  // c2c over {0, 2} against two 1-D passes.
  const auto c = random_complex(nr, 23);
  std::vector<cd> a(nr), b(nr);
  fft_c2c(Device::host(), DType::c128, fft_block_around(shape, 0), c.data(), a.data(), -1, 1);
  fft_c2c(Device::host(), DType::c128, fft_block_around(shape, 2), a.data(), a.data(), -1, 2);
  fft_c2c_dims(Device::host(), DType::c128, shape, {0, 2}, c.data(), b.data(), -1, 2);
  CHECK(max_rel(b, a) < 1e-13);
  CHECK_THROWS_WITH(
      fft_c2c_dims(Device::host(), DType::c128, shape, {2, 0}, c.data(), b.data(), -1, 1),
      Catch::Contains("ascending"));
}
