#pragma once
// Marks functions that both host code and CUDA kernels call, so index arithmetic
// is written once and the CPU tests exercise exactly what the GPU runs.
#if defined(__CUDACC__)
#define TESSERA_HD __host__ __device__
#else
#define TESSERA_HD
#endif
