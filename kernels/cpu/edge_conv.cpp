// Host edge convolution. The edges of all points form one (m k, C + 3) matrix, so the
// Linear and its two adjoint products are matrix products: oneDNN's sgemm in float32, loops
// accumulating in double in float64 (OpenMP over points, and over output channels for dW and
// db, each thread owning its rows: no atomics, a fixed order). The bias, the reduction over
// the neighbours and its adjoint are the functors the CUDA kernels run (edge_conv_impl.hpp).
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "decomp/error.hpp"

#include "kernels/cpu/host_loops.hpp"
#include "kernels/device/scratch.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/edge_conv.hpp"
#include "kernels/edge_conv_impl.hpp"

namespace tessera::kernels::cpu {
namespace {

void sgemm(char ta, char tb, Index m, Index n, Index k, const float* a, Index lda, const float* b,
           Index ldb, float* c, Index ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty product (oneDNN refuses k = 0)
    for (Index i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  const dnnl_status_t st = dnnl_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  TESSERA_CHECK(st == dnnl_success, "edge_conv: oneDNN sgemm failed (status " << st << ")");
}

template <class T>
void forward(const EdgeConvShape& s, const T* e, const std::int64_t* ids, const T* w, const T* b,
             T* z, T* y, std::int64_t* argmax) {
  const Index m = s.points, k = s.neighbours, E = s.edge, O = s.out;
  if constexpr (std::is_same_v<T, float>) {
    sgemm('N', 'T', m * k, O, E, e, E, w, E, z, O);  // z = edges W^T
    host_for_each(m * k * O, EdgeBias<T>{z, b, O});
  } else {
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < m; ++i)
      for (Index j = 0; j < k; ++j) {
        const T* ej = e + (i * k + j) * E;
        T* zj = z + (i * k + j) * O;
        for (Index o = 0; o < O; ++o) {
          double acc = static_cast<double>(b[o]);
          const T* wo = w + o * E;
          for (Index c = 0; c < E; ++c)
            acc += static_cast<double>(wo[c]) * static_cast<double>(ej[c]);
          zj[o] = static_cast<T>(acc);
        }
      }
  }
  ScratchVector<T> h(static_cast<std::size_t>(m * k * O));
  activation_forward(s.activation, dtype_of<T>::value, m * k * O, z, h.data());
  host_for_each(m * O, EdgeReduce<T>{h.data(), ids, k, O, s.mean, y, argmax});
}

template <class T>
void backward(const EdgeConvShape& s, const T* e, const std::int64_t* ids, const T* w, const T* z,
              const std::int64_t* argmax, const T* dy, T* de, double* dw, double* db) {
  const Index m = s.points, k = s.neighbours, E = s.edge, O = s.out;
  ScratchVector<T> dh(static_cast<std::size_t>(m * k * O)), dz(dh.size());
  host_for_each(m * O, EdgeReduceAdjoint<T>{dy, ids, argmax, k, O, s.mean, dh.data()});
  activation_backward(s.activation, dtype_of<T>::value, m * k * O, z, dh.data(), dz.data());
  if constexpr (std::is_same_v<T, float>) {
    sgemm('N', 'N', m * k, E, O, dz.data(), O, w, E, de, E);  // dedges = dz W
    ScratchVector<float> dwf(static_cast<std::size_t>(O * E));
    sgemm('T', 'N', O, E, m * k, dz.data(), O, e, E, dwf.data(), E);  // dW = dz^T edges
    host_for_each(O * E, AddToDouble<float>{dw, dwf.data()});
    for (Index o = 0; o < O; ++o) {
      double bsum = 0;
      for (Index r = 0; r < m * k; ++r) bsum += dz[static_cast<std::size_t>(r * O + o)];
      db[o] += bsum;
    }
    return;
  }
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < m * k; ++r) {
    T* der = de + r * E;
    for (Index c = 0; c < E; ++c) {
      double acc = 0;
      for (Index o = 0; o < O; ++o)
        acc += static_cast<double>(dz[static_cast<std::size_t>(r * O + o)]) *
               static_cast<double>(w[o * E + c]);
      der[c] = static_cast<T>(acc);
    }
  }
#pragma omp parallel for schedule(static)
  for (Index o = 0; o < O; ++o) {
    double bsum = 0;
    for (Index r = 0; r < m * k; ++r) {
      if (ids[r] < 0) continue;
      const double g = static_cast<double>(dz[static_cast<std::size_t>(r * O + o)]);
      if (g == 0) continue;
      bsum += g;
      for (Index c = 0; c < E; ++c) dw[o * E + c] += g * static_cast<double>(e[r * E + c]);
    }
    db[o] += bsum;
  }
}

}  // namespace

void edge_conv_forward(DType t, const EdgeConvShape& s, const void* edges, const std::int64_t* ids,
                       const void* w, const void* b, void* z, void* y, std::int64_t* argmax) {
  dispatch(t, [&](auto x) {
    using T = decltype(x);
    forward(s, static_cast<const T*>(edges), ids, static_cast<const T*>(w),
            static_cast<const T*>(b), static_cast<T*>(z), static_cast<T*>(y), argmax);
  });
}

void edge_conv_backward(DType t, const EdgeConvShape& s, const void* edges, const std::int64_t* ids,
                        const void* w, const void* z, const std::int64_t* argmax, const void* dy,
                        void* dedges, double* dw, double* db) {
  dispatch(t, [&](auto x) {
    using T = decltype(x);
    backward(s, static_cast<const T*>(edges), ids, static_cast<const T*>(w),
             static_cast<const T*>(z), argmax, static_cast<const T*>(dy), static_cast<T*>(dedges),
             dw, db);
  });
}

}  // namespace tessera::kernels::cpu
