#include "runtime/points/index_gather.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "runtime/comm/alltoallv.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/points/migration.hpp"

namespace tessera {
namespace {

Index row_elems(const Tensor& t) {
  Index e = 1;
  for (int d = 1; d < t.ndim(); ++d) e *= t.shape(d);
  return e;
}

// Rows exchanged between peers: send_counts[p] rows of `send` to p, recv_counts[p] from p.
std::vector<unsigned char> exchange(MPI_Comm comm, const unsigned char* send,
                                    const std::vector<Index>& send_counts,
                                    const std::vector<Index>& recv_counts, std::size_t row_bytes) {
  std::vector<unsigned char> recv(static_cast<std::size_t>(packed(recv_counts).total) * row_bytes);
  alltoallv_rows(comm, send, send_counts, recv.data(), recv_counts, static_cast<Index>(row_bytes));
  return recv;
}

}  // namespace

IndexGather::IndexGather(MPI_Comm comm, const std::vector<Index>& offsets,
                         const std::vector<std::int64_t>& wanted)
    : comm_(comm) {
  int P = 1, me = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &P));
  TESSERA_MPI(MPI_Comm_rank(comm, &me));
  // Checked on every rank at once: a bad index on one rank failed it alone, and the others
  // waited for it in the exchange below for ever.
  std::ostringstream why, agreed;
  if (static_cast<int>(offsets.size()) != P + 1) {
    why << "index gather: " << offsets.size() << " offsets for " << P << " ranks";
  } else {
    for (std::size_t r = 0; r < static_cast<std::size_t>(P) && why.str().empty(); ++r)
      if (offsets[r + 1] < offsets[r])
        why << "index gather: offsets descend (" << offsets[r] << ", then " << offsets[r + 1]
            << ")";
    for (std::int64_t w : wanted)
      if (why.str().empty() && !(w >= -1 && w < offsets.back()))
        why << "index gather: index " << w << " outside [0, " << offsets.back() << ") (or -1)";
  }
  for (Index o : offsets) agreed << o << " ";
  collective_check(comm, why.str().empty(), why.str(), "index gather", "the offsets", agreed.str());
  held_ = offsets[static_cast<std::size_t>(me) + 1] - offsets[static_cast<std::size_t>(me)];
  // Distinct indices, sorted: sorted by holder too, since ranges ascend with the rank.
  std::vector<std::int64_t> ids;
  for (std::int64_t w : wanted)
    if (w >= 0) ids.push_back(w);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  distinct_ = static_cast<Index>(ids.size());
  slot_.resize(wanted.size());
  for (std::size_t i = 0; i < wanted.size(); ++i)
    slot_[i] =
        wanted[i] < 0
            ? -1
            : static_cast<Index>(std::lower_bound(ids.begin(), ids.end(), wanted[i]) - ids.begin());
  ask_count_.assign(static_cast<std::size_t>(P), 0);
  for (std::int64_t id : ids) {
    const auto holder = std::upper_bound(offsets.begin(), offsets.end(), id) - offsets.begin() - 1;
    ++ask_count_[static_cast<std::size_t>(holder)];
  }
  serve_count_ = exchange_counts(comm, ask_count_);
  const std::vector<unsigned char> asked =
      exchange(comm, reinterpret_cast<const unsigned char*>(ids.data()), ask_count_, serve_count_,
               sizeof(std::int64_t));
  const Index n_serve = static_cast<Index>(asked.size() / sizeof(std::int64_t));
  serve_rows_.resize(static_cast<std::size_t>(n_serve));
  for (Index i = 0; i < n_serve; ++i) {
    std::int64_t id;
    std::memcpy(&id, asked.data() + static_cast<std::size_t>(i) * sizeof(id), sizeof(id));
    serve_rows_[static_cast<std::size_t>(i)] = id - offsets[static_cast<std::size_t>(me)];
  }
}

Tensor IndexGather::forward(const Tensor& rows) const {
  const bool ok = rows.space() == MemSpace::Host && rows.ndim() >= 1 && rows.shape(0) == held_;
  std::ostringstream why;
  if (!ok)
    why << "index gather: forward takes the " << held_ << " held rows on the host, got "
        << shape_str(rows.shape());
  check_rows_collectively(comm_, ok, why.str(), "index gather forward", rows);
  const Tensor src = rows.contiguous();
  const std::size_t rb = static_cast<std::size_t>(row_elems(src)) * src.elem_size();
  std::vector<unsigned char> send(serve_rows_.size() * rb);
  const auto* s = static_cast<const unsigned char*>(src.raw());
  for (std::size_t i = 0; i < serve_rows_.size(); ++i)
    std::memcpy(send.data() + i * rb, s + static_cast<std::size_t>(serve_rows_[i]) * rb, rb);
  const std::vector<unsigned char> got = exchange(comm_, send.data(), serve_count_, ask_count_, rb);
  std::vector<Index> shape = rows.shape();
  shape[0] = wanted();
  Tensor out = Tensor::empty(shape, rows.dtype());
  auto* o = static_cast<unsigned char*>(out.raw());
  for (std::size_t i = 0; i < slot_.size(); ++i) {
    if (slot_[i] < 0)
      std::memset(o + i * rb, 0, rb);
    else
      std::memcpy(o + i * rb, got.data() + static_cast<std::size_t>(slot_[i]) * rb, rb);
  }
  return out;
}

Tensor IndexGather::adjoint(const Tensor& grads) const {
  const bool ok = grads.space() == MemSpace::Host && grads.ndim() >= 1 &&
                  grads.shape(0) == wanted() &&
                  (grads.dtype() == DType::f32 || grads.dtype() == DType::f64);
  std::ostringstream why;
  if (!ok)
    why << "index gather: adjoint takes " << wanted() << " float32/float64 rows on the host, got "
        << shape_str(grads.shape());
  check_rows_collectively(comm_, ok, why.str(), "index gather adjoint", grads);
  const Tensor g = grads.contiguous();
  const Index e = row_elems(g);
  std::vector<Index> shape = grads.shape();
  shape[0] = held_;
  Tensor out = Tensor::zeros(shape, grads.dtype());
  auto run = [&](auto* gp, auto* op) {
    using T = std::remove_pointer_t<decltype(op)>;
    std::vector<T> sums(static_cast<std::size_t>(distinct_ * e), T(0));
    for (std::size_t i = 0; i < slot_.size(); ++i)
      if (slot_[i] >= 0)
        for (Index k = 0; k < e; ++k)
          sums[static_cast<std::size_t>(slot_[i] * e + k)] += gp[static_cast<Index>(i) * e + k];
    const std::size_t rb = static_cast<std::size_t>(e) * sizeof(T);
    const std::vector<unsigned char> back = exchange(
        comm_, reinterpret_cast<const unsigned char*>(sums.data()), ask_count_, serve_count_, rb);
    for (std::size_t i = 0; i < serve_rows_.size(); ++i) {
      const T* src = reinterpret_cast<const T*>(back.data() + i * rb);
      for (Index k = 0; k < e; ++k) op[serve_rows_[i] * e + k] += src[k];
    }
  };
  if (g.dtype() == DType::f64)
    run(g.data<double>(), out.data<double>());
  else
    run(g.data<float>(), out.data<float>());
  return out;
}

}  // namespace tessera
