#pragma once
// CRC-32 (zlib's, the polynomial of gzip and PNG) of a tensor's bytes as they are stored:
// contiguous, in the host's (little-endian) order. Checkpoints keep one per dataset, so a
// flipped bit or a torn block in a parameter is found on load rather than trained on; any
// tool can recompute it (Python: zlib.crc32(h5py_dataset[()].tobytes())).
#include "io/floor.hpp"

#include <cstddef>
#include <cstdint>

#include "runtime/tensor/tensor.hpp"

namespace tessera::io {

std::uint32_t crc32_of(const Tensor& t);
std::uint32_t crc32_of(const void* bytes, std::size_t n);

}  // namespace tessera::io
