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
  }
  throw Error("name_of: unknown dtype");
}

DType dtype_from_name(const std::string& n) {
  if (n == "float32" || n == "f32" || n == "float") return DType::f32;
  if (n == "float64" || n == "f64" || n == "double") return DType::f64;
  if (n == "int64" || n == "i64") return DType::i64;
  if (n == "bfloat16" || n == "bf16") return DType::bf16;
  throw Error("unknown dtype '" + n + "' (expected float32, float64, int64 or bfloat16)");
}

}  // namespace tessera
