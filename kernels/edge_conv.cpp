// Entry points of kernels/edge_conv.hpp: one per op, dispatched once on the device.
#include "kernels/edge_conv.hpp"

#include "decomp/error.hpp"

namespace tessera::kernels {
namespace {
void check(const EdgeConvShape& s, const char* what) {
  TESSERA_CHECK(s.points >= 0 && s.neighbours >= 1 && s.edge >= 1 && s.out >= 1,
                what << ": m " << s.points << " k " << s.neighbours << " edge " << s.edge << " out "
                     << s.out);
}
}  // namespace

void edge_conv_forward(const Device& dev, DType t, const EdgeConvShape& s, const void* edges,
                       const std::int64_t* ids, const void* w, const void* b, void* z, void* y,
                       std::int64_t* argmax) {
  check(s, "edge_conv_forward");
  if (dev.is_host()) return cpu::edge_conv_forward(t, s, edges, ids, w, b, z, y, argmax);
  if constexpr (kCudaEnabled)
    return cuda::edge_conv_forward(dev, t, s, edges, ids, w, b, z, y, argmax);
  throw_without_cuda("edge_conv_forward");
}

void edge_conv_backward(const Device& dev, DType t, const EdgeConvShape& s, const void* edges,
                        const std::int64_t* ids, const void* w, const void* z,
                        const std::int64_t* argmax, const void* dy, void* dedges, double* dw,
                        double* db) {
  check(s, "edge_conv_backward");
  if (dev.is_host())
    return cpu::edge_conv_backward(t, s, edges, ids, w, z, argmax, dy, dedges, dw, db);
  if constexpr (kCudaEnabled)
    return cuda::edge_conv_backward(dev, t, s, edges, ids, w, z, argmax, dy, dedges, dw, db);
  throw_without_cuda("edge_conv_backward");
}

}  // namespace tessera::kernels
