#pragma once
// FNV-1a over bytes: a cheap fingerprint for comparing what ranks hold (arguments of a
// collective call, a model's parameters) and for cache keys. Chain calls through `h`.
// splitmix64: a well-mixed 64-bit function of a 64-bit counter (hash routing of ids,
// counter-based random numbers).
#include <cstddef>
#include <cstdint>

namespace tessera {

inline std::uint64_t fnv1a(const void* data, std::size_t n,
                           std::uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

inline std::uint64_t splitmix64(std::uint64_t x) {
  std::uint64_t z = x + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace tessera
