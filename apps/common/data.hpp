#pragma once
// Grid training data: by default in memory, every rank holding its spatial block of every
// sample of the input and target fields (read once with collective hyperslab reads; ranks
// that differ only in the data axis hold the same block); or streamed (Keep::Stream, for a
// dataset larger than the ranks' memory): each batch reads its samples' blocks from the file
// when drawn. Either way every sample is read once at load() - streamed, in one scan of the
// file in pieces of at most io::piece_bytes() per rank - checked finite and summarized
// (sample_summary.hpp): the statistics, the overflow and the zero-target checks read the
// summaries, not the data. Both give the same values bit for bit. Input fields
// are concatenated along channels, as are target fields. Batches are ShardTensors: the
// batch dim split over the data axis, spatial dims over the domain axes.
//
// Mesh axes: the one named "data" (if any) splits batches; every other axis is a domain
// axis and splits a spatial dim, in order (the first domain axis the first spatial dim).
#include <memory>
#include <string>
#include <vector>

#include "decomp/halo_geometry.hpp"
#include "apps/common/sample_summary.hpp"
#include "io/file.hpp"
#include "runtime/tensor/shard_tensor.hpp"

namespace tessera::app {

// How the mesh splits (N, C, spatial...) tensors.
struct GridLayout {
  int data_axis = -1;                                        // -1: no data axis
  std::vector<int> domain_axes;                              // domain_axes[k] splits spatial dim k
  static GridLayout of(const Mesh& mesh, int spatial_dims);  // throws if too many domain axes
  // Placements for a batch, its samples split over the data axis or replicated over it.
  std::vector<Placement> dims(int spatial_dims, bool shard_batch) const;
};

// The quantities a model reads: grid fields (datasets under /fields), or point quantities
// of a point-cloud file - "coords" (/points/coords, 3 channels) and the variables of
// /points/features (one channel each). Points load as a grid of one dim: (N, C, P), the
// points split over the domain axis in contiguous ranges.
struct FieldSet {
  std::vector<std::string> names;
  std::vector<Index> channels;  // per name
  bool points = false;          // names are point quantities
  std::vector<Index> feature;   // points: channel of /points/features per name, -1: coords
  Index total_channels() const;
};

// Per-channel affine map x' = (x - mean) / std.
struct Normalizer {
  std::vector<double> mean, std;  // empty: identity
  bool identity() const { return mean.empty(); }
  void apply(const Tensor& t) const;   // in place, (N, C, ...) host tensor or view
  void invert(const Tensor& t) const;  // in place
  // invert, and a value within the round trip's rounding of zero (4 eps (|mean| + std) of
  // its channel) becomes 0: a target that is zero in the file stays zero, so a relative
  // error skips it rather than divide by rounding noise.
  void invert_snapping_zero(const Tensor& t) const;
  // Channel k's value v normalized, as apply() computes it.
  template <class T>
  T applied(Index k, T v) const {
    if (identity()) return v;
    const auto c = static_cast<std::size_t>(k);
    return static_cast<T>((static_cast<double>(v) - mean[c]) / std[c]);
  }
};

class GridData {
 public:
  // Collective. Checks that every field exists, is float32 (N, C_f, spatial...) and that
  // all fields share N and the spatial shape; errors name the file and the field. With
  // Load::Later only the shapes are read, and load() reads the values (so what they need
  // can be checked against the node's memory first).
  enum class Load { Now, Later };
  // Where the values stay: every sample's block in memory, or in the file (Stream: load()
  // checks every value finite by a scan and keeps the file open; batches read from it).
  enum class Keep { Memory, Stream };
  GridData(const Mesh& mesh, const std::string& path, const FieldSet& inputs,
           const FieldSet& targets, DType dtype, Load when = Load::Now, Keep keep = Keep::Memory);
  ~GridData();
  void load();  // collective; once
  // The bytes load() keeps on this rank: every sample's block of inputs and targets (streamed,
  // the most a scan holds at a time: a batch's blocks count as the batch's tensors), and
  // every sample's summaries.
  double cache_bytes() const;
  bool streamed() const { return keep_ == Keep::Stream; }
  // The normalization in use (identity until normalize()).
  const Normalizer& input_norm() const { return in_norm_; }
  const Normalizer& target_norm() const { return out_norm_; }

  Index samples() const { return n_; }
  const std::vector<Index>& spatial() const { return spatial_; }
  int spatial_dims() const { return static_cast<int>(spatial_.size()); }
  Index input_channels() const { return cin_; }
  Index target_channels() const { return cout_; }
  const GridLayout& layout() const { return layout_; }
  bool points() const { return points_; }  // a point cloud, as a grid of one dim

