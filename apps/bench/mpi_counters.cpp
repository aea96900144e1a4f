#include "apps/bench/mpi_counters.hpp"

#include <mpi.h>

namespace tessera::bench {

MpiCounters& mpi_counters() {
  static MpiCounters c;
  return c;
}

namespace {
std::int64_t bytes_of(int count, MPI_Datatype type) {
  int size = 0;
  PMPI_Type_size(type, &size);
  return static_cast<std::int64_t>(count) * size;
}
}  // namespace

}  // namespace tessera::bench

// The wrappers: defined in the executable, they take the place of the MPI library's entry
// points for every caller (the runtime's shared libraries included) and forward to PMPI.
extern "C" int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag,
                         MPI_Comm comm, MPI_Request* req) {
  const std::int64_t b = tessera::bench::bytes_of(count, type);
  if (b > 0) {
    auto& c = tessera::bench::mpi_counters();
    c.send_bytes += b;
    ++c.sends;
  }
  return PMPI_Isend(buf, count, type, dest, tag, comm, req);
}

extern "C" int MPI_Iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm, MPI_Request* req) {
  auto& c = tessera::bench::mpi_counters();
  c.iallreduce_bytes += tessera::bench::bytes_of(count, type);
  ++c.iallreduces;
  return PMPI_Iallreduce(send, recv, count, type, op, comm, req);
}

extern "C" int MPI_Alltoallv(const void* send, const int* scounts, const int* sdispls,
                             MPI_Datatype stype, void* recv, const int* rcounts, const int* rdispls,
                             MPI_Datatype rtype, MPI_Comm comm) {
  int me = 0, n = 0;
  PMPI_Comm_rank(comm, &me);
  PMPI_Comm_size(comm, &n);
  auto& c = tessera::bench::mpi_counters();
  for (int q = 0; q < n; ++q)
    if (q != me) c.alltoall_bytes += tessera::bench::bytes_of(scounts[q], stype);
  ++c.alltoalls;
  return PMPI_Alltoallv(send, scounts, sdispls, stype, recv, rcounts, rdispls, rtype, comm);
}

extern "C" int MPI_Alltoallw(const void* send, const int* scounts, const int* sdispls,
                             const MPI_Datatype* stypes, void* recv, const int* rcounts,
                             const int* rdispls, const MPI_Datatype* rtypes, MPI_Comm comm) {
  int me = 0, n = 0;
  PMPI_Comm_rank(comm, &me);
  PMPI_Comm_size(comm, &n);
  auto& c = tessera::bench::mpi_counters();
  for (int q = 0; q < n; ++q)
    if (q != me && scounts[q] > 0)
      c.alltoall_bytes += tessera::bench::bytes_of(scounts[q], stypes[q]);
  ++c.alltoalls;
  return PMPI_Alltoallw(send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes, comm);
}

extern "C" int MPI_Allgatherv(const void* send, int scount, MPI_Datatype stype, void* recv,
                              const int* rcounts, const int* displs, MPI_Datatype rtype,
                              MPI_Comm comm) {
  auto& c = tessera::bench::mpi_counters();
  c.allgather_bytes += tessera::bench::bytes_of(scount, stype);
  ++c.allgathers;
  return PMPI_Allgatherv(send, scount, stype, recv, rcounts, displs, rtype, comm);
}

extern "C" int MPI_Reduce_scatter(const void* send, void* recv, const int* counts,
                                  MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  int n = 0;
  PMPI_Comm_size(comm, &n);
  auto& c = tessera::bench::mpi_counters();
  for (int q = 0; q < n; ++q) c.reduce_scatter_bytes += tessera::bench::bytes_of(counts[q], type);
  ++c.reduce_scatters;
  return PMPI_Reduce_scatter(send, recv, counts, type, op, comm);
}

extern "C" int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm) {
  if (type == MPI_DOUBLE) {
    auto& c = tessera::bench::mpi_counters();
    c.allreduce_f64_bytes += tessera::bench::bytes_of(count, type);
    ++c.allreduces_f64;
  }
  return PMPI_Allreduce(send, recv, count, type, op, comm);
}
