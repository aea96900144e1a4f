// Host element-wise arithmetic and reductions (kernels/elementwise.hpp). Loops are
// OpenMP-parallel; reductions sum fixed chunks in double and add the chunk sums in
// order, so the result does not depend on the thread count.
#include <algorithm>
#include <vector>

#include "kernels/dispatch.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/optim_update.hpp"

namespace tessera::kernels {
namespace {

constexpr Count kChunk = 1 << 14;

// Sum of term(i) over [0, n): chunk sums in double, added in chunk order.
template <class Term>
double chunked_sum(Count n, Term term) {
  const Count chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(static_cast<std::size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (Count c = 0; c < chunks; ++c) {
    double acc = 0;
    const Count end = std::min(n, (c + 1) * kChunk);
    for (Count i = c * kChunk; i < end; ++i) acc += term(i);
    part[static_cast<std::size_t>(c)] = acc;
  }
  double total = 0;
  for (double v : part) total += v;
  return total;
}

}  // namespace

void cpu::axpy(DType s, Count n, double alpha, const void* x, void* y) {
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    const T a = static_cast<T>(alpha);
#pragma omp parallel for schedule(static) if (n > kChunk)
    for (Count i = 0; i < n; ++i) ys[i] += a * xs[i];
  });
}

void cpu::add_f64(DType s, Count n, const double* x, void* y) {
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    T* ys = static_cast<T*>(y);
#pragma omp parallel for schedule(static) if (n > kChunk)
    for (Count i = 0; i < n; ++i) ys[i] += static_cast<T>(x[i]);
  });
}

void cpu::scale(DType s, Count n, double alpha, void* y) {
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    T* ys = static_cast<T*>(y);
    const T a = static_cast<T>(alpha);
#pragma omp parallel for schedule(static) if (n > kChunk)
    for (Count i = 0; i < n; ++i) ys[i] *= a;
  });
}

void cpu::scaled_diff(DType s, Count n, double alpha, const void* a, const void* b, void* out) {
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    const T* as = static_cast<const T*>(a);
    const T* bs = static_cast<const T*>(b);
    T* os = static_cast<T*>(out);
    const T al = static_cast<T>(alpha);
#pragma omp parallel for schedule(static) if (n > kChunk)
    for (Count i = 0; i < n; ++i) os[i] = al * (as[i] - bs[i]);
  });
}

double cpu::sum_squares(DType s, Count n, const void* x) {
  return dispatch(s, [&](auto t) {
    using T = decltype(t);
    const T* xs = static_cast<const T*>(x);
    return chunked_sum(n, [&](Count i) {
      const double v = xs[i];
      return v * v;
    });
  });
}

double cpu::sum_sq_diff(DType s, Count n, const void* a, const void* b) {
  return dispatch(s, [&](auto t) {
    using T = decltype(t);
    const T* as = static_cast<const T*>(a);
    const T* bs = static_cast<const T*>(b);
    return chunked_sum(n, [&](Count i) {
      const double d = static_cast<double>(as[i]) - static_cast<double>(bs[i]);
      return d * d;
    });
  });
}

void cpu::sgd_update(DType s, Count n, void* p, const void* g, void* buf, const SgdArgs& a) {
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    T* ps = static_cast<T*>(p);
    const T* gs = static_cast<const T*>(g);
    T* bs = static_cast<T*>(buf);
#pragma omp parallel for schedule(static) if (n > kChunk)
    for (Count i = 0; i < n; ++i) {
      T dummy{};
      sgd_element(ps[i], gs[i], bs ? bs[i] : dummy, a);
    }
  });
}

void cpu::adam_update(DType s, Count n, void* p, const void* g, void* m, void* v,
                      const AdamArgs& a) {
  dispatch(s, [&](auto t) {
    using T = decltype(t);
    T* ps = static_cast<T*>(p);
    const T* gs = static_cast<const T*>(g);
    T* ms = static_cast<T*>(m);
    T* vs = static_cast<T*>(v);
#pragma omp parallel for schedule(static) if (n > kChunk)
    for (Count i = 0; i < n; ++i) adam_element(ps[i], gs[i], ms[i], vs[i], a);
  });
}

}  // namespace tessera::kernels
