#pragma once
// An array on disk that tessera-prep convert reads: a .npy file (its header gives the shape,
// type, byte order and element order) or raw binary (--shape, --dtype, --byte-order,
// --order). Values are read in runs that are contiguous in the file, byte-swapped where
// stored big-endian, and rounded to float32; a value that is no finite float32 is an error
// naming the value, its place in the file and its sample.
#include <cstddef>
#include <string>
#include <vector>

#include "decomp/box.hpp"

namespace tessera::prep {

struct ArraySource {
  std::string path;
  std::vector<Index> shape;  // (N, ...) as indexed, whatever the order in the file
  std::size_t offset = 0;    // bytes before the first value
  std::size_t elem = 4;      // bytes a value: 4 (float32) or 8 (float64)
  bool big_endian = false;
  bool fortran = false;  // column-major: the first index varies fastest in the file
};

// Reads `count` values from the `first` value on, in the file's own order, into dst as
// float32 (scratch holds the bytes). Returns "" or the error: a short read, or the first
// value that is no finite float32 (NaN, Inf, float64 past 3.4e38).
std::string read_run(int fd, const ArraySource& src, Index first, Index count, float* dst,
                     std::vector<char>& scratch);

// dst in row-major (C) order = src in column-major (Fortran) order, both of extents `ext`.
void fortran_to_c(const float* src, float* dst, const std::vector<Index>& ext);

}  // namespace tessera::prep
