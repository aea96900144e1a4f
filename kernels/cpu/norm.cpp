// Normalization on the host: OpenMP loops over kernels/norm_impl.hpp.
#include <vector>

#include "decomp/error.hpp"
#include "kernels/cpu/host_loops.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/norm.hpp"
#include "kernels/norm_impl.hpp"

namespace tessera::kernels {
void cpu::norm_forward(const NormArgs& a, const void* x, void* y) {
  dispatch(a.type, [&](auto t) {
    using T = decltype(t);
    host_for_each_cell(a.layout, NormForward<T>{norm_params<T>(a, "norm_forward_cpu"),
                                                static_cast<const T*>(a.beta),
                                                static_cast<const T*>(x), static_cast<T*>(y)});
  });
}

void cpu::norm_backward_sums(const NormArgs& a, const void* x, const void* dy, double* s1,
                             double* s2) {
  dispatch(a.type, [&](auto t) {
    using T = decltype(t);
    host_group_reduce(
        a.layout.count(), a.layout.size(),
        NormBackwardSums<T>{norm_params<T>(a, "norm_backward_sums_cpu"), static_cast<const T*>(x),
                            static_cast<const T*>(dy), s1, s2});
  });
}

void cpu::norm_backward_dx(const NormArgs& a, const void* x, const void* dy, const double* S1,
                           const double* S2, double M, void* dx) {
  TESSERA_CHECK(M > 0, "norm_backward_dx_cpu: group size M = " << M);
  dispatch(a.type, [&](auto t) {
    using T = decltype(t);
    host_for_each_cell(
        a.layout,
        NormBackwardDx<T>{norm_params<T>(a, "norm_backward_dx_cpu"), static_cast<const T*>(x),
                          static_cast<const T*>(dy), S1, S2, 1.0 / M, static_cast<T*>(dx)});
  });
}

void cpu::norm_param_grads(const NormArgs& a, const void* x, const void* dy, double* dgamma,
                           double* dbeta) {
  const StatLayout byc = StatLayout::per_channel(a.layout.n, a.layout.c, a.layout.inner);
  std::vector<Index> group_in_sample;
  if (a.layout.kind == StatKind::PerGroup && a.layout.groups > 0 &&
      a.layout.c % a.layout.groups == 0)
    for (Index ch = 0; ch < a.layout.c; ++ch)
      group_in_sample.push_back(ch / (a.layout.c / a.layout.groups));
  dispatch(a.type, [&](auto t) {
    using T = decltype(t);
    NormParamGrads<T> f{norm_params<T>(a, "norm_param_grads_cpu"),
                        byc,
                        static_cast<const T*>(x),
                        static_cast<const T*>(dy),
                        dgamma,
                        dbeta};
    if (!group_in_sample.empty()) f.group_in_sample = group_in_sample.data();
    host_group_reduce(byc.count(), byc.size(), f);
  });
}

}  // namespace tessera::kernels
