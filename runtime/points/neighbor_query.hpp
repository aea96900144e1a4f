#pragma once
// Exact distributed neighbour queries on a point cloud laid out by a SpatialLayout (each rank
// owns the points in its region): the k nearest points of any query points, and the points
// within a radius, with ties broken by global id - the same answer at every rank count and
// partition. kNN runs in two rounds (as ArborX does): the local k-th distance bounds which
// other regions can hold closer points, and only those ranks are asked; the ball query asks
// the ranks whose region lies within the radius.
#include "runtime/floor.hpp"
#include <mpi.h>

#include <vector>

#include "runtime/points/ghost_exchange.hpp"
#include "runtime/points/spatial_layout.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera {

struct NeighborLists {
  Tensor ids;  // (queries, k) int64, -1 where fewer than k points exist (or are in range)
  Tensor d2;   // (queries, k) float64 squared distances, +inf where ids is -1
};

// points: this rank's owned points (n, 3) float64 with their global ids (n) int64, inside
// this rank's region of the layout (refused on every rank, naming the point, otherwise);
// queries: any (m, 3) float64 points on this rank (host tensors); ids >= 0 (refused otherwise:
// -1 marks a missing neighbour) and unique across the ranks (refused on every rank, naming a
// repeated id, otherwise: ties are broken by id);
// k (and the ball query's max_points) equal on every rank (refused otherwise: a rank answers
// the others' requests with its own). Collective over comm.
// `search`: where each rank's local search of its own queries runs (the grid hash on the
// host, or on the CUDA device with the points and queries copied there); other ranks'
// requests, about the region's surface, are answered on the host.
NeighborLists knn_query(MPI_Comm comm, const SpatialLayout& layout, const Tensor& points,
                        const Tensor& ids, const Tensor& queries, Index k,
                        MemSpace search = MemSpace::Host);
// The points within radius r of each query (distance <= r), nearest first, at most
// max_points of them.
NeighborLists ball_query(MPI_Comm comm, const SpatialLayout& layout, const Tensor& points,
                         const Tensor& ids, const Tensor& queries, double r, Index max_points,
                         MemSpace search = MemSpace::Host);
// The ball query answered from this rank's owned and ghost points alone, with no
// communication (as molecular dynamics answers from its ghost atoms): `ghosts` was built on
// `layout` with a radius >= r, and ghost_points / ghost_ids are its forward() of points / ids.
// Every query must lie in this rank's region (its owned points do; others throw). The same
// answer as the ball query above, without its round of requests (and without its check that
// ids are unique, which would be one).
NeighborLists ball_query(const SpatialLayout& layout, const GhostExchange& ghosts,
                         const Tensor& points, const Tensor& ids, const Tensor& ghost_points,
                         const Tensor& ghost_ids, const Tensor& queries, double r, Index max_points,
                         MemSpace search = MemSpace::Host);
// The order the queries above are searched in: rows of (m, 3) coordinates along a Morton
// curve over their bounding box, so that consecutive searches walk the same tree nodes and
// points while they are in cache (in a random order nearly every search misses).
std::vector<Index> query_order(const Tensor& queries);

}  // namespace tessera