  // Per-channel mean and std over the listed samples (all cells), from the samples'
  // summaries: collective, no reading. A channel of one value throughout has that mean and
  // std 1 (it normalizes to exactly 0).
  Normalizer statistics(bool input, const std::vector<Index>& samples) const;
  // The listed samples whose target (as the loss sees it: normalized) is zero in every cell
  // and channel, in the order listed: collective, from the summaries.
  std::vector<Index> zero_targets(const std::vector<Index>& samples) const;
  // Normalizes the fields: the cache in place, or each batch as streamed. Collective; throws
  // naming the sample when a value leaves the element type once normalized (known from the
  // summaries).
  void normalize(const Normalizer& in, const Normalizer& out);
  // Another normalization in place of normalize()'s: the file's values normalized by it
  // (the cache read again in runs: the same values as a first normalize() by it, and as
  // streamed). Collective.
  void renormalize(const Normalizer& in, const Normalizer& out);

  // The batch of these global sample indices (the same list on every rank): inputs and
  // targets. The batch dim is split over the data axis when its size divides the batch,
  // else replicated over it (each replica computes the same). With `x_room` (the ghost
  // room the model's first ops want, Graph::input_room), the inputs are written into the
  // interior of a buffer with that room, which those ops' halo exchanges fill in place.
  std::pair<ShardTensor, ShardTensor> batch(const std::vector<Index>& samples, MemSpace space,
                                            const HaloWidths& x_room = HaloWidths()) const;
  // The specs of a batch of `b` samples: inputs, targets.
  std::pair<ShardSpec, ShardSpec> batch_specs(Index b) const;

 private:
  void load(io::File f);  // from the file as opened (kept open when streamed)
  // Every sample's summaries, from the cache or a scan of the file: while neither is
  // normalized (at load(), or the cache just read again).
  void summarize();
  void require_loaded() const;
  std::vector<Index> all_samples() const;  // 0 .. n-1
  // The part [mine.lo[0], mine.hi[0]) of a batch's sample list that this rank holds, each
  // checked to be a sample of the file.
  std::vector<Index> local_samples(const std::vector<Index>& samples, const Box& mine) const;
  // Samples [s0, s1) of the inputs or the targets from the file: (s1 - s0, C, block...) in
  // dtype_, every value checked finite (collective over the mesh), not normalized.
  Tensor read_samples(const io::File& f, bool input, Index s0, Index s1) const;
  Tensor read_fields(const io::File& f, const FieldSet& fs, Index channels, Index s0,
                     Index s1) const;
  // f(j, block) for each listed sample in order: block (1, C, block...) holds sample
  // samples[j] of the inputs or targets as the cache would (normalized where normalize()
  // ran). In memory a view of the cache; streamed, read in runs of consecutive samples of
  // at most max_run samples. Collective when streamed: every rank must make the same
  // reads, so lists that differ between ranks need max_run 1 and lists of equal length.
  template <class F>
  void for_each_sample(bool input, const std::vector<Index>& samples, Index max_run, F&& f) const;
  // The local part [mine.lo[0], mine.hi[0]) of a batch of these samples, host.
  Tensor gather(bool input, const std::vector<Index>& samples, const Box& mine) const;
  // The normalized values overflow nowhere: collective, throws naming the first sample.
  void check_normalized_finite() const;
  // Whether every value of sample s normalized is zero (zero) or finite (!zero), on this rank.
  bool normalized_all(bool input, Index s, bool zero) const;

  Mesh mesh_;
  std::string path_;
  FieldSet inputs_set_, targets_set_;
  bool loaded_ = false;
  GridLayout layout_;
  DType dtype_;
  Index n_ = 0, cin_ = 0, cout_ = 0;
  bool points_ = false;
  std::vector<Index> spatial_;
  Box block_;                // this rank's spatial block (global coordinates)
  Tensor inputs_, targets_;  // (n, C, block...) in dtype_, host; empty when streamed
  Keep keep_ = Keep::Memory;
  // Streamed: the file, open from load() on. The normalization in use (applied to the cache,
  // or to each batch as read). The samples a scan, or the cache's read again, takes at a
  // time (the same on every rank: the collective reads pair up).
  std::unique_ptr<io::File> file_;
  Normalizer in_norm_, out_norm_;
  Index stream_run_ = 1;
  // Of the values as read from the file (at load(), or again by renormalize()), not normalized.
  SampleSummaries in_summary_, out_summary_;
};

// Point quantities of samples [s0, s1), points [b, e): (s1 - s0, channels, e - b) in dtype,
// channels in the order of fs. Collective over f's communicator; with check_finite a
// non-finite value of a listed quantity fails every rank naming the dataset, the quantity,
// the sample and the point (other variables of /points/features are not looked at).
Tensor read_point_quantities(const io::File& f, const FieldSet& fs, Index s0, Index s1, Index b,
                             Index e, DType dtype, bool check_finite = true);

// Per channel, the mean and std of merged summaries (SampleSummaries::over); a channel of one
// value throughout gets that value and std 1 (it normalizes to exactly 0; past 2^29 cells a
// float64 sum of its copies rounds). Throws for a channel of no cells.
Normalizer normalizer_from(const std::vector<ValueSummary>& channels);

// Reads the channel counts of fields and checks they are schema grid fields, or point
// quantities of a point-cloud file (collective).
FieldSet field_set(const io::File& f, const std::vector<std::string>& names);

}  // namespace tessera::app
