#pragma once
// FNV-1a over bytes: a cheap fingerprint for comparing what ranks hold (arguments of a
// collective call, a model's parameters) and for cache keys. Chain calls through `h`.
#include <cstddef>
#include <cstdint>

namespace tessera {

inline std::uint64_t fnv1a(const void* data, std::size_t n,
                           std::uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace tessera
