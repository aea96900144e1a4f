#include "runtime/train/flat_runs.hpp"

#include <algorithm>
#include <numeric>

namespace tessera {
namespace {

// b starts where a ends, in a's storage.
bool follows(const Tensor& a, const Tensor& b) {
  return a.same_storage(b) && static_cast<const char*>(a.raw()) + a.nbytes() == b.raw();
}

}  // namespace

std::vector<FlatRun> flat_runs(const std::vector<NamedParameter>& params, bool values) {
  std::vector<std::size_t> order(params.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  auto grad = [&](std::size_t k) -> const Tensor& { return params[k].param->grad; };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const Tensor &ga = grad(a), &gb = grad(b);
    if (ga.space() != gb.space()) return ga.space() < gb.space();
    if (ga.dtype() != gb.dtype()) return ga.dtype() < gb.dtype();
    if (ga.raw() != gb.raw()) return std::less<const void*>()(ga.raw(), gb.raw());
    return ga.nbytes() != gb.nbytes() ? ga.nbytes() < gb.nbytes() : a < b;  // empty ones first
  });
  std::vector<FlatRun> runs;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t k = order[i];
    bool joins = i > 0 && !runs.empty();
    if (joins) {
      const std::size_t prev = order[i - 1];
      joins = grad(prev).dtype() == grad(k).dtype() && follows(grad(prev), grad(k)) &&
              (!values || follows(params[prev].param->value, params[k].param->value));
    }
    if (!joins) runs.push_back(FlatRun{{}, 0, grad(k).dtype(), grad(k).space()});
    runs.back().params.push_back(k);
    runs.back().numel += grad(k).numel();
  }
  // A deterministic order: by the first list position in each run.
  auto first = [](const FlatRun& r) { return *std::min_element(r.params.begin(), r.params.end()); };
  std::sort(runs.begin(), runs.end(),
            [&](const FlatRun& a, const FlatRun& b) { return first(a) < first(b); });
  return runs;
}

}  // namespace tessera
