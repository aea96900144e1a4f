#pragma once
// Strided N-d copies and fills on host and device: the one primitive behind tensor
// views, packing for MPI and box moves. Pointers are to element 0 of each view.
#include "kernels/floor.hpp"
#include "kernels/device/device.hpp"
#include <cstddef>

#include "kernels/strided_index.hpp"

namespace tessera::kernels {

void strided_copy(const Device& dev, void* dst, const void* src, const StridedCopy& c,
                  std::size_t elem_size);
// Zero-fills the strided view (dst strides of c; src strides ignored).
void strided_zero(const Device& dev, void* dst, const StridedCopy& c, std::size_t elem_size);

// The backends behind the entry points above (the entry dispatches on dev.space):
// host loops, oneDNN, OpenMP ...
namespace cpu {
void strided_copy(void* dst, const void* src, const StridedCopy& c, std::size_t elem_size);
void strided_zero(void* dst, const StridedCopy& c, std::size_t elem_size);
}  // namespace cpu
// ... and CUDA, defined only where Tessera is built with CUDA (kCudaEnabled): every pointer
// is a device pointer, work is queued on dev.stream, and a result returned to the host (a
// sum) is waited for.
namespace cuda {
void strided_copy(const Device& dev, void* dst, const void* src, const StridedCopy& c,
                  std::size_t elem_size);
void strided_zero(const Device& dev, void* dst, const StridedCopy& c, std::size_t elem_size);
}  // namespace cuda

}  // namespace tessera::kernels
