// CUDA strided copy and zero fill: one thread per element over the shared
// StridedCopy index arithmetic (kernels/strided_index.hpp).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "decomp/error.hpp"
#include "kernels/cuda/device_loops.cuh"
#include "kernels/strided_copy.hpp"

namespace tessera::kernels {
namespace {

template <class T>
__global__ void copy_kernel(T* dst, const T* src, StridedCopy c, Index n) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    Index so, dof;
    c.offsets(i, so, dof);
    dst[dof] = src[so];
  }
}

template <class T>
__global__ void zero_kernel(T* dst, StridedCopy c, Index n) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    Index so, dof;
    c.offsets(i, so, dof);
    dst[dof] = T{};
  }
}

unsigned blocks_for(Index n) {
  const Index b = (n + 255) / 256;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

template <class T>
void launch_copy(cudaStream_t s, void* dst, const void* src, const StridedCopy& c) {
  const Index n = c.count();
  if (n == 0) return;
  copy_kernel<T>
      <<<blocks_for(n), 256, 0, s>>>(static_cast<T*>(dst), static_cast<const T*>(src), c, n);
  check_launch("strided copy kernel");
}

template <class T>
void launch_zero(cudaStream_t s, void* dst, const StridedCopy& c) {
  const Index n = c.count();
  if (n == 0) return;
  zero_kernel<T><<<blocks_for(n), 256, 0, s>>>(static_cast<T*>(dst), c, n);
  check_launch("strided zero kernel");
}

}  // namespace

void cuda::strided_copy(const Device& dev, void* dst, const void* src, const StridedCopy& c0,
                        std::size_t es) {
  const StridedCopy c = simplify(c0);
  switch (es) {
    case 1:
      return launch_copy<std::uint8_t>(stream_of(dev), dst, src, c);
    case 2:
      return launch_copy<std::uint16_t>(stream_of(dev), dst, src, c);
    case 4:
      return launch_copy<std::uint32_t>(stream_of(dev), dst, src, c);
    case 8:
      return launch_copy<std::uint64_t>(stream_of(dev), dst, src, c);
    case 16:  // complex128
      return launch_copy<ulonglong2>(stream_of(dev), dst, src, c);
  }
  throw Error("strided_copy (CUDA): unsupported element size " + std::to_string(es));
}

void cuda::strided_zero(const Device& dev, void* dst, const StridedCopy& c0, std::size_t es) {
  StridedCopy c1 = c0;
  for (int d = 0; d < c1.ndim; ++d) c1.src_stride[d] = c1.dst_stride[d];
  const StridedCopy c = simplify(c1);
  switch (es) {
    case 1:
      return launch_zero<std::uint8_t>(stream_of(dev), dst, c);
    case 2:
      return launch_zero<std::uint16_t>(stream_of(dev), dst, c);
    case 4:
      return launch_zero<std::uint32_t>(stream_of(dev), dst, c);
    case 8:
      return launch_zero<std::uint64_t>(stream_of(dev), dst, c);
    case 16:
      return launch_zero<ulonglong2>(stream_of(dev), dst, c);
  }
  throw Error("strided_zero (CUDA): unsupported element size " + std::to_string(es));
}

}  // namespace tessera::kernels
