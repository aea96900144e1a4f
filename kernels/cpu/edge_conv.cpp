// Host edge convolution. The edges of all points form one (m k, C + 3) matrix, so the
// Linear and its two adjoint products are matrix products: oneDNN's sgemm in float32, loops
// accumulating in double in float64 (OpenMP over points, and over output channels for dW and
// db, each thread owning its rows: no atomics, a fixed order). The bias, the reduction over
// the neighbours and its adjoint compute what the CUDA kernels' functors (edge_conv_impl.hpp)
// do, a point's rows at a time.
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

// The host's versions of the bias, the neighbour reduction and its adjoint (the CUDA
// kernels run edge_conv_impl.hpp's functors, an element each): a point's rows at a time, the
// output channels innermost and contiguous, so the loops vectorize and index no element by
// division. Per (point, channel) the same operations in the same neighbour order as the
// functors.
template <class T>
void add_bias(T* z, const T* b, Index rows, Index O) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    T* zr = z + r * O;
#pragma omp simd
    for (Index o = 0; o < O; ++o) zr[o] += b[o];
  }
}

template <class T>
void reduce_neighbours(const T* h, const std::int64_t* ids, Index m, Index k, Index O, bool mean,
                       T* y, std::int64_t* argmax) {
#pragma omp parallel
  {
    std::vector<double> best_v(static_cast<std::size_t>(O)), sum_v(best_v.size());
    std::vector<std::int64_t> at_v(best_v.size());
    double* __restrict best = best_v.data();
    double* __restrict sum = sum_v.data();
    std::int64_t* __restrict at = at_v.data();
#pragma omp for schedule(static)
    for (Index i = 0; i < m; ++i) {
      Index j0 = 0;
      while (j0 < k && ids[i * k + j0] < 0) ++j0;
      T* yi = y + i * O;
      if (j0 == k) {  // no neighbour
        std::fill(yi, yi + O, T(0));
        std::fill(argmax + i * O, argmax + (i + 1) * O, std::int64_t{-1});
        continue;
      }
      // The first neighbour starts the sum and the maximum; later ones replace the maximum
      // only when strictly greater (the first maximal neighbour is kept), as the functor does.
      const T* h0 = h + (i * k + j0) * O;
      for (Index o = 0; o < O; ++o) sum[o] = best[o] = static_cast<double>(h0[o]), at[o] = j0;
      Index count = 1;
      for (Index j = j0 + 1; j < k; ++j) {
        if (ids[i * k + j] < 0) continue;
        ++count;
        const T* __restrict hj = h + (i * k + j) * O;
#pragma omp simd
        for (Index o = 0; o < O; ++o) {
          const double v = static_cast<double>(hj[o]);
          sum[o] += v;
          const bool take = v > best[o];
          best[o] = take ? v : best[o];
          at[o] = take ? j : at[o];
        }
      }
      for (Index o = 0; o < O; ++o) {
        yi[o] = static_cast<T>(mean ? sum[o] / static_cast<double>(count) : best[o]);
        argmax[i * O + o] = at[o];
      }
    }
  }
}

template <class T>
void reduce_neighbours_adjoint(const T* dy, const std::int64_t* ids, const std::int64_t* argmax,
                               Index m, Index k, Index O, bool mean, T* dh) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < m; ++i) {
    Index count = 0;
    for (Index j = 0; j < k; ++j) count += ids[i * k + j] >= 0 ? 1 : 0;
    const T* gi = dy + i * O;
    const std::int64_t* at = argmax + i * O;
    for (Index j = 0; j < k; ++j) {
      T* dhj = dh + (i * k + j) * O;
      if (ids[i * k + j] < 0) {
        std::fill(dhj, dhj + O, T(0));
        continue;
      }
      for (Index o = 0; o < O; ++o) {
        const T share = static_cast<T>(static_cast<double>(gi[o]) / static_cast<double>(count));
        dhj[o] = mean ? share : (j == at[o] ? gi[o] : T(0));
      }
    }
  }
}

template <class T>
void forward(const EdgeConvShape& s, const T* e, const std::int64_t* ids, const T* w, const T* b,
             T* z, T* y, std::int64_t* argmax) {
  const Index m = s.points, k = s.neighbours, E = s.edge, O = s.out;
  if constexpr (std::is_same_v<T, float>) {
    sgemm('N', 'T', m * k, O, E, e, E, w, E, z, O);  // z = edges W^T
    add_bias(z, b, m * k, O);
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
  reduce_neighbours(h.data(), ids, m, k, O, s.mean, y, argmax);
}

template <class T>
void backward(const EdgeConvShape& s, const T* e, const std::int64_t* ids, const T* w, const T* z,
              const std::int64_t* argmax, const T* dy, T* de, double* dw, double* db) {
  const Index m = s.points, k = s.neighbours, E = s.edge, O = s.out;
  ScratchVector<T> dh(static_cast<std::size_t>(m * k * O)), dz(dh.size());
  reduce_neighbours_adjoint(dy, ids, argmax, m, k, O, s.mean, dh.data());
  activation_backward(s.activation, dtype_of<T>::value, m * k * O, z, dh.data(), dz.data());
  if constexpr (std::is_same_v<T, float>) {
    sgemm('N', 'N', m * k, E, O, dz.data(), O, w, E, de, E);  // dedges = dz W
    ScratchVector<float> dwf(static_cast<std::size_t>(O * E));
    sgemm('T', 'N', O, E, m * k, dz.data(), O, e, E, dwf.data(), E);  // dW = dz^T edges
    host_for_each(O * E, AddToDouble<float>{dw, dwf.data()});
    // Column sums row by row (each column's terms in the same order as a column walk).
    std::vector<double> bsum(static_cast<std::size_t>(O), 0.0);
    for (Index r = 0; r < m * k; ++r) {
      const float* dzr = dz.data() + r * O;
      for (Index o = 0; o < O; ++o) bsum[static_cast<std::size_t>(o)] += dzr[o];
    }
    for (Index o = 0; o < O; ++o) db[o] += bsum[static_cast<std::size_t>(o)];
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
