#include "io/point_cloud.hpp"

#include "io/schema.hpp"
#include "io/sharded.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera::io {

PointCloudShard read_point_cloud(const File& f, Index sample, MPI_Comm comm) {
  int P = 1, me = 0;
  TESSERA_MPI(MPI_Comm_size(comm, &P));
  TESSERA_MPI(MPI_Comm_rank(comm, &me));
  TESSERA_CHECK(f.exists(schema::kCoords),
                f.path() << ": no " << schema::kCoords << " (not a point-cloud file)");
  const std::vector<Index> shape = f.info(schema::kCoords).shape;
  TESSERA_CHECK(shape.size() == 3 && shape[2] == 3 && sample >= 0 && sample < shape[0],
                f.where(schema::kCoords)
                    << " of shape " << shape_str(shape) << ": no sample " << sample);
  const auto [b, e] = balanced_range(shape[1], P, me);
  // The schema stores float32; the layout and the queries work in float64.
  const auto read64 = [&](const char* dset) {
    const Tensor t = read_points(f, dset, sample, b, e, DType::f32);
    Tensor d = Tensor::empty(t.shape(), DType::f64);
    for (Index i = 0; i < t.numel(); ++i) d.data<double>()[i] = t.data<float>()[i];
    return d;
  };
  const Tensor xyz = read64(schema::kCoords);
  const Tensor feat = f.exists(schema::kFeatures) ? read64(schema::kFeatures)
                                                  : Tensor::empty({e - b, 0}, DType::f64);
  Tensor ids = Tensor::empty({e - b}, DType::i64);
  for (Index i = b; i < e; ++i) ids.data<std::int64_t>()[i - b] = i;
  PointCloudShard s{SpatialLayout::rcb(comm, xyz), Migration(), {}, {}, {}};
  s.migration = Migration(comm, s.layout.owners(xyz));
  s.coords = s.migration.forward(xyz);
  s.features = s.migration.forward(feat);
  s.ids = s.migration.forward(ids);
  return s;
}

}  // namespace tessera::io
