// Entry points of kernels/edge_conv.hpp (host only so far: device memory is refused).
#include "kernels/edge_conv.hpp"

#include "decomp/error.hpp"

namespace tessera::kernels {
namespace {
void check(const Device& dev, const EdgeConvShape& s, const char* what) {
  TESSERA_CHECK(dev.is_host(), what << ": point convolution runs on the host only so far (no "
                                       "CUDA kernel yet)");
  TESSERA_CHECK(s.points >= 0 && s.neighbours >= 1 && s.edge >= 1 && s.out >= 1,
                what << ": m " << s.points << " k " << s.neighbours << " edge " << s.edge << " out "
                     << s.out);
}
}  // namespace

void edge_conv_forward(const Device& dev, DType t, const EdgeConvShape& s, const void* edges,
                       const std::int64_t* ids, const void* w, const void* b, void* z, void* y,
                       std::int32_t* argmax) {
  check(dev, s, "edge_conv_forward");
  cpu::edge_conv_forward(t, s, edges, ids, w, b, z, y, argmax);
}

void edge_conv_backward(const Device& dev, DType t, const EdgeConvShape& s, const void* edges,
                        const std::int64_t* ids, const void* w, const void* z,
                        const std::int32_t* argmax, const void* dy, void* dedges, double* dw,
                        double* db) {
  check(dev, s, "edge_conv_backward");
  cpu::edge_conv_backward(t, s, edges, ids, w, z, argmax, dy, dedges, dw, db);
}

}  // namespace tessera::kernels
