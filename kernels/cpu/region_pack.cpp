#include <cstdint>
#include <cstring>

#include "decomp/error.hpp"
#include "kernels/region_pack.hpp"
#include "kernels/strided_copy.hpp"

namespace tessera::kernels {
namespace {
template <class T>
void add_run(void* dst, const void* src, Index n) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  for (Index k = 0; k < n; ++k) d[k] += s[k];
}
void add_one_run(int add_type, void* dst, const void* src, Index n) {
  switch (add_type) {
    case 0: return add_run<float>(dst, src, n);
    case 1: return add_run<double>(dst, src, n);
    case 2: return add_run<std::int64_t>(dst, src, n);
  }
  throw Error("region pack: unsupported add type " + std::to_string(add_type));
}
}  // namespace

void region_pack_host(void* tensor, void* buffer, const std::vector<PackRegion>& regions,
                      Index total, std::size_t es, PackOp op, int add_type) {
  auto* t = static_cast<unsigned char*>(tensor);
  auto* b = static_cast<unsigned char*>(buffer);
  const int n = static_cast<int>(regions.size());
  for (int r = 0; r < n; ++r) {
    const PackRegion& g = regions[r];
    const Index end = r + 1 < n ? regions[r + 1].buffer_offset : total;
    if (end <= g.buffer_offset) continue;
    if (op != PackOp::UnpackAdd) {
      // Copies: the strided copy merges dims and moves whole contiguous runs.
      StridedCopy c = g.box;
      Index bs = 1;
      for (int d = c.ndim - 1; d >= 0; --d) c.dst_stride[d] = bs, bs *= c.shape[d];
      unsigned char* tp = t + g.tensor_offset * es;
      unsigned char* bp = b + g.buffer_offset * es;
      if (op == PackOp::Pack) {
        strided_copy_host(bp, tp, c, es);
      } else {
        for (int d = 0; d < c.ndim; ++d) std::swap(c.src_stride[d], c.dst_stride[d]);
        strided_copy_host(tp, bp, c, es);
      }
      continue;
    }
    const int in = g.box.ndim - 1;
    const Index run = g.box.shape[in];
    const bool unit = g.box.src_stride[in] == 1;
    // Row starts go through the same arithmetic as the CUDA kernel's elements.
    for (Index i = g.buffer_offset; i < end; i += run) {
      const Index off = tensor_offset_of(regions.data(), n, i);
      unsigned char* tp = t + off * es;
      unsigned char* bp = b + i * es;
      for (Index k = 0; k < (unit ? 1 : run); ++k) {
        const Index len = unit ? run : 1;
        unsigned char* tk = tp + k * g.box.src_stride[in] * es;
        unsigned char* bk = bp + k * es;
        if (op == PackOp::Pack) std::memcpy(bk, tk, static_cast<std::size_t>(len) * es);
        else if (op == PackOp::Unpack) std::memcpy(tk, bk, static_cast<std::size_t>(len) * es);
        else add_one_run(add_type, tk, bk, len);
      }
    }
  }
}

}  // namespace tessera::kernels
