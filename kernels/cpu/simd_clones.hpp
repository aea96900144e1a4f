#pragma once
// TESSERA_SIMD_CLONES: a hot host loop built also for AVX-512 and AVX2. The library targets
// generic x86-64, where a vectorized loop runs 4 float lanes wide; the loader picks the
// widest clone the CPU has. Empty where the compiler has no target_clones (GCC on x86-64).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TESSERA_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TESSERA_SIMD_CLONES
#endif
