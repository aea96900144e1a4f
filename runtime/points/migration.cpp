#include "runtime/points/migration.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <string>

#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/alltoallv.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera {

void check_rows_collectively(MPI_Comm comm, bool ok, const std::string& why,
                             const std::string& call, const Tensor& rows) {
  std::vector<Index> row_shape = rows.shape();
  if (!row_shape.empty()) row_shape.erase(row_shape.begin());
  collective_check(comm, ok, why, call, "the rows' element type and shape past the first dim",
                   std::string(name_of(rows.dtype())) + " " + shape_str(row_shape));
}

Migration::Migration(MPI_Comm comm, const std::vector<int>& dest) : comm_(comm), dest_(dest) {
  int P = 1;
  TESSERA_MPI(MPI_Comm_size(comm, &P));
  send_count_.assign(static_cast<std::size_t>(P), 0);
  // Checked on every rank at once: one rank's bad destination failed it alone, and the others
  // waited for it in the exchange below for ever.
  std::string why;
  for (int d : dest)
    if (why.empty() && !(d >= 0 && d < P))
      why = "migration: destination rank " + std::to_string(d) + " of " + std::to_string(P);
  collective_check(comm, why.empty(), why);
  for (int d : dest) ++send_count_[static_cast<std::size_t>(d)];
  order_.resize(dest.size());
  std::iota(order_.begin(), order_.end(), Index{0});
  std::stable_sort(order_.begin(), order_.end(), [&](Index a, Index b) {
    return dest[static_cast<std::size_t>(a)] < dest[static_cast<std::size_t>(b)];
  });
  recv_count_ = exchange_counts(comm, send_count_);
  recv_total_ = std::accumulate(recv_count_.begin(), recv_count_.end(), Index{0});
}

Tensor Migration::forward(const Tensor& rows) const {
  return move(rows, false);
}

Tensor Migration::reverse(const Tensor& rows) const {
  return move(rows, true);
}

Tensor Migration::move(const Tensor& rows, bool back) const {
  const Index have = back ? recv_total_ : sent();
  std::ostringstream why;
  if (rows.space() != MemSpace::Host)
    why << "migration: host tensors only";
  else if (!(rows.ndim() >= 1 && rows.shape(0) == have))
    why << "migration: " << (back ? "reverse" : "forward") << " takes " << have << " rows, got "
        << shape_str(rows.shape());
  check_rows_collectively(comm_, why.str().empty(), why.str(),
                          back ? "migration reverse" : "migration forward", rows);
  const Tensor src = rows.contiguous();
  const Index row_elems = have > 0 ? src.numel() / have : [&] {
    Index e = 1;
    for (int d = 1; d < rows.ndim(); ++d) e *= rows.shape(d);
    return e;
  }();
  const std::size_t row_bytes = static_cast<std::size_t>(row_elems) * src.elem_size();
  const auto& sc = back ? recv_count_ : send_count_;
  const auto& rc = back ? send_count_ : recv_count_;
  const auto rb = static_cast<Index>(row_bytes);
  std::vector<Index> out_shape = rows.shape();
  out_shape[0] = back ? sent() : recv_total_;
  Tensor out = Tensor::empty(out_shape, rows.dtype());
  const auto* s = static_cast<const unsigned char*>(src.raw());
  auto* o = static_cast<unsigned char*>(out.raw());
  if (!back) {  // pack by destination, exchange into place
    std::vector<unsigned char> buf(order_.size() * row_bytes);
    for (std::size_t k = 0; k < order_.size(); ++k)
      std::copy_n(s + static_cast<std::size_t>(order_[k]) * row_bytes, row_bytes,
                  buf.data() + k * row_bytes);
    alltoallv_rows(comm_, buf.data(), sc, o, rc, rb);
    return out;
  }
  std::vector<unsigned char> buf(order_.size() * row_bytes);  // back in destination order
  alltoallv_rows(comm_, s, sc, buf.data(), rc, rb);
  for (std::size_t k = 0; k < order_.size(); ++k)
    std::copy_n(buf.data() + k * row_bytes, row_bytes,
                o + static_cast<std::size_t>(order_[k]) * row_bytes);
  return out;
}

}  // namespace tessera
