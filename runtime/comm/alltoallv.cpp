#include "runtime/comm/alltoallv.hpp"

#include <algorithm>

#include "decomp/error.hpp"
#include "runtime/comm/message_pieces.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera {
namespace {

constexpr int kChunkTag = 7201;
// A lowered count limit (tests) splits the point-to-point path's messages in pieces of at
// least 4 KiB: their many small messages would only slow the tests.
constexpr Index kTestPieceBytes = 4096;

std::vector<int> as_int(const std::vector<Index>& v) {
  return std::vector<int>(v.begin(), v.end());
}

Index largest(std::initializer_list<const std::vector<Index>*> lists) {
  Index m = 0;
  for (const auto* l : lists)
    for (Index x : *l) m = std::max(m, x);
  return m;
}

// Each nonempty message as point-to-point pieces (runtime/comm/message_pieces): receives
// posted first, from the ranks before this one first, sends to the ranks after it first.
void point_to_point(MPI_Comm comm, const void* send, const std::vector<Index>& sc,
                    const std::vector<Index>& sd, void* recv, const std::vector<Index>& rc,
                    const std::vector<Index>& rd, MPI_Datatype type) {
  MPI_Aint lb = 0, extent = 0;
  TESSERA_MPI(MPI_Type_get_extent(type, &lb, &extent));
  const auto unit = static_cast<Index>(extent);
  const int P = static_cast<int>(sc.size());
  int me = 0;
  TESSERA_MPI(MPI_Comm_rank(comm, &me));
  std::vector<MPI_Request> req;
  for (int i = 0; i < P; ++i) {
    const auto p = static_cast<std::size_t>((me + P - i) % P);
    if (rc[p] > 0)
      irecv_pieces(static_cast<char*>(recv) + rd[p] * unit, rc[p], type, static_cast<int>(p),
                   kChunkTag, comm, req, kTestPieceBytes);
  }
  for (int i = 0; i < P; ++i) {
    const auto p = static_cast<std::size_t>((me + i) % P);
    if (sc[p] > 0)
      isend_pieces(static_cast<const char*>(send) + sd[p] * unit, sc[p], type, static_cast<int>(p),
                   kChunkTag, comm, req, kTestPieceBytes);
  }
  TESSERA_MPI(MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE));
}

}  // namespace

Packed packed(const std::vector<Index>& counts) {
  Packed out;
  out.displs.resize(counts.size());
  for (std::size_t p = 0; p < counts.size(); ++p) out.displs[p] = out.total, out.total += counts[p];
  return out;
}

std::vector<Index> exchange_counts(MPI_Comm comm, const std::vector<Index>& send_counts) {
  std::vector<Index> recv(send_counts.size());
  static_assert(sizeof(Index) == sizeof(std::int64_t));
  TESSERA_MPI(MPI_Alltoall(send_counts.data(), 1, MPI_INT64_T, recv.data(), 1, MPI_INT64_T, comm));
  return recv;
}

void alltoallv(MPI_Comm comm, const void* send, const std::vector<Index>& sc,
               const std::vector<Index>& sd, void* recv, const std::vector<Index>& rc,
               const std::vector<Index>& rd, MPI_Datatype type) {
  const Index mine = largest({&sc, &sd, &rc, &rd});
  Index most = 0;
  TESSERA_MPI(MPI_Allreduce(&mine, &most, 1, MPI_INT64_T, MPI_MAX, comm));
  if (most <= mpi_count_limit()) {
    const auto isc = as_int(sc), isd = as_int(sd), irc = as_int(rc), ird = as_int(rd);
    TESSERA_MPI(MPI_Alltoallv(send, isc.data(), isd.data(), type, recv, irc.data(), ird.data(),
                              type, comm));
    return;
  }
  point_to_point(comm, send, sc, sd, recv, rc, rd, type);
}

void alltoallv_rows(MPI_Comm comm, const void* send, const std::vector<Index>& send_rows,
                    void* recv, const std::vector<Index>& recv_rows, Index row_bytes) {
  std::vector<Index> sc(send_rows.size()), rc(recv_rows.size());
  for (std::size_t p = 0; p < sc.size(); ++p) sc[p] = send_rows[p] * row_bytes;
  for (std::size_t p = 0; p < rc.size(); ++p) rc[p] = recv_rows[p] * row_bytes;
  alltoallv(comm, send, sc, packed(sc).displs, recv, rc, packed(rc).displs, MPI_BYTE);
}

void allgatherv(MPI_Comm comm, const void* send, Index count, void* recv,
                const std::vector<Index>& counts, const std::vector<Index>& displs,
                MPI_Datatype type) {
  if (std::max(count, largest({&counts, &displs})) <= mpi_count_limit()) {
    const auto ic = as_int(counts), id = as_int(displs);
    TESSERA_MPI(MPI_Allgatherv(send, static_cast<int>(count), type, recv, ic.data(), id.data(),
                               type, comm));
    return;
  }
  const std::vector<Index> sc(counts.size(), count), sd(counts.size(), 0);
  point_to_point(comm, send, sc, sd, recv, counts, displs, type);
}

}  // namespace tessera
