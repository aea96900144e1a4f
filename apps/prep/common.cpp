#include "apps/prep/common.hpp"

#include <algorithm>
#include <sstream>

#include "apps/common/node_memory.hpp"
#include "io/sharded.hpp"
#include "io/transfer.hpp"

namespace tessera::prep {

Mesh grid_mesh(MPI_Comm comm, const std::vector<Index>& shape, const std::string& mesh) {
  if (mesh == "auto") return Mesh::for_grid(comm, shape);
  return Mesh::parse(comm, mesh);
}

ShardSpec grid_spec(const Mesh& mesh, const std::vector<Index>& shape) {
  TESSERA_CHECK(mesh.ndim() == static_cast<int>(shape.size()),
                "--mesh " << mesh.str() << ": " << mesh.ndim() << " axes for a " << shape.size()
                          << "-D grid: give one axis per grid dim (e.g. x=2,y=2 for 2-D), or "
                             "auto");
  std::vector<Placement> dims;
  for (int d = 0; d < mesh.ndim(); ++d) dims.push_back(Shard(d));
  return ShardSpec(shape, dims, mesh);
}

void check_grid_fits(const Mesh& mesh, const ShardSpec& spec, double bytes_per_cell,
                     const std::string& what) {
  double cells = 1, local = 1;
  const Box own = spec.local_box(mesh.coords());
  for (int d = 0; d < spec.ndim(); ++d) {
    cells *= static_cast<double>(spec.global_shape()[static_cast<std::size_t>(d)]);
    local *= static_cast<double>(own.extent(d));
  }
  TESSERA_CHECK(cells < 1e18, "grid " << shape_str(spec.global_shape()) << ": " << cells
                                      << " cells, more than a file can index");
  std::ostringstream detail;
  detail << " (" << local << " cells of the grid " << shape_str(spec.global_shape())
         << " on this rank)";
  app::check_node_memory(mesh.comm(), local * bytes_per_cell, what, detail.str(),
                         "a smaller grid, or more ranks on more nodes");
}

void create_grid_field(io::File& f, const std::string& name, Index samples, const ShardSpec& spec,
                       const std::string& variable) {
  std::vector<Index> shape = {samples, 1}, chunk = {1, 1};
  const std::vector<Index> c = io::decomposition_chunk(spec, 4, std::size_t(1) << 30);
  for (int d = 0; d < spec.ndim(); ++d) {
    shape.push_back(spec.global_shape()[static_cast<std::size_t>(d)]);
    chunk.push_back(c[static_cast<std::size_t>(d)]);
  }
  const std::string dset = std::string(io::schema::kFields) + "/" + name;
  f.create_dataset(dset, shape, DType::f32, samples > 0 ? chunk : std::vector<Index>{});
  io::schema::GridMeta m;
  m.variables = {variable};
  for (Index n : spec.global_shape()) {
    m.spacing.push_back(1.0 / static_cast<double>(n + 1));
    m.origin.push_back(1.0 / static_cast<double>(n + 1));  // the first interior node
    m.extent.push_back(1.0);
  }
  io::schema::write_grid_meta(f, dset, m);
}

void write_grid_sample(io::File& f, const std::string& name, Index n, const ShardSpec& spec,
                       const Mesh& mesh, const Tensor& local) {
  const Box own = spec.local_box(mesh.coords());
  std::vector<Index> shape = {1, 1}, lo = {n, 0}, hi = {n + 1, 1};
  for (int d = 0; d < own.ndim; ++d) {
    shape.push_back(own.extent(d));
    lo.push_back(own.lo[d]);
    hi.push_back(own.hi[d]);
  }
  Tensor out = Tensor::empty(shape, DType::f32);
  const Tensor src = local.contiguous();
  for (Index i = 0; i < out.numel(); ++i)
    out.data<float>()[i] = static_cast<float>(src.data<double>()[i]);
  io::write_box(f, std::string(io::schema::kFields) + "/" + name, Box(lo, hi), out,
                Box::from_shape(shape));
}

std::string unscannable(const io::File& f, const std::string& dset) {
  if (std::string why = io::unavailable_filter(f, dset); !why.empty()) return why;
  if (std::string why = io::storage_problem(f, dset); !why.empty()) return why;
  return "";  // a sample of any size: scan streams it in bounded pieces
}

int field_modes(const cli::Args& a, const std::vector<Index>& grid) {
  const Index most = std::max<Index>(64, *std::max_element(grid.begin(), grid.end()));
  const Index k = a.integer_in("modes", 0, kIntMax);
  TESSERA_CHECK(k <= most, "--modes " << k << ": at most " << most
                                      << ", the grid's largest extent or 64 (modes past half "
                                         "the grid alias, and the field costs (2K + 1)^d per "
                                         "cell)");
  return static_cast<int>(k);
}

}  // namespace tessera::prep
