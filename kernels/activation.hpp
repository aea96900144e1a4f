#pragma once
// Pointwise activations on n contiguous elements: forward y = f(x) (y may alias x) and
// backward dx = dy * f'(x) (dx may alias dy). GELU is the exact erf form.
#include "kernels/floor.hpp"
#include "kernels/device/device.hpp"
#include "decomp/box.hpp"
#include "decomp/dtype.hpp"
#include "kernels/strided_index.hpp"

namespace tessera::kernels {

enum class Activation { ReLU, GELU, SiLU, Tanh };

const char* name_of(Activation a);
// Throws for a value outside the enum (an Activation cast from an integer); the entry points
// below check it.
void check_activation(Activation a);

void activation_forward(const Device& dev, Activation a, DType type, Index n, const void* x,
                        void* y);
void activation_backward(const Device& dev, Activation a, DType type, Index n, const void* x,
                         const void* dy, void* dx);

// The same over strided N-d views (a tensor's interior inside a buffer with ghost room):
// `map` gives each element's offset in the plain tensors (src strides: x, dx) and in the
// strided ones (dst strides: y, dy).
void activation_forward(const Device& dev, Activation a, DType type, const StridedCopy& map,
                        const void* x, void* y);
void activation_backward(const Device& dev, Activation a, DType type, const StridedCopy& map,
                         const void* x, const void* dy, void* dx);

// The backends behind the entry points above (the entry dispatches on dev.space):
// host loops, oneDNN, OpenMP ...
namespace cpu {
void activation_forward(Activation a, DType type, Index n, const void* x, void* y);
void activation_backward(Activation a, DType type, Index n, const void* x, const void* dy,
                         void* dx);
void activation_forward(Activation a, DType type, const StridedCopy& map, const void* x, void* y);
void activation_backward(Activation a, DType type, const StridedCopy& map, const void* x,
                         const void* dy, void* dx);
}  // namespace cpu
// ... and CUDA, defined only where Tessera is built with CUDA (kCudaEnabled): every pointer
// is a device pointer, work is queued on dev.stream, and a result returned to the host (a
// sum) is waited for.
namespace cuda {
void activation_forward(const Device& dev, Activation a, DType type, Index n, const void* x,
                        void* y);
void activation_backward(const Device& dev, Activation a, DType type, Index n, const void* x,
                         const void* dy, void* dx);
void activation_forward(const Device& dev, Activation a, DType type, const StridedCopy& map,
                        const void* x, void* y);
void activation_backward(const Device& dev, Activation a, DType type, const StridedCopy& map,
                         const void* x, const void* dy, void* dx);
}  // namespace cuda

}  // namespace tessera::kernels
