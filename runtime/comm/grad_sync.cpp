#include "runtime/comm/grad_sync.hpp"

#include <algorithm>
#include <climits>
#include <sstream>

#include "runtime/comm/collective_error.hpp"
#include "runtime/tensor/context.hpp"
#include "runtime/comm/mpi_error.hpp"
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

}  // namespace

GradSync::GradSync(const Mesh& mesh, std::vector<Parameter*> params, GradSyncOptions opts)
    : params_(std::move(params)) {
  std::string why;
  std::vector<int> axes = opts.sum_axes;
  for (int a : opts.mean_axes) {
    if (std::find(opts.sum_axes.begin(), opts.sum_axes.end(), a) != opts.sum_axes.end())
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
    else if (!p->grad.defined() || p->grad.shape() != p->value.shape() ||
             p->grad.dtype() != p->value.dtype())
      os << "GradSync: parameter '" << p->name
         << "' has no gradient of its value's shape and dtype";
    else if (p->grad.dtype() != DType::f32 && p->grad.dtype() != DType::f64)
      os << "GradSync: parameter '" << p->name << "' is " << name_of(p->grad.dtype())
         << "; gradients must be float32 or float64";
    else if (!p->grad.is_contiguous())
      os << "GradSync: gradient of '" << p->name << "' is not contiguous";
    else if (!index_of_.emplace(p, i).second)
      os << "GradSync: parameter '" << p->name << "' is registered twice";
    why = os.str();
  }
  // Every rank must bucket the same parameters, or the all-reduces would not match.
  long long sig[2] = {static_cast<long long>(params_.size()), 0}, lo[2], hi[2];
  for (const Parameter* p : params_)
    if (p && p->grad.defined()) sig[1] += p->grad.numel() * 131 + static_cast<int>(p->grad.dtype());
  TESSERA_MPI(MPI_Allreduce(sig, lo, 2, MPI_LONG_LONG, MPI_MIN, mesh.comm()));
  TESSERA_MPI(MPI_Allreduce(sig, hi, 2, MPI_LONG_LONG, MPI_MAX, mesh.comm()));
  if (why.empty() && (lo[0] != hi[0] || lo[1] != hi[1]))
    why = "GradSync: ranks register different parameter lists (" + std::to_string(sig[0]) +
          " parameters here)";
  collective_check(mesh.comm(), why.empty(), why);

  comm_ = AxesComm(mesh, axes);
  for (int a : opts.mean_axes) scale_ /= mesh.dim(a);

  // Reverse registration order: the order backward completes the gradients.
  bucket_of_.assign(params_.size(), -1);
  std::size_t bytes = 0;
  for (std::size_t k = params_.size(); k-- > 0;) {
    const Tensor& g = params_[k]->grad;
    bool fresh = buckets_.empty() || bytes + g.nbytes() > opts.bucket_bytes;
    if (!fresh) {
      const Tensor& first = params_[static_cast<std::size_t>(buckets_.back().params.front())]->grad;
      fresh = first.dtype() != g.dtype() || first.space() != g.space();
    }
    if (fresh) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    b.offsets.push_back(b.params.empty()
                            ? 0
                            : b.offsets.back() +
                                  params_[static_cast<std::size_t>(b.params.back())]->grad.numel());
    b.params.push_back(static_cast<int>(k));
    bucket_of_[k] = static_cast<int>(buckets_.size()) - 1;
    bytes += g.nbytes();
  }
  for (Bucket& b : buckets_) {
    const Tensor& g0 = params_[static_cast<std::size_t>(b.params.front())]->grad;
    const Index n =
        b.offsets.back() + params_[static_cast<std::size_t>(b.params.back())]->grad.numel();
    TESSERA_CHECK(n <= INT_MAX,
                  "GradSync: a bucket of " << n << " elements exceeds MPI's int count");
    b.buffer = Tensor::empty({n}, g0.dtype(), g0.space());
    if (!mpi_accepts(g0.space())) b.host = Tensor::empty({n}, g0.dtype(), MemSpace::Host);
  }
  reset_step();
}

GradSync::~GradSync() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (Bucket& b : buckets_)
    if (b.req != MPI_REQUEST_NULL) MPI_Wait(&b.req, MPI_STATUS_IGNORE);
}

void GradSync::reset_step() {
  marked_.assign(params_.size(), false);
  for (Bucket& b : buckets_) b.pending = static_cast<int>(b.params.size());
  next_to_start_ = 0;
}

std::vector<std::vector<int>> GradSync::bucket_layout() const {
  std::vector<std::vector<int>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

void GradSync::start(Bucket& b) {
  if (comm_.size() == 1) return;  // nothing to reduce; finish() only scales
  const double t0 = MPI_Wtime();
  for (std::size_t i = 0; i < b.params.size(); ++i) {
    const Tensor& g = params_[static_cast<std::size_t>(b.params[i])]->grad;
    flat_window(b.buffer, b.offsets[i], g.shape()).copy_from(g);
  }
  const Tensor& wire = b.host.defined() ? b.host : b.buffer;
  if (b.host.defined()) b.host.copy_from(b.buffer);
  TESSERA_MPI(MPI_Iallreduce(MPI_IN_PLACE, wire.raw(), static_cast<int>(wire.numel()),
                             mpi_type_of(wire.dtype()), MPI_SUM, comm_.comm(), &b.req));
  stats_.bytes += static_cast<std::int64_t>(wire.nbytes());
  ++stats_.allreduces;
  stats_.seconds += MPI_Wtime() - t0;
}

void GradSync::start_ready_in_order() {
  while (next_to_start_ < num_buckets() &&
         buckets_[static_cast<std::size_t>(next_to_start_)].pending == 0)
    start(buckets_[static_cast<std::size_t>(next_to_start_++)]);
  // Open MPI progresses non-blocking collectives inside MPI calls: poke the ones in flight.
  const double t0 = MPI_Wtime();
  for (int i = 0; i < next_to_start_; ++i) {
    Bucket& b = buckets_[static_cast<std::size_t>(i)];
    if (b.req == MPI_REQUEST_NULL) continue;
    int done = 0;
    TESSERA_MPI(MPI_Test(&b.req, &done, MPI_STATUS_IGNORE));
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
  --buckets_[static_cast<std::size_t>(bucket_of_[k])].pending;
  start_ready_in_order();
}

void GradSync::mark_ready(const std::vector<Parameter*>& ps) {
  for (const Parameter* p : ps) mark_ready(p);
}

void GradSync::finish() {
  while (next_to_start_ < num_buckets())
    start(buckets_[static_cast<std::size_t>(next_to_start_++)]);  // timed in start()
  const double t0 = MPI_Wtime();
  double waited = 0;
  for (Bucket& b : buckets_) {
    if (comm_.size() == 1) {
      if (scale_ != 1.0)
        for (int k : b.params) scale_inplace(params_[static_cast<std::size_t>(k)]->grad, scale_);
      continue;
    }
    const double w0 = MPI_Wtime();
    TESSERA_MPI(MPI_Wait(&b.req, MPI_STATUS_IGNORE));
    waited += MPI_Wtime() - w0;
    if (b.host.defined()) b.buffer.copy_from(b.host);
    if (scale_ != 1.0) scale_inplace(b.buffer, scale_);
    for (std::size_t i = 0; i < b.params.size(); ++i) {
      const Tensor& g = params_[static_cast<std::size_t>(b.params[i])]->grad;
      g.copy_from(flat_window(b.buffer, b.offsets[i], g.shape()));
    }
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

}  // namespace tessera
