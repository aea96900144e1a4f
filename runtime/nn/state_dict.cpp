#include "runtime/nn/state_dict.hpp"

#include <map>
#include <set>

#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/graph.hpp"
#include "runtime/nn/parameter_shard.hpp"

namespace tessera {

Tensor host_converted(const Tensor& src, DType dt) {
  const Tensor h = src.to(MemSpace::Host).contiguous();
  if (h.dtype() == dt) return h;
  const bool floats = (h.dtype() == DType::f32 || h.dtype() == DType::f64) &&
                      (dt == DType::f32 || dt == DType::f64);
  TESSERA_CHECK(floats, "cannot convert " << name_of(h.dtype()) << " to " << name_of(dt));
  Tensor out = Tensor::empty(h.shape(), dt);
  for (Index i = 0; i < h.numel(); ++i) {
    const double v = h.dtype() == DType::f64 ? h.data<double>()[i] : h.data<float>()[i];
    if (dt == DType::f64)
      out.data<double>()[i] = v;
    else
      out.data<float>()[i] = static_cast<float>(v);
  }
  return out;
}

std::vector<NamedTensor> parameter_entries(const Graph& g) {
  std::vector<NamedTensor> out;
  for (const NamedParameter& np : g.parameters()) {
    const Parameter* p = np.param;
    out.push_back({np.name, Tensor(), [p] { return gather_global(*p, p->value); }, global_shape(*p),
                   parameter_dtype(*p)});
  }
  return out;
}

std::vector<NamedTensor> made(const std::vector<NamedTensor>& entries) {
  std::vector<NamedTensor> out;
  for (const NamedTensor& e : entries) out.push_back({e.name, e.value()});
  return out;
}

std::vector<NamedTensor> parameter_state(const Graph& g) {
  return made(parameter_entries(g));
}

void load_parameter_state(const Graph& g, const std::vector<NamedTensor>& state, bool strict) {
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : state) {
    TESSERA_CHECK(by_name.emplace(t.name, &t).second,
                  "parameter state: entry '" << t.name << "' appears twice");
  }
  const auto params = g.parameters();
  std::set<std::string> known;
  std::vector<const NamedTensor*> entry;
  // Check everything before changing anything, so a bad state leaves the graph as it was
  // (names, shapes and types from the entries' metadata: those made when used are made
  // below, one at a time, each converted to this rank's block before the next).
  for (const NamedParameter& np : params) {
    known.insert(np.name);
    const auto it = by_name.find(np.name);
    TESSERA_CHECK(it != by_name.end(),
                  "parameter state: no entry for parameter '" << np.name << "'");
    const std::vector<Index> shape = global_shape(*np.param);
    TESSERA_CHECK(it->second->shape() == shape, "parameter state: '"
                                                    << np.name << "' has shape "
                                                    << shape_str(it->second->shape())
                                                    << ", the parameter " << shape_str(shape));
    const DType from = it->second->dtype(), to = parameter_dtype(*np.param);
    TESSERA_CHECK(from == to || ((from == DType::f32 || from == DType::f64) &&
                                 (to == DType::f32 || to == DType::f64)),
                  "parameter state: '" << np.name << "': cannot convert " << name_of(from) << " to "
                                       << name_of(to));
    entry.push_back(it->second);
  }
  if (strict)
    for (const NamedTensor& t : state)
      TESSERA_CHECK(known.count(t.name),
                    "parameter state: entry '" << t.name << "' is not a parameter of this model");
  std::vector<Tensor> converted;
  for (std::size_t k = 0; k < params.size(); ++k)
    converted.push_back(host_converted(local_block(*params[k].param, entry[k]->value()),
                                       parameter_dtype(*params[k].param)));
  for (std::size_t k = 0; k < params.size(); ++k) {
    // Values loaded before any layout: held whole until bind, the initial values never made.
    materialize(*params[k].param, false);
    const Tensor& v = params[k].param->value;
    v.copy_from(converted[k].to(v.space()));
  }
}

}  // namespace tessera
