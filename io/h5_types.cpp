#include "io/h5_types.hpp"

#include "decomp/error.hpp"

namespace tessera::h5 {

hid_t native_type(DType t) {
  switch (t) {
    case DType::f32:
      return H5T_NATIVE_FLOAT;
    case DType::f64:
      return H5T_NATIVE_DOUBLE;
    case DType::i64:
      return H5T_NATIVE_INT64;
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
