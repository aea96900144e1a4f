#pragma once
// The stages of a distributed multi-dim FFT, as placements of a tensor's dims over mesh
// axes (pure: no MPI). A dim can be transformed only where it is whole on every rank, so a
// mesh axis sharding it first moves to another dim (one all-to-all along that axis). The
// plan transforms the real (halved) dim first, then the others, truncating each to its
// retained modes right after its transform so that only retained modes travel (pruning);
// a freed axis lands on a dim already transformed where one is whole (the slab/pencil
// transposes of heFFTe and FFTW-MPI), else on a batch/channel dim, else on a dim still to
// come; an axis of one rank stays where it is (the dim is whole). The spectrum may stay in
// that transposed layout or be moved to a requested one.
#include <string>
#include <vector>

#include "decomp/index.hpp"

namespace tessera {

// Extent a transformed dim keeps: a real dim of n points has n/2+1 bins and keeps the
// lowest `modes`; a complex dim keeps the `modes` lowest and `modes` highest frequencies
// (FNO's two corners). modes == 0 keeps everything.
Index kept_extent(Index n, Index modes, bool real_dim);

struct FftLayout {
  std::vector<Index> shape;    // global tensor shape (e.g. batch, channel, spatial...)
  std::vector<int> axis;       // per dim: the mesh axis sharding it, or -1
  std::vector<int> axis_size;  // per mesh axis: its number of ranks
  std::vector<int> dims;       // dims to transform; the last is the real (halved) one
  std::vector<Index> modes;    // per transformed dim (same order): retained modes, 0 = all
  // Placement wanted for the spectrum (per dim, axis or -1); empty: the transposed layout.
  std::vector<int> spectrum_axis;
};

struct FftStage {
  enum class Kind { Transform, Move };
  Kind kind = Kind::Transform;
  int dim = -1;                // Transform: the dim; Move: the dim the axis leaves
  int to = -1;                 // Move: the dim the axis lands on
  int axis = -1;               // Move: the mesh axis
  bool real = false;           // Transform: the real-to-complex dim
  Index n = 0;                 // Transform: points (real length for the real dim)
  Index kept = 0;              // Transform: extent after truncation
  std::vector<Index> shape;    // global shape after the stage
  std::vector<int> placement;  // per dim: axis after the stage
};

// Throws (tessera::Error) when a dim cannot be freed (every other dim sharded).
std::vector<FftStage> plan_fft_stages(const FftLayout& in);
// One line per stage: "r2c dim 3: 64 -> 33 bins, keep 12 | move axis 0: dim 2 -> dim 3 ..."
std::string describe_fft_stages(const FftLayout& in, const std::vector<FftStage>& stages);
// Elements that leave their rank over the plan's moves (global count, both directions once).
Index fft_elements_moved(const FftLayout& in, const std::vector<FftStage>& stages);

}  // namespace tessera
