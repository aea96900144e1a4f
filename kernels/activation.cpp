#include "kernels/activation.hpp"

namespace tessera::kernels {

const char* name_of(Activation a) {
  switch (a) {
    case Activation::ReLU:
      return "relu";
    case Activation::GELU:
      return "gelu";
    case Activation::SiLU:
      return "silu";
    case Activation::Tanh:
      return "tanh";
  }
  return "?";
}

}  // namespace tessera::kernels
