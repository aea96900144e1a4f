// Channel bias on the host: OpenMP loops over kernels/bias_impl.hpp.
#include "kernels/bias.hpp"
#include "kernels/bias_impl.hpp"
#include "kernels/cpu/host_loops.hpp"
#include "kernels/dispatch.hpp"

namespace tessera::kernels {

void cpu::bias_add(DType type, Index n, Index c, Index inner, void* y, const void* b) {
  const StatLayout l = StatLayout::per_channel(n, c, inner);
  check_stat_layout(l, "bias_add_cpu");
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    host_for_each_cell(l, BiasAdd<T>{c, inner, static_cast<T*>(y), static_cast<const T*>(b)});
  });
}

void cpu::bias_backward(DType type, Index n, Index c, Index inner, const void* dy, void* db) {
  const StatLayout l = StatLayout::per_channel(n, c, inner);
  check_stat_layout(l, "bias_backward_cpu");
  dispatch(type, [&](auto t) {
    using T = decltype(t);
    host_group_reduce(l.count(), l.size(),
                      BiasGrad<T>{l, static_cast<const T*>(dy), static_cast<T*>(db)});
  });
}

}  // namespace tessera::kernels
