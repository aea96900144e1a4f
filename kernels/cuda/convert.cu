// CUDA element type conversion: the functors of kernels/convert_impl.hpp, one thread per
// element.
#include "kernels/convert.hpp"
#include "kernels/convert_impl.hpp"
#include "kernels/cuda/device_loops.cuh"

namespace tessera::kernels::cuda {

void convert(const Device& dev, DType from, DType to, std::int64_t n, const void* x, void* y) {
  with_converter(from, to, x, y, [&](const auto& f) { cuda_for_each(dev, n, f, "convert"); });
}

}  // namespace tessera::kernels::cuda
