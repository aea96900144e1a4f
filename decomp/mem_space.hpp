#pragma once
// Where a buffer lives: host memory or CUDA device memory. Tensors carry it, the tracked
// allocator accounts per space, and kernels dispatch on it once.
namespace tessera {

enum class MemSpace { Host, Cuda };

inline const char* name_of(MemSpace s) {
  return s == MemSpace::Host ? "host" : "cuda";
}

}  // namespace tessera
