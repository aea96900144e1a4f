#pragma once
// Index: the signed 64-bit integer of every extent, offset and element count, and the
// largest tensor rank the geometry handles.
#include <cstdint>

namespace tessera {

inline constexpr int kMaxDims = 8;
using Index = std::int64_t;

}  // namespace tessera
