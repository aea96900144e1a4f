#pragma once
// One cuBLAS handle per device, made on first use and kept for the process, bound to the
// caller's stream on every request (so the GEMMs queue behind the kernels before them).
// Float32 GEMMs stay on plain FMA math (no TF32), as the rest of the float32 path does.
#include "kernels/floor.hpp"
#include <cublas_v2.h>

#include "kernels/device/device.hpp"

namespace tessera::kernels {

cublasHandle_t cublas_for(const Device& dev);

// Throws tessera::Error naming the call and cuBLAS's status.
void cublas_check(cublasStatus_t s, const char* what);

}  // namespace tessera::kernels
