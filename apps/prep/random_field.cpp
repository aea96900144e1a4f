#include "apps/prep/random_field.hpp"

#include <cmath>
#include <complex>

#include "apps/prep/philox.hpp"

namespace tessera::prep {

double node_coord(Index i, Index n) {
  return static_cast<double>(i + 1) / static_cast<double>(n + 1);
}

Tensor gaussian_field(const FieldParams& p, std::uint64_t sample, const std::vector<Index>& shape,
                      const Box& box) {
  using cplx = std::complex<double>;
  const int nd = box.ndim;
  const int K = p.modes, W = 2 * K + 1;
  Index nmodes = 1;
  for (int d = 0; d < nd; ++d) nmodes *= W;
  // Mode coefficients c_k = sqrt(S(k)) (xi - i eta) / norm: g = sum Re(c_k e^{i 2pi k.x}).
  std::vector<cplx> coef(static_cast<std::size_t>(nmodes));
  double norm = 0;
  for (Index m = 0; m < nmodes; ++m) {
    double k2 = 0;
    Index r = m;
    for (int d = 0; d < nd; ++d, r /= W) {
      const double k = static_cast<double>(r % W - K);
      k2 += k * k;
    }
    const double s = std::pow(1.0 + k2 / (p.length * p.length), -p.alpha);
    const auto g = gaussian2(p.seed, sample, static_cast<std::uint64_t>(m), p.stream);
    coef[static_cast<std::size_t>(m)] = std::sqrt(s) * cplx(g[0], -g[1]);
    norm += s;
  }
  for (cplx& c : coef) c /= std::sqrt(norm);
  // Per dim the phases e^{i 2pi k x_i} of every node of the box (k = -K..K).
  std::vector<std::vector<cplx>> phase(static_cast<std::size_t>(nd));
  for (int d = 0; d < nd; ++d) {
    auto& ph = phase[static_cast<std::size_t>(d)];
    ph.resize(static_cast<std::size_t>(box.extent(d) * W));
    for (Index i = 0; i < box.extent(d); ++i) {
      const double x = node_coord(box.lo[d] + i, shape[static_cast<std::size_t>(d)]);
      for (int k = -K; k <= K; ++k) {
        const double a = 6.283185307179586 * k * x;
        ph[static_cast<std::size_t>(i * W + k + K)] = cplx(std::cos(a), std::sin(a));
      }
    }
  }
  Tensor out = Tensor::empty(box.shape(), DType::f64);
  double* o = out.data<double>();
  std::vector<Index> idx(static_cast<std::size_t>(nd));
  for (Index c = 0; c < out.numel(); ++c) {
    Index r = c;
    for (int d = nd - 1; d >= 0; --d) {
      idx[static_cast<std::size_t>(d)] = r % box.extent(d);
      r /= box.extent(d);
    }
    double g = 0;
    for (Index m = 0; m < nmodes; ++m) {
      // Plain complex products (std::complex's operator* takes a slow NaN-checking path).
      double re = coef[static_cast<std::size_t>(m)].real(),
             im = coef[static_cast<std::size_t>(m)].imag();
      Index q = m;
      for (int d = 0; d < nd; ++d, q /= W) {
        const cplx& f =
            phase[static_cast<std::size_t>(d)]
                 [static_cast<std::size_t>(idx[static_cast<std::size_t>(d)] * W + q % W)];
        const double nre = re * f.real() - im * f.imag();
        im = re * f.imag() + im * f.real();
        re = nre;
      }
      g += re;
    }
    o[c] = g;
  }
  return out;
}

}  // namespace tessera::prep
