// One kernel for all regions of a halo message buffer: thread i handles buffer element
// i and finds its tensor position through kernels/region_pack.hpp's shared arithmetic.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "decomp/error.hpp"
#include "kernels/cuda/device_loops.cuh"
#include "kernels/region_pack.hpp"

namespace tessera::kernels {
namespace {

// 16-byte elements (complex128) move as one aligned unit.
struct alignas(16) Bytes16 {
  unsigned long long lo, hi;
};

// Buffer elements [first, last): all regions at once, or (for additions) one region.
template <class T, int Op>
__global__ void pack_kernel(T* tensor, T* buffer, const PackRegion* regions, int n, Index first,
                            Index last) {
  for (Index i = first + blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < last;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index off = tensor_offset_of(regions, n, i);
    if constexpr (Op == 0)
      buffer[i] = tensor[off];
    else if constexpr (Op == 1)
      tensor[off] = buffer[i];
    else if constexpr (std::is_arithmetic_v<T>)  // additions: float, double, int64 only
      tensor[off] += buffer[i];
  }
}

template <class T>
void launch(cudaStream_t s, void* tensor, void* buffer, const PackRegion* d_regions, int n,
            Index first, Index last, PackOp op) {
  const Index b = (last - first + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
  T* t = static_cast<T*>(tensor);
  T* buf = static_cast<T*>(buffer);
  if (op == PackOp::Pack)
    pack_kernel<T, 0><<<blocks, 256, 0, s>>>(t, buf, d_regions, n, first, last);
  else if (op == PackOp::Unpack)
    pack_kernel<T, 1><<<blocks, 256, 0, s>>>(t, buf, d_regions, n, first, last);
  else
    pack_kernel<T, 2><<<blocks, 256, 0, s>>>(t, buf, d_regions, n, first, last);
  check_launch("region pack kernel");
}

// Additions: regions of one message may add into the same owned cell (a periodic corner,
// edge and face ghost of one rank all wrap onto it), so one launch per region, in table
// order on the stream - the host loop's order, hence bit-identical sums.
template <class T>
void add_regions(cudaStream_t s, void* tensor, void* buffer, const PackRegion* d_regions,
                 const std::vector<PackRegion>& table, Index total) {
  const int n = static_cast<int>(table.size());
  for (int r = 0; r < n; ++r) {
    const Index first = table[r].buffer_offset,
                last = r + 1 < n ? table[r + 1].buffer_offset : total;
    if (last > first) launch<T>(s, tensor, buffer, d_regions, n, first, last, PackOp::UnpackAdd);
  }
}

}  // namespace

void cuda::region_pack(const Device& dev, void* tensor, void* buffer, const PackRegion* regions,
                       int n, Index end, std::size_t es, PackOp op, DType add) {
  if (n == 0 || end <= regions[0].buffer_offset) return;
  // Threads index the buffer from 0: rebase the table on the first region.
  const Index base = regions[0].buffer_offset, total = end - base;
  std::vector<PackRegion> table(regions, regions + n);
  for (auto& r : table) r.buffer_offset -= base;
  buffer = static_cast<unsigned char*>(buffer) + base * es;
  // The table goes up on the stream; a pageable source may be reused once the call returns.
  DeviceScratch<PackRegion> table_on_device(table.size());
  PackRegion* d = table_on_device.get();
  const cudaStream_t s = stream_of(dev);
  TESSERA_CUDA_CHECK(cudaMemcpyAsync(d, table.data(), table.size() * sizeof(PackRegion),
                                     cudaMemcpyHostToDevice, s));
  {
    if (op == PackOp::UnpackAdd) {
      if (add == DType::f32)
        add_regions<float>(s, tensor, buffer, d, table, total);
      else if (add == DType::f64)
        add_regions<double>(s, tensor, buffer, d, table, total);
      else
        add_regions<long long>(s, tensor, buffer, d, table, total);
    } else if (es == 2) {
      launch<std::uint16_t>(s, tensor, buffer, d, n, 0, total, op);
    } else if (es == 4) {
      launch<std::uint32_t>(s, tensor, buffer, d, n, 0, total, op);
    } else if (es == 8) {
      launch<unsigned long long>(s, tensor, buffer, d, n, 0, total, op);
    } else if (es == 16) {
      launch<Bytes16>(s, tensor, buffer, d, n, 0, total, op);
    } else {
      throw Error("region pack: unsupported element size " + std::to_string(es));
    }
  }
}

}  // namespace tessera::kernels
