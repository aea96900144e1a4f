#pragma once
// Element types between Tessera and HDF5: the native memory type of a DType, and what
// a dataset's file type is (a DType where Tessera has one, and a readable name always).
#include "io/floor.hpp"
#include <hdf5.h>

#include <optional>
#include <string>

#include "decomp/dtype.hpp"

namespace tessera::h5 {

// The native HDF5 type of t (not to be closed): complex types are h5py's compound {r, i}.
// bf16 has none and throws.
hid_t native_type(DType t);
// The DType a file type holds without conversion-changing values (float32/float64/
// int64 of any byte order, h5py's complex compounds); nullopt for anything else.
std::optional<DType> dtype_of_file_type(hid_t file_type);
// "float32", "float64 (big-endian)", "int32", "uint8", "string", "compound", ...
std::string file_type_name(hid_t file_type);

}  // namespace tessera::h5
