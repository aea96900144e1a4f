#include <cstdint>

#include "decomp/error.hpp"
#include "kernels/cpu/row_walk.hpp"
#include "kernels/region_pack.hpp"
#include "kernels/strided_copy.hpp"

namespace tessera::kernels {
namespace {

// Adds the contiguous run buffer[0, count) into the strided tensor view of c.
template <class T>
void add_strided(T* tensor, const T* buffer, const StridedCopy& c0) {
  const StridedCopy c = simplify(c0);
  const int in = c.ndim - 1;
  const Index run = c.shape[in], stride = c.src_stride[in];
  for_each_row(c, [&](Index t, Index b) {
    for (Index k = 0; k < run; ++k) tensor[t + k * stride] += buffer[b + k];
  });
}

}  // namespace

void cpu::region_pack(void* tensor, void* buffer, const PackRegion* regions, int n, Index end,
                      std::size_t es, PackOp op, DType add) {
  auto* t = static_cast<unsigned char*>(tensor);
  auto* b = static_cast<unsigned char*>(buffer);
  for (int r = 0; r < n; ++r) {
    const PackRegion& g = regions[r];
    if ((r + 1 < n ? regions[r + 1].buffer_offset : end) <= g.buffer_offset) continue;
    // The tensor side strides through the box; the buffer side is contiguous.
    StridedCopy c = g.box;
    Index bs = 1;
    for (int d = c.ndim - 1; d >= 0; --d) c.dst_stride[d] = bs, bs *= c.shape[d];
    unsigned char* tp = t + g.tensor_offset * es;
    unsigned char* bp = b + g.buffer_offset * es;
    if (op == PackOp::Pack) {
      cpu::strided_copy(bp, tp, c, es);
    } else if (op == PackOp::Unpack) {
      for (int d = 0; d < c.ndim; ++d) std::swap(c.src_stride[d], c.dst_stride[d]);
      cpu::strided_copy(tp, bp, c, es);
    } else if (add == DType::f32) {
      add_strided(reinterpret_cast<float*>(tp), reinterpret_cast<const float*>(bp), c);
    } else if (add == DType::f64) {
      add_strided(reinterpret_cast<double*>(tp), reinterpret_cast<const double*>(bp), c);
    } else {
      add_strided(reinterpret_cast<std::int64_t*>(tp), reinterpret_cast<const std::int64_t*>(bp),
                  c);
    }
  }
}

}  // namespace tessera::kernels
