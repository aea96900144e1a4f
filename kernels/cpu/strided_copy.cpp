#include <cstring>
#include <stdexcept>

#include "kernels/strided_copy.hpp"

namespace tessera::kernels {

StridedCopy simplify(const StridedCopy& c) {
  StridedCopy r;
  for (int d = 0; d < c.ndim; ++d) {
    if (c.shape[d] == 0) {  // nothing to copy: a canonical empty descriptor
      StridedCopy e;
      e.ndim = 1;
      return e;
    }
    if (c.shape[d] == 1) continue;
    if (r.ndim > 0) {
      const int l = r.ndim - 1;
      if (r.src_stride[l] == c.shape[d] * c.src_stride[d] &&
          r.dst_stride[l] == c.shape[d] * c.dst_stride[d]) {
        r.shape[l] *= c.shape[d];
        r.src_stride[l] = c.src_stride[d];
        r.dst_stride[l] = c.dst_stride[d];
        continue;
      }
    }
    r.shape[r.ndim] = c.shape[d];
    r.src_stride[r.ndim] = c.src_stride[d];
    r.dst_stride[r.ndim] = c.dst_stride[d];
    ++r.ndim;
  }
  if (r.ndim == 0) {  // a single element
    r.ndim = 1;
    r.shape[0] = 1;
    r.src_stride[0] = 1;
    r.dst_stride[0] = 1;
  }
  return r;
}

namespace {
// Walks all but the innermost dim; fn(src_off, dst_off) handles one innermost run.
template <class Fn>
void for_each_row(const StridedCopy& c, Fn&& fn) {
  const int outer = c.ndim - 1;
  Index rows = 1;
  for (int d = 0; d < outer; ++d) rows *= c.shape[d];
  for (Index r = 0; r < rows; ++r) {
    Index rem = r, so = 0, dof = 0;
    for (int d = outer - 1; d >= 0; --d) {
      const Index k = rem % c.shape[d];
      rem /= c.shape[d];
      so += k * c.src_stride[d];
      dof += k * c.dst_stride[d];
    }
    fn(so, dof);
  }
}
}  // namespace

void strided_copy_host(void* dst, const void* src, const StridedCopy& c0, std::size_t es) {
  const StridedCopy c = simplify(c0);
  if (c.count() == 0) return;
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const int in = c.ndim - 1;
  const Index n = c.shape[in], ss = c.src_stride[in], ds = c.dst_stride[in];
  for_each_row(c, [&](Index so, Index dof) {
    if (ss == 1 && ds == 1) {
      std::memcpy(d + dof * es, s + so * es, static_cast<std::size_t>(n) * es);
    } else {
      for (Index k = 0; k < n; ++k)
        std::memcpy(d + (dof + k * ds) * es, s + (so + k * ss) * es, es);
    }
  });
}

void strided_zero_host(void* dst, const StridedCopy& c0, std::size_t es) {
  StridedCopy c1 = c0;
  for (int d = 0; d < c1.ndim; ++d) c1.src_stride[d] = c1.dst_stride[d];
  const StridedCopy c = simplify(c1);
  if (c.count() == 0) return;
  auto* d = static_cast<unsigned char*>(dst);
  const int in = c.ndim - 1;
  const Index n = c.shape[in], ds = c.dst_stride[in];
  for_each_row(c, [&](Index, Index dof) {
    if (ds == 1) {
      std::memset(d + dof * es, 0, static_cast<std::size_t>(n) * es);
    } else {
      for (Index k = 0; k < n; ++k) std::memset(d + (dof + k * ds) * es, 0, es);
    }
  });
}

}  // namespace tessera::kernels
