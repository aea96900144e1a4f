#include "runtime/comm/grad_sync.hpp"

#include <algorithm>
#include <sstream>

#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/message_pieces.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/nn/parameter_shard.hpp"
#include "runtime/tensor/context.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera {
namespace {

MPI_Datatype mpi_type_of(DType dt) {
  return dt == DType::f64 ? MPI_DOUBLE : MPI_FLOAT;
}

Tensor flat_window(const Tensor& buffer, Index off, const std::vector<Index>& shape) {
  const Index n = numel_of(shape);
  return buffer.view(Box({off}, {off + n})).reshape(shape);
}

bool contains(const std::vector<int>& v, int a) {
  return std::find(v.begin(), v.end(), a) != v.end();
}

// A parameter's size in the bucket plan: the global one, the same on every rank (a sharded
// parameter's block differs per rank, and every rank must cut the same buckets).
Index planned_numel(const Parameter& p) {
  return numel_of(global_shape(p));
}

}  // namespace

GradSync::GradSync(const Mesh& mesh, std::vector<Parameter*> params, GradSyncOptions opts)
    : mesh_(mesh), opts_(std::move(opts)), params_(std::move(params)) {
  std::string why;
  std::vector<int> axes = opts_.sum_axes;
  for (int a : opts_.mean_axes) {
    if (contains(opts_.sum_axes, a))
      why = "GradSync: mesh axis " + std::to_string(a) + " is both summed and averaged";
    axes.push_back(a);
  }
  for (int a : axes)
    if (a < 0 || a >= mesh.ndim())
      why = "GradSync: mesh axis " + std::to_string(a) + " out of range for mesh " + mesh.str();
  for (std::size_t i = 0; why.empty() && i < params_.size(); ++i) {
    const Parameter* p = params_[i];
    std::ostringstream os;
    if (!p)
      os << "GradSync: parameter " << i << " is null";
    else if (!layout_problem(*p).empty())  // first: a deferred value has no tensors yet
      os << "GradSync: " << layout_problem(*p);
    else if (!p->grad.defined() || p->grad.shape() != p->value.shape() ||
             p->grad.dtype() != p->value.dtype() || p->grad.space() != p->value.space())
      os << "GradSync: parameter '" << p->name
         << "' has no gradient of its value's shape, dtype and memory space";
    else if (p->grad.dtype() != DType::f32 && p->grad.dtype() != DType::f64)
      os << "GradSync: parameter '" << p->name << "' is " << name_of(p->grad.dtype())
         << "; gradients must be float32 or float64";
    else if (!p->grad.is_contiguous() || !p->value.is_contiguous())
      os << "GradSync: parameter '" << p->name << "' is not contiguous";
    else if (!index_of_.emplace(p, i).second)
      os << "GradSync: parameter '" << p->name << "' is registered twice";
    for (int a : p ? p->grad_axes : std::vector<int>{})
      if (a < 0 || a >= mesh.ndim())
        os << "GradSync: parameter '" << p->name << "' declares mesh axis " << a
           << ", out of range for mesh " << mesh.str();
    // A block's gradient is summed only among ranks holding the same block.
    if (p && p->shard && os.str().empty())
      for (int a : axes_of(*p))
        if (contains(p->shard->axes, a))
          os << "GradSync: parameter '" << p->name << "' is sharded over mesh axis " << a
             << ", which its gradient would be summed over";
    why = os.str();
  }
  // Every rank must bucket the same parameters, or the all-reduces would not match.
  long long sig[2] = {static_cast<long long>(params_.size()), 0}, lo[2], hi[2];
  for (const Parameter* p : params_)
    if (p && p->grad.defined())
      sig[1] += planned_numel(*p) * 131 + static_cast<int>(p->grad.dtype());
  TESSERA_MPI(MPI_Allreduce(sig, lo, 2, MPI_LONG_LONG, MPI_MIN, mesh.comm()));
  TESSERA_MPI(MPI_Allreduce(sig, hi, 2, MPI_LONG_LONG, MPI_MAX, mesh.comm()));
  if (why.empty() && (lo[0] != hi[0] || lo[1] != hi[1]))
    why = "GradSync: ranks register different parameter lists (" + std::to_string(sig[0]) +
          " parameters here)";
  collective_check(mesh.comm(), why.empty(), why);

  for (int a : opts_.mean_axes) scale_ /= mesh.dim(a);

  // Reverse registration order: the order backward completes the gradients.
  bucket_of_.assign(params_.size(), -1);
  std::size_t bytes = 0;
  for (std::size_t k = params_.size(); k-- > 0;) {
    const Tensor& g = params_[k]->grad;
    const std::size_t nbytes = static_cast<std::size_t>(planned_numel(*params_[k])) * g.elem_size();
    bool fresh = buckets_.empty() || bytes + nbytes > opts_.bucket_bytes;
    if (!fresh) {
      const Tensor& first = params_[static_cast<std::size_t>(buckets_.back().params.front())]->grad;
      fresh = first.dtype() != g.dtype() || first.space() != g.space();
    }
    if (fresh) {
      buckets_.emplace_back();
      bytes = 0;
    }
    GradBucket& b = buckets_.back();
    b.offsets.push_back(b.params.empty()
                            ? 0
                            : b.offsets.back() +
                                  params_[static_cast<std::size_t>(b.params.back())]->grad.numel());
    b.params.push_back(static_cast<int>(k));
    bucket_of_[k] = static_cast<int>(buckets_.size()) - 1;
    bytes += nbytes;
  }
  // The parameters move into their buckets' flat buffers (values kept).
  for (GradBucket& b : buckets_) {
    const Tensor& g0 = params_[static_cast<std::size_t>(b.params.front())]->grad;
    const Index n =
        b.offsets.back() + params_[static_cast<std::size_t>(b.params.back())]->grad.numel();
    // (any length: start() cuts runs past 1 GiB into several all-reduces)
    b.grad = Tensor::empty({n}, g0.dtype(), g0.space());
    b.value = Tensor::empty({n}, g0.dtype(), g0.space());
    for (std::size_t i = 0; i < b.params.size(); ++i) {
      Parameter& p = *params_[static_cast<std::size_t>(b.params[i])];
      const Tensor g = flat_window(b.grad, b.offsets[i], p.grad.shape());
      const Tensor v = flat_window(b.value, b.offsets[i], p.value.shape());
      g.copy_from(p.grad);
      v.copy_from(p.value);
      p.grad = g;
      p.value = v;
    }
  }
  flights_.resize(buckets_.size());
  for (std::size_t i = 0; i < buckets_.size(); ++i)
    if (!mpi_accepts(buckets_[i].grad.space()))
      flights_[i].host =
          Tensor::empty({buckets_[i].grad.numel()}, buckets_[i].grad.dtype(), MemSpace::Host);
  reset_step();
}

