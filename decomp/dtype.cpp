#include "decomp/dtype.hpp"

#include "decomp/error.hpp"

namespace tessera {

std::size_t size_of(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::i64:
      return 8;
    case DType::bf16:
      return 2;
    case DType::c64:
      return 8;
    case DType::c128:
      return 16;
  }
  throw Error("size_of: unknown dtype");
}

std::string name_of(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::i64:
      return "int64";
    case DType::bf16:
      return "bfloat16";
    case DType::c64:
      return "complex64";
    case DType::c128:
      return "complex128";
  }
  throw Error("name_of: unknown dtype");
}

DType dtype_from_name(const std::string& n) {
  if (n == "float32" || n == "f32" || n == "float") return DType::f32;
  if (n == "float64" || n == "f64" || n == "double") return DType::f64;
  if (n == "int64" || n == "i64") return DType::i64;
  if (n == "bfloat16" || n == "bf16") return DType::bf16;
  if (n == "complex64" || n == "c64") return DType::c64;
  if (n == "complex128" || n == "c128") return DType::c128;
  throw Error("unknown dtype '" + n +
              "' (expected float32, float64, int64, bfloat16, complex64 or complex128)");
}

bool is_complex(DType t) {
  return t == DType::c64 || t == DType::c128;
}

DType real_part_of(DType t) {
  if (t == DType::c64) return DType::f32;
  if (t == DType::c128) return DType::f64;
  return t;
}

DType complex_of(DType t) {
  if (t == DType::f32 || t == DType::c64) return DType::c64;
  if (t == DType::f64 || t == DType::c128) return DType::c128;
  throw Error("complex_of: no complex type over " + name_of(t) + " (float32 or float64 only)");
}

}  // namespace tessera
