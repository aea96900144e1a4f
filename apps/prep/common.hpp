#pragma once
// What the tessera-prep subcommands share: the command table, the options every
// generator takes, and writing one sample of a sharded grid field into the schema.
#include <functional>
#include <string>
#include <vector>

#include "apps/common/cli.hpp"
#include "io/schema.hpp"
#include "runtime/tensor/context.hpp"
#include "runtime/tensor/shard_tensor.hpp"

namespace tessera::prep {

// The largest value of an int option (iteration counts, modes, steps).
inline constexpr Index kIntMax = 2147483647;
// --seed: 0 to 2^63 - 1 (stored as the file's int64 attribute 'seed').
inline constexpr Index kMaxSeed = 9223372036854775807;

struct Command {
  std::string name;  // "generate darcy", "inspect", ...
  std::string usage, description;
  std::vector<cli::Option> options;
  std::function<int(Context&, const cli::Args&)> run;
};

Command generate_darcy_command();
Command generate_heat_command();
Command generate_points_command();
Command convert_command();
Command inspect_command();
Command validate_command();
Command stats_command();

// Mesh over comm for a spatial grid: "auto" (minimum halo surface) or Mesh::parse text.
Mesh grid_mesh(MPI_Comm comm, const std::vector<Index>& shape, const std::string& mesh);
// Spatial dim d sharded over mesh axis d.
ShardSpec grid_spec(const Mesh& mesh, const std::vector<Index>& shape);
// Collective, before any file is made: refuses on every rank a grid whose blocks would not
// fit the node - `bytes_per_cell` of the generator's work arrays per local cell (`what`
// names the generator) - and a grid whose cell count overflows.
void check_grid_fits(const Mesh& mesh, const ShardSpec& spec, double bytes_per_cell,
                     const std::string& what);
// Collective: a /fields dataset (N, 1, shape...) float32, chunked one chunk per shard and
// sample, with the schema's grid attributes for a grid of interior nodes on [0, 1]^d.
void create_grid_field(io::File& f, const std::string& name, Index samples, const ShardSpec& spec,
                       const std::string& variable);
// Collective: this rank's float64 shard of sample n, stored as float32.
void write_grid_sample(io::File& f, const std::string& name, Index n, const ShardSpec& spec,
                       const Mesh& mesh, const Tensor& local);

// Why io::schema::scan cannot read `dset` here, else "": a filter this HDF5 lacks, or storage
// never allocated (no written data). Local, no I/O of values. The size of a sample is no
// reason: scan streams each rank's share in pieces of at most io::piece_bytes().
std::string unscannable(const io::File& f, const std::string& dset);

// --modes K of a generator's random field (Fourier modes -K..K per dim): at most the grid's
// largest extent or 64 (modes past half the grid alias, and the field costs (2K + 1)^d per
// cell: a K of 10000 on an 8x8 grid ran for minutes without a word).
int field_modes(const cli::Args& a, const std::vector<Index>& grid);

}  // namespace tessera::prep
