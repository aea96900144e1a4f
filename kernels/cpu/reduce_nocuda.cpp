// CUDA entry points of kernels/reduce.hpp for builds without CUDA.
#include <string>

#include "decomp/error.hpp"
#include "kernels/reduce.hpp"

namespace tessera::kernels {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw Error(std::string(what) + ": Tessera was built without CUDA (TESSERA_CUDA=OFF)");
}
}  // namespace

double reduce_sum_cuda(DType, Index, const void*) {
  no_cuda("reduce_sum_cuda");
}
double reduce_mean_cuda(DType, Index, const void*) {
  no_cuda("reduce_mean_cuda");
}
double reduce_sum_squares_cuda(DType, Index, const void*) {
  no_cuda("reduce_sum_squares_cuda");
}
void stat_sums_cuda(const StatLayout&, DType, const void*, double*, double*) {
  no_cuda("stat_sums_cuda");
}
void channel_sums_cuda(DType, Index, Index, Index, const void*, double*, double*) {
  no_cuda("channel_sums_cuda");
}
void group_sums_cuda(DType, Index, Index, Index, Index, const void*, double*, double*) {
  no_cuda("group_sums_cuda");
}

}  // namespace tessera::kernels
