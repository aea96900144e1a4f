#pragma once
// Strided N-d copies and fills on host and device: the one primitive behind tensor
// views, packing for MPI and box moves. Pointers are to element 0 of each view.
#include "kernels/floor.hpp"
#include <cstddef>

#include "kernels/strided_index.hpp"

namespace tessera::kernels {

void strided_copy_host(void* dst, const void* src, const StridedCopy& c, std::size_t elem_size);
// Zero-fills the strided view (dst strides of c; src strides ignored).
void strided_zero_host(void* dst, const StridedCopy& c, std::size_t elem_size);

// CUDA versions: device pointers; synchronous on the default stream. Throw when
// Tessera was built without CUDA.
void strided_copy_cuda(void* dst, const void* src, const StridedCopy& c, std::size_t elem_size);
void strided_zero_cuda(void* dst, const StridedCopy& c, std::size_t elem_size);

}  // namespace tessera::kernels
