#pragma once
// DistFft: forward and inverse real FFTs over several dims of a ShardTensor sharded over
// any of its dims on any mesh (slab on one axis, pencil on two; a data axis on the batch
// stays put). The plan (decomp/fft_stages) is declarative: the placements after each stage,
// printable with describe(). Each transpose is a redistribution along one mesh axis (an
// all-to-all on that axis's communicator); each transform truncates to the retained modes
// before the next transpose (pruning), and the spectrum stays in the transposed layout
// unless asked otherwise, so forward -> multiply -> inverse pays no extra transposes.
//
// All four maps are exact linear operators with their adjoints: forward F, inverse F^-1,
// and F*, (F^-1)* through the adjoint of every stage (a transpose reversed, a truncation
// zero-padded, r2c and c2r with the Hermitian weights of the half spectrum), so a layer's
// backward is exact. Spectrum: complex, shape (..., kept per dim, ...), the kept modes of
// a complex dim stored as [0, m) then [n-m, n) (FNO's two corners), of the real dim [0, m).
#include "runtime/floor.hpp"
#include <string>
#include <vector>

#include "decomp/fft_stages.hpp"
#include "kernels/fft.hpp"
#include "runtime/tensor/shard_tensor.hpp"

namespace tessera {

struct FftOptions {
  std::vector<int> dims;  // dims to transform (last: the real one); empty: 2 .. ndim-1
  // Retained modes per transformed dim; empty or 0: all, and so is a count the dim does not
  // hold (SpectralConv, whose weights are shaped by it, refuses one instead).
  std::vector<Index> modes;
  kernels::FftNorm norm = kernels::FftNorm::Backward;
  // Spectrum placement per dim (mesh axis or -1); empty: the plan's transposed layout.
  std::vector<int> spectrum_axis;
  // How the transposes move data (runtime/comm/transport.hpp).
  Transport transport = Transport::Auto;
};

// The plan of a DistFft without a mesh (a spec knows its mesh's shape): the layout, the
// stages and the spec before each stage (then the spectrum's). The dry run's view of it.
struct FftPlan {
  FftLayout layout;
  std::vector<FftStage> stages;
  std::vector<ShardSpec> specs;
};
FftPlan plan_dist_fft(const ShardSpec& input, const FftOptions& opts = {});

class DistFft {
 public:
  // For real inputs of `input` spec (float32 or float64); the plan is made here on each rank.
  // Collective over the mesh (one all-reduce): arguments refused on one rank, or unequal
  // across the ranks, are refused on every rank (plan_dist_fft alone, the dry run's, is local).
  DistFft(const Mesh& mesh, const ShardSpec& input, DType real, const FftOptions& opts = {});

  const ShardSpec& input_spec() const { return specs_.front(); }
  const ShardSpec& spectrum_spec() const { return specs_.back(); }
  DType real_type() const { return real_; }
  DType complex_type() const { return complex_of(real_); }
  const std::vector<FftStage>& stages() const { return stages_; }

  // With `consume`, the spectrum passed to inverse / forward_adjoint is a temporary the
  // transform may overwrite (FFTW's c2r destroys its input: otherwise it works on a copy).
  ShardTensor forward(const ShardTensor& x) const;                        // real -> spectrum
  ShardTensor inverse(const ShardTensor& X, bool consume = false) const;  // spectrum -> real
  ShardTensor forward_adjoint(const ShardTensor& G,
                              bool consume = false) const;  // F*: spectrum -> real
  ShardTensor inverse_adjoint(const ShardTensor& g) const;  // (F^-1)*: real -> spectrum

  // The stages with global shapes and placements, and this rank's box at each.
  std::string describe() const;
  // Bytes that leave their rank in one forward (or one inverse).
  Index bytes_moved() const;

 private:
  enum class Pass { Forward, Inverse, ForwardAdjoint, InverseAdjoint };
  ShardTensor run_down(const ShardTensor& x, Pass p) const;              // real -> spectrum order
  ShardTensor run_up(const ShardTensor& X, Pass p, bool consume) const;  // spectrum -> real
  void group_stages();
  std::vector<int> group_dims(std::size_t i) const;  // of the run holding stage i, ascending

  Mesh mesh_;
  DType real_;
  FftOptions opts_;
  FftLayout layout_;
  std::vector<FftStage> stages_;
  std::vector<ShardSpec> specs_;  // specs_[i]: before stage i; specs_.back(): the spectrum
  // Runs of transform stages done as one multi-dim transform (no truncation inside a run,
  // no transpose between): group_last_[i] / group_first_[i] for each stage of a run.
  std::vector<std::size_t> group_first_, group_last_;
  double points_ = 1;  // product of the transformed extents
};

}  // namespace tessera
