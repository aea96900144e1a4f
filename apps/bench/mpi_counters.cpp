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