GradSync::~GradSync() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (Flight& f : flights_)
    for (MPI_Request& r : f.reqs)
      if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
}

void GradSync::reset_step() {
  marked_.assign(params_.size(), false);
  pending_.clear();
  for (const GradBucket& b : buckets_) pending_.push_back(static_cast<int>(b.params.size()));
  next_to_start_ = 0;
}

std::vector<std::vector<int>> GradSync::bucket_layout() const {
  std::vector<std::vector<int>> out;
  for (const GradBucket& b : buckets_) out.push_back(b.params);
  return out;
}

std::vector<int> GradSync::axes_of(const Parameter& p) const {
  std::vector<int> axes;
  for (int a : opts_.sum_axes) axes.push_back(a);
  for (int a : p.grad_axes)
    if (!contains(opts_.mean_axes, a)) axes.push_back(a);
  for (int a : opts_.mean_axes) axes.push_back(a);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

// Collective over the mesh the first time a set of axes is seen: every rank starts the
// same buckets in the same order, and the axes come from global specs, so all agree.
const AxesComm& GradSync::comm_for(const std::vector<int>& axes) {
  auto it = comms_.find(axes);
  if (it == comms_.end()) it = comms_.emplace(axes, AxesComm(mesh_, axes)).first;
  return it->second;
}

void GradSync::start(std::size_t bi) {
  const double t0 = MPI_Wtime();
  const GradBucket& b = buckets_[bi];
  Flight& f = flights_[bi];
  f.reqs.clear();
  f.ranges.clear();
  // Runs of consecutive parameters reduced over the same axes: one all-reduce each.
  std::vector<std::pair<Index, const AxesComm*>> runs;  // (first element, group)
  std::vector<int> last;
  for (std::size_t i = 0; i < b.params.size(); ++i) {
    std::vector<int> axes = axes_of(*params_[static_cast<std::size_t>(b.params[i])]);
    if (i == 0 || axes != last) runs.emplace_back(b.offsets[i], &comm_for(axes));
    last = std::move(axes);
  }
  const Tensor& wire = f.host.defined() ? f.host : b.grad;
  // Only runs over groups of several ranks travel; staged through the host, only they are
  // copied there (one rank, or mode-sharded weights alone in their group: no copy at all).
  struct Moving {
    Index begin, end;
    const AxesComm* comm;
  };
  std::vector<Moving> moving;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const Index begin = runs[r].first;
    const Index end = r + 1 < runs.size() ? runs[r + 1].first : wire.numel();
    if (runs[r].second->size() > 1 && end > begin) moving.push_back({begin, end, runs[r].second});
  }
  if (f.host.defined())
    for (const Moving& m : moving)
      f.host.view(Box({m.begin}, {m.end})).copy_from(b.grad.view(Box({m.begin}, {m.end})));
  if (!moving.empty()) device::synchronize(wire.device());  // MPI reads what kernels wrote
  const std::size_t esize = wire.elem_size();
  // A run past 1 GiB (one huge parameter) goes as several all-reduces, each within MPI's int
  // count; every rank of the group cuts the same run the same way.
  const Index piece = piece_units(mpi_type_of(wire.dtype()));
  for (const Moving& m : moving)
    for (Index at = m.begin; at < m.end; at += piece) {
      const Index stop = std::min(m.end, at + piece);
      MPI_Request req;
      TESSERA_MPI(MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(wire.raw()) + at * esize,
                                 static_cast<int>(stop - at), mpi_type_of(wire.dtype()), MPI_SUM,
                                 m.comm->comm(), &req));
      f.reqs.push_back(req);
      f.ranges.emplace_back(at, stop);
      stats_.bytes += static_cast<std::int64_t>((stop - at) * static_cast<Index>(esize));
      ++stats_.allreduces;
    }
  stats_.seconds += MPI_Wtime() - t0;
}

