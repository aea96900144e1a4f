// Normalization on CUDA: one launch each over kernels/norm_impl.hpp.
#include "decomp/error.hpp"
#include "kernels/cuda/device_loops.cuh"
#include "kernels/dispatch.hpp"
#include "kernels/norm.hpp"
#include "kernels/norm_impl.hpp"

namespace tessera::kernels {
void cuda::norm_forward(const Device& dev, const NormArgs& a, const void* x, void* y) {
  dispatch(a.type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(
        dev, a.layout.elements(),
        NormForward<T>{norm_params<T>(a, "norm_forward_cuda"), static_cast<const T*>(a.beta),
                       static_cast<const T*>(x), static_cast<T*>(y)},
        "norm_forward_cuda");
  });
}

void cuda::norm_backward_sums(const Device& dev, const NormArgs& a, const void* x, const void* dy,
                              double* s1, double* s2) {
  dispatch(a.type, [&](auto t) {
    using T = decltype(t);
    cuda_group_reduce(
        dev, a.layout.count(), a.layout.size(),
        NormBackwardSums<T>{norm_params<T>(a, "norm_backward_sums_cuda"), static_cast<const T*>(x),
                            static_cast<const T*>(dy), s1, s2},
        "norm_backward_sums_cuda");
  });
}

void cuda::norm_backward_dx(const Device& dev, const NormArgs& a, const void* x, const void* dy,
                            const double* S1, const double* S2, double M, void* dx) {
  TESSERA_CHECK(M > 0, "norm_backward_dx_cuda: group size M = " << M);
  dispatch(a.type, [&](auto t) {
    using T = decltype(t);
    cuda_for_each(
        dev, a.layout.elements(),
        NormBackwardDx<T>{norm_params<T>(a, "norm_backward_dx_cuda"), static_cast<const T*>(x),
                          static_cast<const T*>(dy), S1, S2, 1.0 / M, static_cast<T*>(dx)},
        "norm_backward_dx_cuda");
  });
}

void cuda::norm_param_grads(const Device& dev, const NormArgs& a, const void* x, const void* dy,
                            double* dgamma, double* dbeta) {
  const StatLayout byc = StatLayout::per_channel(a.layout.n, a.layout.c, a.layout.inner);
  dispatch(a.type, [&](auto t) {
    using T = decltype(t);
    cuda_group_reduce(
        dev, byc.count(), byc.size(),
        NormParamGrads<T>{norm_params<T>(a, "norm_param_grads_cuda"), byc, static_cast<const T*>(x),
                          static_cast<const T*>(dy), dgamma, dbeta},
        "norm_param_grads_cuda");
  });
}

}  // namespace tessera::kernels
