#include "io/h5_types.hpp"

#include "decomp/error.hpp"

namespace tessera::h5 {
namespace {

// The compound {r, i} type h5py writes for numpy's complex64/complex128. Built once per
// process and kept open (like the predefined types, callers never close it).
hid_t complex_type(hid_t part) {
  const size_t ps = H5Tget_size(part);
  const hid_t t = H5Tcreate(H5T_COMPOUND, 2 * ps);
  TESSERA_CHECK(t >= 0, "HDF5 I/O: cannot create the complex compound type");
  H5Tinsert(t, "r", 0, part);
  H5Tinsert(t, "i", ps, part);
  return t;
}

// A compound of two equal float members named r and i (h5py's complex), or nullopt.
std::optional<DType> complex_of_compound(hid_t ft) {
  if (H5Tget_nmembers(ft) != 2) return std::nullopt;
  for (unsigned m = 0; m < 2; ++m) {
    char* name = H5Tget_member_name(ft, m);
    const std::string n = name ? name : "";
    H5free_memory(name);
    if (n != (m == 0 ? "r" : "i") || H5Tget_member_class(ft, m) != H5T_FLOAT) return std::nullopt;
  }
  const hid_t part = H5Tget_member_type(ft, 0);
  const size_t ps = H5Tget_size(part);
  H5Tclose(part);
  if (H5Tget_size(ft) != 2 * ps || H5Tget_member_offset(ft, 1) != ps) return std::nullopt;
  if (ps == 4) return DType::c64;
  if (ps == 8) return DType::c128;
  return std::nullopt;
}

}  // namespace

hid_t native_type(DType t) {
  switch (t) {
    case DType::f32:
      return H5T_NATIVE_FLOAT;
    case DType::f64:
      return H5T_NATIVE_DOUBLE;
    case DType::i64:
      return H5T_NATIVE_INT64;
    case DType::c64: {
      static const hid_t c64 = complex_type(H5T_NATIVE_FLOAT);
      return c64;
    }
    case DType::c128: {
      static const hid_t c128 = complex_type(H5T_NATIVE_DOUBLE);
      return c128;
    }
    case DType::bf16:
      break;
  }
  throw Error("HDF5 I/O: no HDF5 type for " + name_of(t) + " (store float32 instead)");
}

std::optional<DType> dtype_of_file_type(hid_t ft) {
  const size_t size = H5Tget_size(ft);
  switch (H5Tget_class(ft)) {
    case H5T_FLOAT:
      if (size == 4) return DType::f32;
      if (size == 8) return DType::f64;
      return std::nullopt;
    case H5T_INTEGER:
      if (size == 8 && H5Tget_sign(ft) == H5T_SGN_2) return DType::i64;
      return std::nullopt;
    case H5T_COMPOUND:
      return complex_of_compound(ft);
    default:
      return std::nullopt;
  }
}

std::string file_type_name(hid_t ft) {
  const size_t bits = 8 * H5Tget_size(ft);
  const std::string order = H5Tget_order(ft) == H5T_ORDER_BE ? " (big-endian)" : "";
  switch (H5Tget_class(ft)) {
    case H5T_FLOAT:
      return "float" + std::to_string(bits) + order;
    case H5T_INTEGER:
      return std::string(H5Tget_sign(ft) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(bits) +
             order;
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      if (const auto c = complex_of_compound(ft)) return name_of(*c);
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_ARRAY:
      return "array";
    default:
      return "unsupported HDF5 type class";
  }
}

}  // namespace tessera::h5
