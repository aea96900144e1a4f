#include "runtime/points/ghost_exchange.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/comm/alltoallv.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera {

GhostExchange::GhostExchange(MPI_Comm comm, const SpatialLayout& layout, const Tensor& owned,
                             double r)
    : comm_(comm), radius_(r), owned_(owned.ndim() == 2 ? owned.shape(0) : -1) {
  TESSERA_CHECK(owned.space() == MemSpace::Host && owned.dtype() == DType::f64 &&
                    owned.ndim() == 2 && owned.shape(1) == 3 && owned.is_contiguous(),
                "ghost exchange: owned coordinates are a contiguous host (n, 3) float64 tensor");
  TESSERA_CHECK(r >= 0 && std::isfinite(r), "ghost exchange: radius " << r);
  int P = 1, me = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &P));
  TESSERA_MPI(MPI_Comm_rank(comm, &me));
  rank_ = me;
  TESSERA_CHECK(layout.parts() == P,
                "ghost exchange: a layout of " << layout.parts() << " parts on " << P << " ranks");
  send_count_.assign(static_cast<std::size_t>(P), 0);
  for (int q = 0; q < P; ++q) {
    if (q == me) continue;
    for (Index i = 0; i < owned_; ++i) {
      const double* x = owned.data<double>() + 3 * i;
      if (layout.region(q).distance2_to({x[0], x[1], x[2]}) <= r * r) {
        send_rows_.push_back(i);
        ++send_count_[static_cast<std::size_t>(q)];
      }
    }
  }
  recv_count_ = exchange_counts(comm, send_count_);
  recv_total_ = std::accumulate(recv_count_.begin(), recv_count_.end(), Index{0});
}

Tensor GhostExchange::exchange(const Tensor& src, bool back) const {
  const Index rows = back ? recv_total_ : owned_;
  TESSERA_CHECK(src.space() == MemSpace::Host && src.ndim() >= 1 && src.shape(0) == rows,
                "ghost exchange: " << (back ? "adjoint" : "forward") << " takes " << rows
                                   << " host rows, got " << shape_str(src.shape()));
  const Tensor s = src.contiguous();
  Index row_elems = 1;
  for (int d = 1; d < s.ndim(); ++d) row_elems *= s.shape(d);
  const Index rb = row_elems * static_cast<Index>(s.elem_size());
  // Ghost rows travel straight from the source (adjoint) and into the result: they are
  // packed in peer order there already; only the forward gathers its rows first.
  const auto* in = static_cast<const unsigned char*>(s.raw());
  std::vector<unsigned char> gathered;
  if (!back) {
    gathered.resize(send_rows_.size() * static_cast<std::size_t>(rb));
    for (std::size_t k = 0; k < send_rows_.size(); ++k)
      std::copy_n(in + send_rows_[k] * rb, rb, gathered.data() + static_cast<Index>(k) * rb);
    in = gathered.data();
  }
  std::vector<Index> shape = s.shape();
  shape[0] = back ? static_cast<Index>(send_rows_.size()) : recv_total_;
  Tensor out = Tensor::empty(shape, s.dtype());
  alltoallv_rows(comm_, in, back ? recv_count_ : send_count_, out.raw(),
                 back ? send_count_ : recv_count_, rb);
  return out;
}

Tensor GhostExchange::forward(const Tensor& rows) const {
  return exchange(rows, false);
}

Tensor GhostExchange::adjoint(const Tensor& ghost_rows) const {
  TESSERA_CHECK(ghost_rows.dtype() == DType::f32 || ghost_rows.dtype() == DType::f64,
                "ghost exchange: the adjoint adds float32 or float64 rows, not "
                    << name_of(ghost_rows.dtype()));
  const Tensor back = exchange(ghost_rows, true);  // one row per (owned row, destination)
  std::vector<Index> shape = back.shape();
  shape[0] = owned_;
  Tensor out = Tensor::zeros(shape, back.dtype());
  const Index w = owned_ > 0 ? out.numel() / owned_ : 0;
  for (std::size_t k = 0; k < send_rows_.size(); ++k) {  // in a fixed order: repeatable sums
    const Index dst = send_rows_[k] * w, src = static_cast<Index>(k) * w;
    for (Index e = 0; e < w; ++e) {
      if (out.dtype() == DType::f64)
        out.data<double>()[dst + e] += back.data<double>()[src + e];
      else
        out.data<float>()[dst + e] += back.data<float>()[src + e];
    }
  }
  return out;
}

}  // namespace tessera
