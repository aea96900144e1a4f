#include "apps/common/sample_summary.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "decomp/error.hpp"
#include "runtime/comm/mpi_error.hpp"

namespace tessera::app {
namespace {

// a + b = s + e exactly (Knuth's TwoSum).
void two_sum(double a, double b, double& s, double& e) {
  s = a + b;
  const double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

// (hi, lo) with hi = fl(hi + lo): a double-double put back in its normal form.
void normalize(double& hi, double& lo) {
  const double s = hi + lo;
  lo = lo - (s - hi);
  hi = s;
}

}  // namespace

void ValueSummary::merge(const ValueSummary& o) {
  if (o.count == 0) return;
  if (count == 0) {
    *this = o;
    return;
  }
  // Chan, Golub and LeVeque's update for the union of two sets, on double-double means: the
  // difference of two close means is exact in its high parts (Sterbenz), the low parts add
  // what rounding took.
  const double n = count + o.count, delta = (o.mean - mean) + (o.mean_lo - mean_lo);
  double s = 0, e = 0;
  two_sum(mean, delta * (o.count / n), s, e);
  mean = s;
  mean_lo += e;
  normalize(mean, mean_lo);
  m2 += o.m2 + delta * delta * (count * o.count / n);
  count = n;
  lo = std::min(lo, o.lo);
  hi = std::max(hi, o.hi);
}

SampleSummaries::SampleSummaries(Index samples, Index channels)
    : samples_(samples),
      channels_(channels),
      summaries_(static_cast<std::size_t>(samples * channels)) {}

void SampleSummaries::add(Index s, const Tensor& block) {
  TESSERA_CHECK(s >= 0 && s < samples_,
                "sample summary: sample " << s << " outside [0, " << samples_ << ")");
  TESSERA_CHECK(block.ndim() >= 2 && block.shape(0) == 1 && block.shape(1) == channels_ &&
                    block.is_contiguous(),
                "sample summary: a contiguous (1, " << channels_ << ", ...) block expected");
  TESSERA_CHECK(
      block.dtype() == DType::f64 || block.dtype() == DType::f32,
      "sample summary: float32 or float64 values expected, not " << name_of(block.dtype()));
  const Index cells = channels_ > 0 ? block.numel() / channels_ : 0;
  const auto summarize = [&](const auto* p) {
    for (Index k = 0; k < channels_; ++k) {
      const auto* v = p + k * cells;
      ValueSummary m;
      m.count = static_cast<double>(cells);
      if (cells > 0) {
        // Two passes over the sample in memory: its mean (the sum and the mean as
        // double-doubles), then the squared deviations.
        double sum = 0, sum_lo = 0;
        m.lo = std::numeric_limits<double>::infinity(), m.hi = -m.lo;
        for (Index c = 0; c < cells; ++c) {
          const double x = static_cast<double>(v[c]);
          double e = 0;
          two_sum(sum, x, sum, e);
          sum_lo += e;
          m.lo = std::min(m.lo, x);
          m.hi = std::max(m.hi, x);
        }
        normalize(sum, sum_lo);
        const double n = static_cast<double>(cells);
        m.mean = sum / n;
        // sum - n mean is exact for a correctly rounded quotient (one fma, no rounding).
        m.mean_lo = (std::fma(-n, m.mean, sum) + sum_lo) / n;
        for (Index c = 0; c < cells; ++c) {
          const double d = static_cast<double>(v[c]) - m.mean;
          m.m2 += d * d;
        }
        // About the double-double mean: sum (x - mean - mean_lo)^2 = sum (x - mean)^2 - n
        // mean_lo^2.
        m.m2 = std::max(0.0, m.m2 - n * m.mean_lo * m.mean_lo);
      }
      summaries_[static_cast<std::size_t>(s * channels_ + k)] = m;
    }
  };
  if (block.dtype() == DType::f64)
    summarize(block.data<double>());
  else
    summarize(block.data<float>());
}

std::vector<ValueSummary> SampleSummaries::over(const std::vector<Index>& samples,
                                                MPI_Comm comm) const {
  std::vector<ValueSummary> mine(static_cast<std::size_t>(channels_));
  for (Index s : samples) {
    TESSERA_CHECK(s >= 0 && s < samples_,
                  "statistics: sample " << s << " outside [0, " << samples_ << ")");
    for (Index k = 0; k < channels_; ++k) mine[static_cast<std::size_t>(k)].merge(of(s, k));
  }
  static_assert(sizeof(ValueSummary) == 6 * sizeof(double), "a summary travels as six doubles");
  int ranks = 1;
  TESSERA_MPI(MPI_Comm_size(comm, &ranks));
  const int per = static_cast<int>(6 * mine.size());
  std::vector<ValueSummary> all(mine.size() * static_cast<std::size_t>(ranks));
  TESSERA_MPI(MPI_Allgather(mine.data(), per, MPI_DOUBLE, all.data(), per, MPI_DOUBLE, comm));
  std::vector<ValueSummary> merged(mine.size());
  for (int r = 0; r < ranks; ++r)
    for (std::size_t k = 0; k < merged.size(); ++k)
      merged[k].merge(all[static_cast<std::size_t>(r) * mine.size() + k]);
  return merged;
}

double SampleSummaries::bytes_for(Index samples, Index channels) {
  return static_cast<double>(samples) * static_cast<double>(channels) *
         static_cast<double>(sizeof(ValueSummary));
}

}  // namespace tessera::app
