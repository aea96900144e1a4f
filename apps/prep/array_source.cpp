#include "apps/prep/array_source.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "io/pread_fully.hpp"

namespace tessera::prep {
namespace {

template <std::size_t N>
void swap_bytes(char* p, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i, p += N) std::reverse(p, p + N);
}

}  // namespace

std::string read_run(int fd, const ArraySource& src, Index first, Index count, float* dst,
                     std::vector<char>& scratch) {
  const std::size_t n = static_cast<std::size_t>(count), bytes = n * src.elem;
  if (scratch.size() < bytes) scratch.resize(bytes);
  char* raw = scratch.data();
  const std::size_t got =
      io::pread_fully(fd, raw, bytes, src.offset + static_cast<std::size_t>(first) * src.elem);
  if (got != bytes)
    return "short read from '" + src.path + "' (" + std::to_string(got) + " of " +
           std::to_string(bytes) + " bytes at value " + std::to_string(first) + ")";
  if (src.big_endian) {
    if (src.elem == 8)
      swap_bytes<8>(raw, n);
    else
      swap_bytes<4>(raw, n);
  }
  if (src.elem == 8)
    for (std::size_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, raw + 8 * i, 8);
      dst[i] = static_cast<float>(v);
    }
  else
    std::memcpy(dst, raw, n * 4);
  // The schema holds finite float32.
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isfinite(dst[i])) continue;
    double v = dst[i];
    if (src.elem == 8) std::memcpy(&v, raw + 8 * i, 8);
    const Index at = first + static_cast<Index>(i);
    Index per_sample = 1;
    for (std::size_t d = 1; d < src.shape.size(); ++d) per_sample *= src.shape[d];
    const Index sample = src.fortran ? at % src.shape[0] : at / per_sample;
    std::ostringstream os;
    os << std::setprecision(17) << "'" << src.path << "': value " << v << " at flat index " << at
       << (src.fortran ? " (Fortran order, sample " : " (sample ") << sample
       << ") is not a finite float32: the schema takes finite values only";
    return os.str();
  }
  return "";
}

void fortran_to_c(const float* src, float* dst, const std::vector<Index>& ext) {
  const std::size_t nd = ext.size();
  Index total = 1;
  for (Index e : ext) total *= e;
  if (total == 0) return;
  if (nd <= 1) {
    std::copy(src, src + total, dst);
    return;
  }
  // Column-major strides; the odometer walks the output in row-major order, the last dim
  // innermost (a strided gather from src).
  std::vector<Index> stride(nd, 1), idx(nd, 0);
  for (std::size_t d = 1; d < nd; ++d) stride[d] = stride[d - 1] * ext[d - 1];
  const Index inner = ext[nd - 1], step = stride[nd - 1];
  Index base = 0;  // src offset of idx with the last dim at 0
  for (Index out = 0; out < total; out += inner) {
    const float* s = src + base;
    for (Index i = 0; i < inner; ++i) dst[out + i] = s[i * step];
    for (std::size_t d = nd - 1; d-- > 0;) {  // advance the dims before the last
      if (++idx[d] < ext[d]) {
        base += stride[d];
        break;
      }
      base -= stride[d] * (ext[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace tessera::prep
