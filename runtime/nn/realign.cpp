#include "runtime/nn/realign.hpp"

#include <sstream>

namespace tessera {

ShardTensor Resplit::forward(const ShardTensor& x) {
  in_spec_ = x.spec();
  out_spec_ = output_spec(x.spec());
  return in_spec_ == out_spec_ ? x : x.redistribute(out_spec_);
}

ShardTensor Resplit::backward(const ShardTensor& dy) {
  return in_spec_ == out_spec_ ? dy : dy.redistribute(in_spec_);
}

// The busiest rank's elements sent, forward and back.
OpCost Resplit::cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const {
  if (in == out) return {};
  const double es = static_cast<double>(size_of(dtype));
  return busiest(in, [&](const std::vector<int>& coords) {
    OpCost r;
    const auto sent = elements_sent(in, out, coords) + elements_sent(out, in, coords);
    r.alltoalls = 2;
    r.alltoall_bytes = static_cast<std::int64_t>(static_cast<double>(sent) * es);
    r.bytes = 2 * local_elems(in, coords) * es + 2 * local_elems(out, coords) * es;
    return r;
  });
}

AlignToGranule::AlignToGranule(Index granule)
    : granule_(granule), met_(std::make_shared<ShardSpec>()) {
  TESSERA_CHECK(granule >= 1, "AlignToGranule: granule " << granule << " (>= 1)");
}

std::string AlignToGranule::name() const {
  std::ostringstream o;
  o << "AlignToGranule(" << granule_ << ")";
  return o.str();
}

ShardSpec AlignToGranule::output_spec(const ShardSpec& in) const {
  *met_ = in;
  ShardSpec out = in;
  for (int d = 2; d < in.ndim(); ++d) {
    const Placement& p = in.placement(d);
    if (!p.sharded()) continue;
    const Index extent = in.global_shape()[static_cast<std::size_t>(d)];
    const Index n = in.mesh_dims()[static_cast<std::size_t>(p.axis)];
    TESSERA_CHECK(extent % granule_ == 0, name() << ": spatial extent " << extent << " (dim " << d
                                                 << ") is not a multiple of " << granule_);
    const Index units = extent / granule_;  // fewer than n: the last ranks hold none
    // As the default split of cells, the first ranks take one unit more.
    std::vector<Index> sizes(static_cast<std::size_t>(n));
    for (Index r = 0; r < n; ++r)
      sizes[static_cast<std::size_t>(r)] = (units / n + (r < units % n ? 1 : 0)) * granule_;
    out = out.with_placement(d, p, sizes);
  }
  return out;
}

RestoreSplit::RestoreSplit(std::shared_ptr<const AlignToGranule> partner)
    : partner_(std::move(partner)) {
  TESSERA_CHECK(partner_, "RestoreSplit: no partner");
}

ShardSpec RestoreSplit::output_spec(const ShardSpec& in) const {
  const ShardSpec& met = *partner_->met();
  TESSERA_CHECK(met.ndim() == in.ndim(), "RestoreSplit: its partner met a tensor of rank "
                                             << met.ndim() << ", this one has " << in.ndim());
  ShardSpec out = in;
  for (int d = 2; d < in.ndim(); ++d) {
    const Placement& p = in.placement(d);
    TESSERA_CHECK(p.sharded() == met.placement(d).sharded() &&
                      in.global_shape()[static_cast<std::size_t>(d)] ==
                          met.global_shape()[static_cast<std::size_t>(d)],
                  "RestoreSplit: dim " << d << " differs from what its partner met (" << in.str()
                                       << " against " << met.str() << ")");
    if (p.sharded()) out = out.with_placement(d, p, met.sizes(d));
  }
  return out;
}

}  // namespace tessera
