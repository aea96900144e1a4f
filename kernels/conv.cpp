// ConvDesc: output extents, validation and the derived sizes every backend uses.
#include <algorithm>
#include <functional>
#include <sstream>

#include "decomp/error.hpp"
#include "kernels/conv.hpp"

namespace tessera::kernels {

Index ConvDesc::out(int d) const {
  return (in[d] + pad_lo[d] + pad_hi[d] - dilation[d] * (kernel[d] - 1) - 1) / stride[d] + 1;
}

void ConvDesc::validate() const {
  auto fail = [&](const std::string& what) {
    std::string m("ConvDesc: ");
    m += what;
    m += " (";
    m += str();
    m += ')';
    throw Error(m);
  };
  if (nd < 1 || nd > 3) fail("nd is not 1, 2 or 3");
  if (type != DType::f32 && type != DType::f64) fail("type is not float32 or float64");
  if (n < 1) fail("n must be >= 1");
  if (c_in < 1) fail("c_in must be >= 1");
  if (c_out < 1) fail("c_out must be >= 1");
  if (groups < 1) fail("groups must be >= 1");
  if (c_in % groups != 0) fail("c_in is not a multiple of groups");
  if (c_out % groups != 0) fail("c_out is not a multiple of groups");
  for (int d = 0; d < nd; ++d) {
    // Built by appending: GCC 12 warns (-Wrestrict, a false positive) on "lit" + string.
    auto field = [d](const char* name, const char* rule) {
      std::string s(name);
      s += '[';
      s += std::to_string(d);
      s += "] ";
      s += rule;
      return s;
    };
    if (in[d] < 1) fail(field("in", "must be >= 1"));
    if (kernel[d] < 1) fail(field("kernel", "must be >= 1"));
    if (stride[d] < 1) fail(field("stride", "must be >= 1"));
    if (dilation[d] < 1) fail(field("dilation", "must be >= 1"));
    if (pad_lo[d] < 0) fail(field("pad_lo", "must be >= 0"));
    if (pad_hi[d] < 0) fail(field("pad_hi", "must be >= 0"));
    // Floor division of a negative numerator would round towards zero: test the span.
    if (in[d] + pad_lo[d] + pad_hi[d] < dilation[d] * (kernel[d] - 1) + 1 || out(d) < 1) {
      std::string s("out(");
      s += std::to_string(d);
      s += ") <= 0: the dilated kernel is wider than the padded input";
      fail(s);
    }
  }
  if (!x_dense()) {
    for (int d = 0; d < nd + 2; ++d)
      if (x_strides[d] < 1) {
        std::string s("x_strides[");
        s += std::to_string(d);
        s += "] must be >= 1 (or all zero for contiguous)";
        fail(s);
      }
  }
}

namespace {
// The dims (N, C, spatial...) of x, clamped so that a descriptor that fails validation
// can still be printed.
int x_rank(const ConvDesc& c) {
  return std::clamp(c.nd, 1, 3) + 2;
}
}  // namespace

void ConvDesc::x_strides_or_dense(Index s[5]) const {
  const int r = x_rank(*this);
  bool zero = true;
  for (int d = 0; d < r; ++d) zero = zero && x_strides[d] == 0;
  Index acc = 1;
  for (int d = r - 1; d >= 0; --d) {
    const Index extent = d == 0 ? n : d == 1 ? c_in : in[d - 2];
    s[d] = zero ? acc : x_strides[d];
    acc *= extent;
  }
  for (int d = r; d < 5; ++d) s[d] = 0;
}

bool ConvDesc::x_dense() const {
  const int r = x_rank(*this);
  bool zero = true;
  for (int d = 0; d < r; ++d) zero = zero && x_strides[d] == 0;
  if (zero) return true;
  Index acc = 1;
  for (int d = r - 1; d >= 0; --d) {
    const Index extent = d == 0 ? n : d == 1 ? c_in : in[d - 2];
    if (x_strides[d] != acc && extent > 1) return false;
    acc *= extent;
  }
  return true;
}

Index ConvDesc::x_elems() const {
  Index e = n * c_in;
  for (int d = 0; d < nd; ++d) e *= in[d];
  return e;
}
Index ConvDesc::y_elems() const {
  Index e = n * c_out;
  for (int d = 0; d < nd; ++d) e *= out(d);
  return e;
}
Index ConvDesc::w_elems() const {
  Index e = c_out * (c_in / groups);
  for (int d = 0; d < nd; ++d) e *= kernel[d];
  return e;
}
double ConvDesc::flops_forward() const {
  return 2.0 * static_cast<double>(y_elems()) * static_cast<double>(w_elems() / c_out);
}

std::string ConvDesc::str() const {
  std::ostringstream o;
  auto list = [&](const char* name, const Index* v, int k) {
    o << ' ' << name << '=';
    for (int d = 0; d < k; ++d) o << (d ? "x" : "") << v[d];
  };
  const int k = nd >= 1 && nd <= 3 ? nd : 3;
  o << "conv" << nd << "d " << name_of(type) << " n=" << n << " cin=" << c_in << " cout=" << c_out
    << " groups=" << groups;
  list("in", in, k);
  list("kernel", kernel, k);
  list("stride", stride, k);
  list("dilation", dilation, k);
  list("pad_lo", pad_lo, k);
  list("pad_hi", pad_hi, k);
  if (!x_dense()) list("x_strides", x_strides, k + 2);
  return o.str();
}

bool ConvDesc::operator==(const ConvDesc& o) const {
  if (nd != o.nd || type != o.type || n != o.n || c_in != o.c_in || c_out != o.c_out ||
      groups != o.groups)
    return false;
  for (int d = 0; d < std::clamp(nd, 1, 3); ++d)
    if (in[d] != o.in[d] || kernel[d] != o.kernel[d] || stride[d] != o.stride[d] ||
        dilation[d] != o.dilation[d] || pad_lo[d] != o.pad_lo[d] || pad_hi[d] != o.pad_hi[d])
      return false;
  for (int d = 0; d < x_rank(*this); ++d)
    if (x_strides[d] != o.x_strides[d]) return false;
  return true;
}

std::size_t ConvDesc::hash() const {
  std::size_t h = static_cast<std::size_t>(nd) * 31 + static_cast<std::size_t>(type);
  auto mix = [&](Index v) {
    h ^= std::hash<Index>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  mix(n), mix(c_in), mix(c_out), mix(groups);
  for (int d = 0; d < std::clamp(nd, 1, 3); ++d)
    mix(in[d]), mix(kernel[d]), mix(stride[d]), mix(dilation[d]), mix(pad_lo[d]), mix(pad_hi[d]);
  for (int d = 0; d < x_rank(*this); ++d) mix(x_strides[d]);
  return h;
}

}  // namespace tessera::kernels
