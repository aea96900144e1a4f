#pragma once
// Reading one point cloud of a schema file into a spatial layout: each rank reads a
// contiguous range of the points (io::read_points: one collective hyperslab read per
// dataset), the ranks compute the RCB layout of the whole cloud together, and the points
// migrate to the ranks whose regions hold them, with their global indices - ready for ghost
// exchange and neighbour queries. Collective over comm.
#include "io/floor.hpp"
#include <mpi.h>

#include <string>

#include "io/file.hpp"
#include "runtime/points/migration.hpp"
#include "runtime/points/spatial_layout.hpp"

namespace tessera::io {

struct PointCloudShard {
  SpatialLayout layout;
  Migration migration;  // from the read ranges to the owners (reverse(): back)
  Tensor coords;        // (n, 3) float64, the points in this rank's region
  Tensor features;      // (n, C) float64 (C = 0 when the file has no features)
  Tensor ids;           // (n) int64 global point indices
};

PointCloudShard read_point_cloud(const File& f, Index sample, MPI_Comm comm);

}  // namespace tessera::io
