// Reductions on the host, accumulated in double.
#include "decomp/error.hpp"
#include "kernels/cpu/host_loops.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/reduce.hpp"
#include "kernels/reduce_impl.hpp"

namespace tessera::kernels {
namespace {

template <bool Squares>
double whole_sum(DType type, Index n, const void* x, const char* where) {
  TESSERA_CHECK(n >= 0, where << ": negative count " << n);
  return dispatch(type, [&](auto t) {
    using T = decltype(t);
    const T* p = static_cast<const T*>(x);
    double s = 0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (Index i = 0; i < n; ++i) {
      const double v = static_cast<double>(p[i]);
      s += Squares ? v * v : v;
    }
    return s;
  });
}

}  // namespace

double cpu::reduce_sum(DType type, Index n, const void* x) {
  return whole_sum<false>(type, n, x, "reduce_sum_cpu");
}
double cpu::reduce_mean(DType type, Index n, const void* x) {
  TESSERA_CHECK(n > 0, "reduce_mean_cpu: mean of " << n << " elements");
  return whole_sum<false>(type, n, x, "reduce_mean_cpu") / static_cast<double>(n);
}
double cpu::reduce_sum_squares(DType type, Index n, const void* x) {
  return whole_sum<true>(type, n, x, "reduce_sum_squares_cpu");
}

void cpu::stat_sums(const StatLayout& l, DType type, const void* x, double* sum, double* sumsq) {
  check_stat_layout(l, "stat_sums_cpu");
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    host_group_reduce(l.count(), l.size(), StatSums<T>{l, static_cast<const T*>(x), sum, sumsq});
  });
}
void cpu::channel_sums(DType type, Index n, Index c, Index inner, const void* x, double* sum,
                       double* sumsq) {
  cpu::stat_sums(StatLayout::per_channel(n, c, inner), type, x, sum, sumsq);
}
void cpu::group_sums(DType type, Index n, Index c, Index groups, Index inner, const void* x,
                     double* sum, double* sumsq) {
  cpu::stat_sums(StatLayout::per_group(n, c, inner, groups), type, x, sum, sumsq);
}

}  // namespace tessera::kernels
