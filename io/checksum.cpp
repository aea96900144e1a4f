#include "io/checksum.hpp"

#include <zlib.h>

namespace tessera::io {

std::uint32_t crc32_of(const void* bytes, std::size_t n) {
  return static_cast<std::uint32_t>(
      crc32_z(0L, static_cast<const Bytef*>(bytes), static_cast<z_size_t>(n)));
}

std::uint32_t crc32_of(const Tensor& t) {
  const Tensor h = t.to(MemSpace::Host).contiguous();
  return crc32_of(h.raw(), h.nbytes());
}

}  // namespace tessera::io
