#pragma once
// The edge convolution's element functors, shared by the OpenMP loops (kernels/cpu/) and the
// CUDA kernels (kernels/cuda/edge_conv.cu): the bias added to the Linear's products, the
// reduction over each point's neighbours and its adjoint. The matrix products around them
// are GEMMs on either side (oneDNN, cuBLAS).
#include "kernels/floor.hpp"
#include <cstdint>

#include "decomp/host_device.hpp"
#include "decomp/index.hpp"

namespace tessera::kernels {

// z (rows, O) += b per column: element e of z.
template <class T>
struct EdgeBias {
  T* z;
  const T* b;
  Index out;
  TESSERA_HD void operator()(Index e) const { z[e] += b[e % out]; }
};

// Element e = i * O + o: y[e] = max or mean over point i's existing neighbours j (ids >= 0)
// of h[(i k + j) O + o] (0 if none), argmax[e] the first maximal j (-1 if none). Sums in
// double, in neighbour order.
template <class T>
struct EdgeReduce {
  const T* h;
  const std::int64_t* ids;
  Index k, out;
  bool mean;
  T* y;
  std::int64_t* argmax;
  TESSERA_HD void operator()(Index e) const {
    const Index i = e / out, o = e % out;
    Index count = 0;
    double best = 0, sum = 0;
    std::int64_t at = -1;
    for (Index j = 0; j < k; ++j) {
      if (ids[i * k + j] < 0) continue;
      ++count;
      const double v = static_cast<double>(h[(i * k + j) * out + o]);
      sum += v;
      if (at < 0 || v > best) best = v, at = j;
    }
    argmax[e] = at;
    y[e] = static_cast<T>(at < 0 ? 0.0 : mean ? sum / static_cast<double>(count) : best);
  }
};

// The adjoint of EdgeReduce for element e = i * O + o: writes dh[(i k + j) O + o] for every
// j - the mean's share dy / count on each existing neighbour, the max's dy on the chosen
// one, 0 elsewhere (so dh needs no clearing first).
template <class T>
struct EdgeReduceAdjoint {
  const T* dy;
  const std::int64_t* ids;
  const std::int64_t* argmax;
  Index k, out;
  bool mean;
  T* dh;
  TESSERA_HD void operator()(Index e) const {
    const Index i = e / out, o = e % out;
    Index count = 0;
    for (Index j = 0; j < k; ++j) count += ids[i * k + j] >= 0 ? 1 : 0;
    const T g = dy[e];
    const T share =
        count > 0 ? static_cast<T>(static_cast<double>(g) / static_cast<double>(count)) : T(0);
    for (Index j = 0; j < k; ++j) {
      T v = T(0);
      if (ids[i * k + j] >= 0) v = mean ? share : (j == argmax[e] ? g : T(0));
      dh[(i * k + j) * out + o] = v;
    }
  }
};

// acc[i] += v[i] in double (a float32 GEMM's weight gradient into the float64 accumulator).
template <class T>
struct AddToDouble {
  double* acc;
  const T* v;
  TESSERA_HD void operator()(Index i) const { acc[i] += static_cast<double>(v[i]); }
};

}  // namespace tessera::kernels
