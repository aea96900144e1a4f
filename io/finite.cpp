#include "io/finite.hpp"

#include <cmath>
#include <sstream>

namespace tessera::io {

Index first_nonfinite(const Tensor& t) {
  if (!t.defined() || t.numel() == 0) return -1;
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64) return -1;
  const Tensor h = t.to(MemSpace::Host).contiguous();
  const Index n = h.numel();
  if (h.dtype() == DType::f32) {
    const float* p = h.data<float>();
    for (Index i = 0; i < n; ++i)
      if (!std::isfinite(p[i])) return i;
  } else {
    const double* p = h.data<double>();
    for (Index i = 0; i < n; ++i)
      if (!std::isfinite(p[i])) return i;
  }
  return -1;
}

std::string first_nonfinite(const std::vector<NamedTensor>& ts, const std::string& what) {
  for (const NamedTensor& nt : ts) {
    if (!nt.tensor.defined()) continue;  // made when used: checked then
    const Index i = first_nonfinite(nt.tensor);
    if (i < 0) continue;
    const Tensor h = nt.tensor.to(MemSpace::Host).contiguous();
    const double v = h.dtype() == DType::f32 ? double(h.data<float>()[i]) : h.data<double>()[i];
    std::ostringstream os;
    os << what << " " << nt.name << " (element " << i << " = " << v << ")";
    return os.str();
  }
  return "";
}

}  // namespace tessera::io
