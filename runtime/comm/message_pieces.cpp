#include "runtime/comm/message_pieces.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <exception>
#include <string>

#include "decomp/error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera {
namespace {

Index unit_bytes(MPI_Datatype type) {
  MPI_Aint lb = 0, extent = 0;
  TESSERA_MPI(MPI_Type_get_extent(type, &lb, &extent));
  return std::max<Index>(1, static_cast<Index>(extent));
}

template <class Post>
void post_pieces(Index count, MPI_Datatype type, std::vector<MPI_Request>& reqs,
                 Index min_piece_bytes, Post post) {
  const Index unit = unit_bytes(type), piece = piece_units(type, min_piece_bytes);
  Index off = 0;
  do {
    const auto k = static_cast<int>(std::min(piece, count - off));
    reqs.emplace_back(MPI_REQUEST_NULL);
    post(off * unit, k, &reqs.back());
    off += k;
  } while (off < count);
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

std::string count_limit_problem(MPI_Comm comm) {
  long long mine = -1;
  std::string why;
  try {
    mine = mpi_count_limit();
  } catch (const std::exception& e) {
    why = e.what();
  }
  long long lo_hi[2] = {mine, -mine}, all[2] = {0, 0};
  TESSERA_MPI(MPI_Allreduce(lo_hi, all, 2, MPI_LONG_LONG, MPI_MIN, comm));
  if (!why.empty()) return why;
  if (all[0] < 0)
    return "TESSERA_MPI_COUNT_LIMIT is not an integer from 1 to 2^31 - 1 on some rank";
  if (all[0] != -all[1])
    return "TESSERA_MPI_COUNT_LIMIT differs between the ranks (" + std::to_string(all[0]) + " to " +
           std::to_string(-all[1]) + "): both ends of a message cut it alike only " +
           "under one limit; give every rank the same";
  return "";
}

Index piece_units_of(Index unit, Index min_piece_bytes) {
  unit = std::max<Index>(1, unit);
  return std::max<Index>(
      1, std::min(kMessagePieceBytes / unit, std::max(mpi_count_limit(), min_piece_bytes / unit)));
}

Index piece_units(MPI_Datatype type, Index min_piece_bytes) {
  return piece_units_of(unit_bytes(type), min_piece_bytes);
}

void isend_pieces(const void* buf, Index count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                  std::vector<MPI_Request>& reqs, Index min_piece_bytes) {
  post_pieces(count, type, reqs, min_piece_bytes, [&](Index at, int k, MPI_Request* r) {
    TESSERA_MPI(MPI_Isend(static_cast<const char*>(buf) + at, k, type, peer, tag, comm, r));
  });
}

void irecv_pieces(void* buf, Index count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                  std::vector<MPI_Request>& reqs, Index min_piece_bytes) {
  post_pieces(count, type, reqs, min_piece_bytes, [&](Index at, int k, MPI_Request* r) {
    TESSERA_MPI(MPI_Irecv(static_cast<char*>(buf) + at, k, type, peer, tag, comm, r));
  });
}

}  // namespace tessera
