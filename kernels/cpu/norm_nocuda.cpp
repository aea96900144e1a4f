// CUDA entry points of kernels/norm.hpp for builds without CUDA.
#include <string>

#include "decomp/error.hpp"
#include "kernels/norm.hpp"

namespace tessera::kernels {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw Error(std::string(what) + ": Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}
}  // namespace

void norm_forward_cuda(const NormArgs&, const void*, void*) {
  no_cuda("norm_forward_cuda");
}
void norm_backward_sums_cuda(const NormArgs&, const void*, const void*, double*, double*) {
  no_cuda("norm_backward_sums_cuda");
}
void norm_backward_dx_cuda(const NormArgs&, const void*, const void*, const double*, const double*,
                           double, void*) {
  no_cuda("norm_backward_dx_cuda");
}
void norm_param_grads_cuda(const NormArgs&, const void*, const void*, double*, double*) {
  no_cuda("norm_param_grads_cuda");
}

}  // namespace tessera::kernels
