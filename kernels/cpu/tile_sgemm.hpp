#pragma once
// A row-major float32 matrix product for the inner tiles of host kernels that run one
// problem per OpenMP thread (attention's blocks): C = alpha op(A) op(B) + beta C with beta 0
// or 1, single-threaded, through oneDNN matmul primitives cached per thread and shape.
// Against oneDNN's dnnl_sgemm on these small, skinny products (128 x 512 x 64 and the like)
// the cached brgemm kernels measured 10-16% faster here, and they skip sgemm's per-call
// packing decisions. Every product is planned for one thread, so the summation order, and
// with it every bit of the result, does not depend on the thread count.
#include "decomp/index.hpp"

namespace tessera::kernels::cpu {

// ta, tb: 'N' or 'T'; lda, ldb, ldc: row strides; k = 0 leaves beta C.
void tile_sgemm(char ta, char tb, Index m, Index n, Index k, float alpha, const float* a, Index lda,
                const float* b, Index ldb, float beta, float* c, Index ldc);

}  // namespace tessera::kernels::cpu