void GradSync::start_ready_in_order() {
  while (next_to_start_ < num_buckets() && pending_[static_cast<std::size_t>(next_to_start_)] == 0)
    start(static_cast<std::size_t>(next_to_start_++));
  // Open MPI progresses non-blocking collectives inside MPI calls: poke the ones in flight.
  const double t0 = MPI_Wtime();
  for (int i = 0; i < next_to_start_; ++i)
    for (MPI_Request& r : flights_[static_cast<std::size_t>(i)].reqs) {
      if (r == MPI_REQUEST_NULL) continue;
      int done = 0;
      TESSERA_MPI(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
    }
  stats_.seconds += MPI_Wtime() - t0;
}

void GradSync::mark_ready(const Parameter* p) {
  const auto it = index_of_.find(p);
  TESSERA_CHECK(it != index_of_.end(), "GradSync::mark_ready: parameter '"
                                           << (p ? p->name : "(null)") << "' is not registered");
  const std::size_t k = it->second;
  TESSERA_CHECK(!marked_[k],
                "GradSync::mark_ready: parameter '" << p->name << "' marked twice in one step");
  marked_[k] = true;
  --pending_[static_cast<std::size_t>(bucket_of_[k])];
  start_ready_in_order();
}

void GradSync::mark_ready(const std::vector<Parameter*>& ps) {
  for (const Parameter* p : ps) mark_ready(p);
}

void GradSync::finish() {
  while (next_to_start_ < num_buckets())
    start(static_cast<std::size_t>(next_to_start_++));  // timed in start()
  const double t0 = MPI_Wtime();
  double waited = 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    const GradBucket& b = buckets_[i];
    Flight& f = flights_[i];
    if (!f.reqs.empty()) {
      const double w0 = MPI_Wtime();
      TESSERA_MPI(MPI_Waitall(static_cast<int>(f.reqs.size()), f.reqs.data(), MPI_STATUSES_IGNORE));
      waited += MPI_Wtime() - w0;
      if (f.host.defined())
        for (const auto& [begin, end] : f.ranges)
          b.grad.view(Box({begin}, {end})).copy_from(f.host.view(Box({begin}, {end})));
    }
    if (scale_ != 1.0) scale_inplace(b.grad, scale_);
  }
  reset_step();
  stats_.wait_seconds += waited;
  stats_.seconds += MPI_Wtime() - t0;
}

void GradSync::sync() {
  for (std::size_t k = 0; k < params_.size(); ++k)
    if (!marked_[k]) mark_ready(params_[k]);
  finish();
}

void sync_grads(const Mesh& mesh, const std::vector<Parameter*>& params,
                const GradSyncOptions& opts) {
  std::vector<Tensor> values, grads;
  for (const Parameter* p : params) {
    values.push_back(p ? p->value : Tensor());
    grads.push_back(p ? p->grad : Tensor());
  }
  {
    GradSync sync(mesh, params, opts);
    sync.sync();
    for (std::size_t k = 0; k < params.size(); ++k) grads[k].copy_from(params[k]->grad);
  }
  for (std::size_t k = 0; k < params.size(); ++k) {
    params[k]->value = values[k];
    params[k]->grad = grads[k];
  }
}

}  // namespace tessera
