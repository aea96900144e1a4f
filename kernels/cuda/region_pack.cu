// One kernel for all regions of a halo message buffer: thread i handles buffer element
// i and finds its tensor position through kernels/region_pack.hpp's shared arithmetic.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "decomp/error.hpp"
#include "kernels/region_pack.hpp"

namespace tessera::kernels {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

template <class T, int Op>
__global__ void pack_kernel(T* tensor, T* buffer, const PackRegion* regions, int n, Index total) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index off = tensor_offset_of(regions, n, i);
    if (Op == 0)
      buffer[i] = tensor[off];
    else if (Op == 1)
      tensor[off] = buffer[i];
    else
      tensor[off] += buffer[i];
  }
}

template <class T>
void launch(void* tensor, void* buffer, const PackRegion* d_regions, int n, Index total,
            PackOp op) {
  const Index b = (total + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
  T* t = static_cast<T*>(tensor);
  T* buf = static_cast<T*>(buffer);
  if (op == PackOp::Pack)
    pack_kernel<T, 0><<<blocks, 256>>>(t, buf, d_regions, n, total);
  else if (op == PackOp::Unpack)
    pack_kernel<T, 1><<<blocks, 256>>>(t, buf, d_regions, n, total);
  else
    pack_kernel<T, 2><<<blocks, 256>>>(t, buf, d_regions, n, total);
  check(cudaGetLastError(), "region pack kernel launch");
}

}  // namespace

void region_pack_cuda(void* tensor, void* buffer, const PackRegion* regions, int n, Index end,
                      std::size_t es, PackOp op, DType add) {
  if (n == 0 || end <= regions[0].buffer_offset) return;
  // Threads index the buffer from 0: rebase the table on the first region.
  const Index base = regions[0].buffer_offset, total = end - base;
  std::vector<PackRegion> table(regions, regions + n);
  for (auto& r : table) r.buffer_offset -= base;
  buffer = static_cast<unsigned char*>(buffer) + base * es;
  PackRegion* d = nullptr;
  const std::size_t bytes = table.size() * sizeof(PackRegion);
  check(cudaMalloc(&d, bytes), "cudaMalloc(region table)");
  check(cudaMemcpy(d, table.data(), bytes, cudaMemcpyHostToDevice), "region table upload");
  try {
    if (op == PackOp::UnpackAdd) {
      if (add == DType::f32)
        launch<float>(tensor, buffer, d, n, total, op);
      else if (add == DType::f64)
        launch<double>(tensor, buffer, d, n, total, op);
      else
        launch<long long>(tensor, buffer, d, n, total, op);
    } else if (es == 2) {
      launch<std::uint16_t>(tensor, buffer, d, n, total, op);
    } else if (es == 4) {
      launch<std::uint32_t>(tensor, buffer, d, n, total, op);
    } else if (es == 8) {
      launch<unsigned long long>(tensor, buffer, d, n, total, op);
    } else {
      throw Error("region pack: unsupported element size " + std::to_string(es));
    }
    check(cudaDeviceSynchronize(), "region pack kernel");
  } catch (...) {
    cudaFree(d);
    throw;
  }
  check(cudaFree(d), "cudaFree(region table)");
}

}  // namespace tessera::kernels
