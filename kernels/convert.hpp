#pragma once
// Element type conversion of contiguous arrays, host and CUDA: float32 <-> bfloat16 (round
// to nearest even, as decomp/dtype.hpp's host helpers) and float32 <-> float64, so storage
// types (bf16) can travel and be kept while the arithmetic runs in float32.
#include "kernels/floor.hpp"
#include <cstdint>

#include "decomp/dtype.hpp"
#include "kernels/device/device.hpp"

namespace tessera::kernels {

// y (type `to`) = x (type `from`), n elements; the same type: a copy. Other pairs throw.
void convert(const Device& dev, DType from, DType to, std::int64_t n, const void* x, void* y);
bool convertible(DType from, DType to);

namespace cpu {
void convert(DType from, DType to, std::int64_t n, const void* x, void* y);
}  // namespace cpu
namespace cuda {
void convert(const Device& dev, DType from, DType to, std::int64_t n, const void* x, void* y);
}  // namespace cuda

}  // namespace tessera::kernels
