#include "runtime/comm/alltoallv.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "decomp/error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera {
namespace {

constexpr int kChunkTag = 7201;
// On the point-to-point path, messages past this many bytes are split (some transports
// mishandle single messages near 2 GiB); MPI's collective gets what fits its int counts.
constexpr Index kChunkBytes = Index{1} << 30;
constexpr Index kTestChunkBytes = 4096;

std::vector<int> as_int(const std::vector<Index>& v) {
  return std::vector<int>(v.begin(), v.end());
}

Index largest(std::initializer_list<const std::vector<Index>*> lists) {
  Index m = 0;
  for (const auto* l : lists)
    for (Index x : *l) m = std::max(m, x);
  return m;
}

// Each message as point-to-point pieces of at most `chunk` units: receives posted first,
// every piece with one tag (MPI keeps their order between two ranks).
void point_to_point(MPI_Comm comm, const void* send, const std::vector<Index>& sc,
                    const std::vector<Index>& sd, void* recv, const std::vector<Index>& rc,
                    const std::vector<Index>& rd, MPI_Datatype type) {
  MPI_Aint lb = 0, extent = 0;
  TESSERA_MPI(MPI_Type_get_extent(type, &lb, &extent));
  const Index unit = std::max<Index>(1, static_cast<Index>(extent));
  // A lowered limit (tests) splits messages too, in pieces of at least 4 KiB.
  const Index chunk = std::max<Index>(
      1, std::min(kChunkBytes / unit, std::max(mpi_count_limit(), kTestChunkBytes / unit)));
  const int P = static_cast<int>(sc.size());
  int me = 0;
  TESSERA_MPI(MPI_Comm_rank(comm, &me));
  std::vector<MPI_Request> req;
  auto post = [&](bool receive, int p) {
    const Index n = receive ? rc[static_cast<std::size_t>(p)] : sc[static_cast<std::size_t>(p)];
    const Index at = receive ? rd[static_cast<std::size_t>(p)] : sd[static_cast<std::size_t>(p)];
    for (Index off = 0; off < n; off += chunk) {
      const int k = static_cast<int>(std::min(chunk, n - off));
      req.emplace_back();
      if (receive)
        TESSERA_MPI(MPI_Irecv(static_cast<char*>(recv) + (at + off) * unit, k, type, p, kChunkTag,
                              comm, &req.back()));
      else
        TESSERA_MPI(MPI_Isend(static_cast<const char*>(send) + (at + off) * unit, k, type, p,
                              kChunkTag, comm, &req.back()));
    }
  };
  for (int i = 0; i < P; ++i) post(true, (me + P - i) % P);  // from the ranks before first
  for (int i = 0; i < P; ++i) post(false, (me + i) % P);     // to the ranks after first
  TESSERA_MPI(MPI_Waitall(static_cast<int>(req.size()), req.data(), MPI_STATUSES_IGNORE));
}

}  // namespace

Index mpi_count_limit() {
  static const Index limit = [] {
    const char* v = std::getenv("TESSERA_MPI_COUNT_LIMIT");
    if (!v || !*v) return Index{INT_MAX};
    char* end = nullptr;
    const long long n = std::strtoll(v, &end, 10);
    TESSERA_CHECK(*end == '\0' && n >= 1 && n <= INT_MAX,
                  "TESSERA_MPI_COUNT_LIMIT=" << v << ": give an integer from 1 to " << INT_MAX);
    return static_cast<Index>(n);
  }();
  return limit;
}

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
