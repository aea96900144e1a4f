#pragma once
// NumPy .npy headers (format versions 1-3): magic, version, header length, then a Python
// dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }. Parsed here
// rather than with a library: it is a dozen lines and the only part of NumPy needed.
#include <cstdint>
#include <string>
#include <vector>

#include "decomp/box.hpp"

namespace tessera::prep {

struct NpyHeader {
  std::string descr;  // '<f4', '<f8', '<i8', ...
  bool fortran_order = false;
  std::vector<Index> shape;
  std::size_t data_offset = 0;  // bytes from the file start
  std::size_t elem_size = 0;
  bool little_endian = true;
  char kind = 'f';  // 'f' float, 'i' signed, 'u' unsigned
};

// Reads and parses the header of `path`; throws naming the file and what is wrong.
NpyHeader read_npy_header(const std::string& path);
// Serializes a header for a little-endian C-order array (for tests and tools).
std::string npy_header_bytes(const std::string& descr, const std::vector<Index>& shape);

}  // namespace tessera::prep
