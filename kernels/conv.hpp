#pragma once
// Local (single-device) N-d convolution: forward, backward-data and backward-weights
// with bias, groups, dilation, per-side zero padding and a strided (windowed) input.
// CPU: oneDNN for float32, direct OpenMP loops for float64 (oneDNN has no f64 conv).
// CUDA: cuDNN's legacy convolution API, float32 and float64. Layouts are PyTorch's:
//   x, dx: (N, Cin, spatial...)      strides x_strides (all zero = contiguous)
//   y, dy: (N, Cout, out...)          contiguous
//   w, dw: (Cout, Cin/groups, kernel...) contiguous
//   bias, dbias: (Cout)
#include "kernels/floor.hpp"
#include "kernels/device/device.hpp"
#include <cstddef>
#include <string>

#include "decomp/box.hpp"
#include "decomp/dtype.hpp"

namespace tessera::kernels {

struct ConvDesc {
  int nd = 2;               // spatial dims, 1..3
  DType type = DType::f32;  // element type of every tensor
  Index n = 1, c_in = 1, c_out = 1, groups = 1;
  Index in[3] = {1, 1, 1};  // input spatial extents (only the first nd used)
  Index kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1};
  Index pad_lo[3] = {0, 0, 0}, pad_hi[3] = {0, 0, 0};  // zero padding, may differ per side
  // Element strides of x (and of dx, which has x's layout) for dims (N, C, spatial...);
  // all zero = contiguous row-major. Lets callers pass a window of a larger halo-padded buffer.
  Index x_strides[5] = {0, 0, 0, 0, 0};

  Index out(int d) const;  // (in + pad_lo + pad_hi - dilation*(kernel-1) - 1) / stride + 1
  void validate() const;   // throws tessera::Error naming the bad field

  // The effective strides of x: x_strides, or the contiguous ones when all are zero.
  void x_strides_or_dense(Index s[5]) const;
  bool x_dense() const;                      // x is contiguous row-major
  Index x_elems() const;                     // N*Cin*prod(in): elements of a contiguous x
  Index y_elems() const;                     // N*Cout*prod(out)
  Index w_elems() const;                     // Cout*(Cin/groups)*prod(kernel)
  double flops_forward() const;              // 2 * multiply-adds of the forward pass
  std::string str() const;                   // for messages: "conv2d f32 n=1 cin=32 ..."
  bool operator==(const ConvDesc& o) const;  // compares the used dims only
  std::size_t hash() const;                  // consistent with ==, for primitive caches
};

// Host memory. y contiguous; bias (Cout) or nullptr.
void conv_forward(const Device& dev, const ConvDesc& desc, const void* x, const void* w,
                  const void* bias, void* y);
// dx (x's layout and strides) is overwritten; elements outside the window are untouched.
void conv_backward_data(const Device& dev, const ConvDesc& desc, const void* dy, const void* w,
                        void* dx);
// dw and dbias (nullable) are overwritten.
void conv_backward_weights(const Device& dev, const ConvDesc& desc, const void* x, const void* dy,
                           void* dw, void* dbias);

// The most elements one backend call takes in any one tensor: cuDNN's descriptors hold
// int extents and strides (2^31 - 1); the host has no such bound. A convolution past it
// runs in pieces, each an ordinary backend call (kernels/conv_pieces.cpp): chunks of the
// batch where one sample fits, else slabs of the outermost spatial dim per sample. Past
// it even in slabs of one output row, the entry points throw a tessera::Error.
Index conv_call_limit(const Device& dev);

// Lowers that limit for every backend while alive (0: the default), so tests run the
// piecewise path with small tensors on either backend. Counts the calls it saw split.
class ScopedConvCallLimit {
 public:
  explicit ScopedConvCallLimit(Index elems);
  ~ScopedConvCallLimit();
  ScopedConvCallLimit(const ScopedConvCallLimit&) = delete;
  ScopedConvCallLimit& operator=(const ScopedConvCallLimit&) = delete;
  long batch_split_calls() const;  // entry calls run in chunks of the batch
  long slab_split_calls() const;   // entry calls run in spatial slabs

 private:
  Index previous_;
  long batch_start_, slab_start_;
};

// The backends behind the entry points above (the entry dispatches on dev.space):
// host loops, oneDNN, OpenMP ...
namespace cpu {
void conv_forward(const ConvDesc&, const void* x, const void* w, const void* bias, void* y);
void conv_backward_data(const ConvDesc&, const void* dy, const void* w, void* dx);
void conv_backward_weights(const ConvDesc&, const void* x, const void* dy, void* dw, void* dbias);
}  // namespace cpu
// ... and CUDA, defined only where Tessera is built with CUDA (kCudaEnabled): every pointer
// is a device pointer, work is queued on dev.stream, and a result returned to the host (a
// sum) is waited for.
namespace cuda {
void conv_forward(const Device& dev, const ConvDesc&, const void* x, const void* w,
                  const void* bias, void* y);
void conv_backward_data(const Device& dev, const ConvDesc&, const void* dy, const void* w,
                        void* dx);
void conv_backward_weights(const Device& dev, const ConvDesc&, const void* x, const void* dy,
                           void* dw, void* dbias);
}  // namespace cuda

}  // namespace tessera::kernels
