#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "kernels/cpu/row_walk.hpp"
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
// Short rows (a halo W-face: one cache line, often a new page, per row of a few cells) wait
// on memory latency, not bandwidth; the hardware prefetcher stops at page boundaries, so
// the walk prefetches this many rows (or elements) ahead itself. Prefetches never fault.
constexpr Index kAhead = 16;
inline void prefetch(const unsigned char* base, Index bytes, bool write) {
  const auto* p = reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(base) +
                                                static_cast<std::uintptr_t>(bytes));
  if (write)
    __builtin_prefetch(p, 1);
  else
    __builtin_prefetch(p, 0);
}

// Copies every row of `bytes` bytes with a copy the compiler sees the size of.
template <std::size_t Bytes>
void copy_rows(unsigned char* d, const unsigned char* s, const StridedCopy& c, std::size_t es) {
  const int o = c.ndim - 2;  // the row dim
  const Index sa = o >= 0 ? c.src_stride[o] * kAhead * static_cast<Index>(es) : 0;
  const Index da = o >= 0 ? c.dst_stride[o] * kAhead * static_cast<Index>(es) : 0;
  for_each_row(c, [&](Index so, Index dof) {
    prefetch(s + so * es, sa, false);
    prefetch(d + dof * es, da, true);
    std::memcpy(d + dof * es, s + so * es, Bytes);
  });
}
}  // namespace

void cpu::strided_copy(void* dst, const void* src, const StridedCopy& c0, std::size_t es) {
  const StridedCopy c = simplify(c0);
  if (c.count() == 0) return;
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const int in = c.ndim - 1;
  const Index n = c.shape[in], ss = c.src_stride[in], ds = c.dst_stride[in];
  if (ss == 1 && ds == 1) {
    const std::size_t bytes = static_cast<std::size_t>(n) * es;
    switch (bytes) {  // short contiguous rows: fixed-size copies
      case 4:
        return copy_rows<4>(d, s, c, es);
      case 8:
        return copy_rows<8>(d, s, c, es);
      case 12:
        return copy_rows<12>(d, s, c, es);
      case 16:
        return copy_rows<16>(d, s, c, es);
      case 32:
        return copy_rows<32>(d, s, c, es);
      default:
        for_each_row(c,
                     [&](Index so, Index dof) { std::memcpy(d + dof * es, s + so * es, bytes); });
        return;
    }
  }
  const Index sa = ss * kAhead * static_cast<Index>(es), da = ds * kAhead * static_cast<Index>(es);
  for_each_row(c, [&](Index so, Index dof) {
    for (Index k = 0; k < n; ++k) {
      unsigned char* dk = d + (dof + k * ds) * es;
      const unsigned char* sk = s + (so + k * ss) * es;
      prefetch(sk, sa, false);
      prefetch(dk, da, true);
      std::memcpy(dk, sk, es);
    }
  });
}

void cpu::strided_zero(void* dst, const StridedCopy& c0, std::size_t es) {
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
