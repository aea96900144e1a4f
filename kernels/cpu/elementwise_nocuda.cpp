// CUDA entry points of kernels/elementwise.hpp and kernels/optim_update.hpp for builds
// without CUDA.
#include "decomp/error.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/optim_update.hpp"

namespace tessera::kernels {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw Error(std::string(what) + ": Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}
}  // namespace

void axpy_cuda(DType, Count, double, const void*, void*) {
  no_cuda("axpy_cuda");
}
void add_f64_cuda(DType, Count, const double*, void*) {
  no_cuda("add_f64_cuda");
}
void scale_cuda(DType, Count, double, void*) {
  no_cuda("scale_cuda");
}
void scaled_diff_cuda(DType, Count, double, const void*, const void*, void*) {
  no_cuda("scaled_diff_cuda");
}
double sum_squares_cuda(DType, Count, const void*) {
  no_cuda("sum_squares_cuda");
}
double sum_sq_diff_cuda(DType, Count, const void*, const void*) {
  no_cuda("sum_sq_diff_cuda");
}
void sgd_update_cuda(DType, Count, void*, const void*, void*, const SgdArgs&) {
  no_cuda("sgd_update_cuda");
}
void adam_update_cuda(DType, Count, void*, const void*, void*, void*, const AdamArgs&) {
  no_cuda("adam_update_cuda");
}

}  // namespace tessera::kernels
