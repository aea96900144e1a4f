#pragma once
// Point-to-point messages of any length. MPI's counts are int, and some transports mishandle
// single messages near 2 GiB (libfabric's verbs provider stops at 2 GiB, PSM2 at 4 GiB), so
// a long message goes as consecutive pieces of at most piece_units() units on one tag: MPI
// matches two ranks' messages of one tag in the order they were posted, and both sides cut
// the same count the same way. Messages that fit one piece are one MPI call, as before.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <string>
#include <vector>

#include "decomp/index.hpp"

namespace tessera {

// The largest count or displacement handed to MPI's int calls: INT_MAX, or
// TESSERA_MPI_COUNT_LIMIT where set (tests lower it so the piecewise paths, otherwise only
// past 2^31 units, run on small data; the same on every rank).
Index mpi_count_limit();
// Collective: why the ranks' TESSERA_MPI_COUNT_LIMIT cannot be used (malformed on a rank,
// or not the same on every rank: both ends of a message must cut it alike), or "".
std::string count_limit_problem(MPI_Comm comm);

// The longest single message sent: 1 GiB.
inline constexpr Index kMessagePieceBytes = Index{1} << 30;

// Units of `type` per piece: at most 1 GiB and mpi_count_limit(), never fewer than
// `min_piece_bytes` worth (a floor for lowered test limits, where tiny pieces would only
// multiply messages).
Index piece_units(MPI_Datatype type, Index min_piece_bytes = 0);
// The same for units of `unit_bytes` bytes (no MPI type at hand).
Index piece_units_of(Index unit_bytes, Index min_piece_bytes = 0);

// Posts the pieces of one message of `count` units at `buf` (a count of 0 is one empty
// message, as MPI would send it), appending their requests to `reqs`.
void isend_pieces(const void* buf, Index count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                  std::vector<MPI_Request>& reqs, Index min_piece_bytes = 0);
void irecv_pieces(void* buf, Index count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,
                  std::vector<MPI_Request>& reqs, Index min_piece_bytes = 0);

}  // namespace tessera
