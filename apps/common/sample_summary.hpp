#pragma once
// What the training start-up needs of every sample, taken once as the sample is read: per
// sample and channel of this rank's block, the count, mean and sum of squared deviations
// about the mean (merged - in the order samples are listed, then in rank order - they give
// the normalization statistics by Chan's pairwise update), and the least and greatest value.
// The update takes differences of means, so each mean is kept to twice double's precision
// (a double-double): a mean far larger than the spread (3e7 + a few units) would otherwise
// pass its rounding (1e-16 of 3e7) into the merged squared deviations, 1e-11 of the std;
// kept so, the std is as close as two passes over all the data get (1e-16). A normalization x' = (x
// - mean) / std is monotone in x, as are its roundings, so the least and greatest value normalized
// bound every value normalized: whether one leaves the element type, whether all are zero, is known
// without reading the sample again. A streamed dataset is so read once at the start instead of once
// per check.
#include <mpi.h>

#include <vector>

#include "decomp/index.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera::app {

// Of a set of values: how many, their mean (mean + mean_lo, a double-double), the sum of
// squared deviations about it, the least and the greatest (0 values: count 0, the rest
// meaningless).
struct ValueSummary {
  double count = 0, mean = 0, m2 = 0, lo = 0, hi = 0, mean_lo = 0;
  void merge(const ValueSummary& o);  // the summary of the union
};

class SampleSummaries {
 public:
  SampleSummaries() = default;
  SampleSummaries(Index samples, Index channels);
  // Sample s's block, (1, channels, cells...) contiguous float32 or float64 host values.
  void add(Index s, const Tensor& block);
  Index channels() const { return channels_; }
  // Sample s, channel k, on this rank.
  const ValueSummary& of(Index s, Index k) const {
    return summaries_[static_cast<std::size_t>(s * channels_ + k)];
  }
  // Per channel, the summary of the listed samples over every rank of comm (each holding its
  // block): merged in the order listed, then in rank order, so the same bits on every rank.
  // Collective over comm.
  std::vector<ValueSummary> over(const std::vector<Index>& samples, MPI_Comm comm) const;
  // The bytes held on a rank for so many samples and channels.
  static double bytes_for(Index samples, Index channels);

 private:
  Index samples_ = 0, channels_ = 0;
  std::vector<ValueSummary> summaries_;  // (sample, channel)
};

}  // namespace tessera::app
