#include "io/schema.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "decomp/error.hpp"
#include "io/pieces.hpp"
#include "io/sharded.hpp"
#include "runtime/comm/collective_error.hpp"
#include "runtime/tensor/tensor.hpp"

namespace tessera::io::schema {

void write_root(File& f, const std::string& generator) {
  f.set_attr("/", kVersionAttr, kVersion);
  f.set_attr("/", "generator", generator);
}

void write_grid_meta(File& f, const std::string& dset, const GridMeta& m) {
  f.set_attr(dset, "variables", m.variables);
  f.set_attr(dset, "spacing", m.spacing);
  f.set_attr(dset, "extent", m.extent);
  if (!m.origin.empty()) f.set_attr(dset, "origin", m.origin);
}

int channel_dim_of(const std::string& dset) {
  const std::string fields = std::string(kFields) + "/";
  return dset.rfind(fields, 0) == 0 ? 1 : 2;
}

namespace {

// Count, mean and sum of squared deviations of one channel; combined exactly as in
// Chan et al.'s parallel variance, so partial results merge in any grouping.
struct Moments {
  double n = 0, mean = 0, m2 = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  void merge(const Moments& o) {
    if (o.n == 0) return;
    const double n2 = n + o.n, delta = o.mean - mean;
    mean += delta * o.n / n2;
    m2 += o.m2 + delta * delta * n * o.n / n2;
    n = n2;
    min = std::min(min, o.min);
    max = std::max(max, o.max);
  }
};

// One rank's share of one sample, streamed in pieces: per channel the running sum, count,
// min and max over the share's values in its row-major order (the additions, in the same
// order, that summing the whole share at once makes: the share's mean has the same bits
// however it is cut), and the spread (m2) of the pieces merged one after the other (Chan
// et al.: each piece's m2 around its own mean, exact up to rounding in any grouping).
struct Share {
  std::vector<double> sum, cnt, min, max;
  std::vector<Moments> spread;
  explicit Share(std::size_t C)
      : sum(C, 0.0),
        cnt(C, 0.0),
        min(C, std::numeric_limits<double>::infinity()),
        max(C, -std::numeric_limits<double>::infinity()),
        spread(C) {}
  // The share's moments of channel c: what one two-pass sweep over the whole share gives
  // (the same bits when the share came in one piece).
  Moments moments(std::size_t c) const {
    Moments m;
    m.n = cnt[c];
    m.mean = cnt[c] > 0 ? sum[c] / cnt[c] : 0.0;
    m.m2 = spread[c].m2;
    m.min = min[c];
    m.max = max[c];
    return m;
  }
};

template <class T>
void accumulate(const Tensor& piece, const Box& box, const std::vector<Index>& shape, int cdim,
                Share& share, double& first_bad, double& bad_value) {
  const T* x = piece.data<T>();
  const Index n = piece.numel();
  const std::size_t C = share.sum.size();
  Index inner = 1;  // stride of the channel dim inside the piece
  for (int d = cdim + 1; d < box.ndim; ++d) inner *= box.extent(d);
  const Index cext = box.extent(cdim);
  std::vector<double> sum(C, 0.0), cnt(C, 0.0), m2(C, 0.0);
  Index bad = -1;
  // Runs of `inner` values share a channel: each run in order, so every sum adds the
  // piece's values in row-major order.
  for (Index r = 0, i0 = 0; i0 < n; ++r, i0 += inner) {
    const std::size_t c = static_cast<std::size_t>(box.lo[cdim] + r % cext);
    double s = sum[c], k = cnt[c], ss = share.sum[c], sk = share.cnt[c];
    double lo = share.min[c], hi = share.max[c];
    for (Index i = i0; i < i0 + inner; ++i) {
      const double v = static_cast<double>(x[i]);
      if (!std::isfinite(v)) {
        if (bad < 0) bad = i;
        continue;
      }
      s += v;
      k += 1;
      ss += v;
      sk += 1;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    sum[c] = s, cnt[c] = k, share.sum[c] = ss, share.cnt[c] = sk;
    share.min[c] = lo, share.max[c] = hi;
  }
  std::vector<double> mean(C, 0.0);
  for (std::size_t c = 0; c < C; ++c) mean[c] = cnt[c] > 0 ? sum[c] / cnt[c] : 0.0;
  for (Index r = 0, i0 = 0; i0 < n; ++r, i0 += inner) {
    const std::size_t c = static_cast<std::size_t>(box.lo[cdim] + r % cext);
    const double mu = mean[c];
    double q = m2[c];
    for (Index i = i0; i < i0 + inner; ++i) {
      const double v = static_cast<double>(x[i]);
      if (std::isfinite(v)) q += (v - mu) * (v - mu);
    }
    m2[c] = q;
  }
  for (std::size_t c = 0; c < C; ++c) {
    if (cnt[c] == 0) continue;
    Moments m;
    m.n = cnt[c];
    m.mean = mean[c];
    m.m2 = m2[c];
    if (share.spread[c].n == 0)
      share.spread[c] = m;  // the first piece: its m2 as it is
    else
      share.spread[c].merge(m);
  }
  if (bad >= 0) {
    std::vector<Index> p(static_cast<std::size_t>(box.ndim));
    delinearize(box, bad, p.data());
    const Index g = linear_index(Box::from_shape(shape), p.data());
    if (first_bad < 0 || static_cast<double>(g) < first_bad) {
      first_bad = static_cast<double>(g);
      bad_value = static_cast<double>(x[bad]);
    }
  }
}

}  // namespace

namespace {
std::pair<Index, Index> share_of(const std::vector<Index>& shape, int split, MPI_Comm comm) {
  int rank = 0, P = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &P);
  return split >= 0 ? balanced_range(shape[static_cast<std::size_t>(split)], P, rank)
                    : std::pair<Index, Index>{0, rank == 0 ? shape[1] : 0};
}
long long most_pieces(const SamplePieces& pieces, MPI_Comm comm) {
  long long own = static_cast<long long>(pieces.count()), most = 0;
  MPI_Allreduce(&own, &most, 1, MPI_LONG_LONG, MPI_MAX, comm);
  return most;
}
Index bytes_per_sample(const std::vector<Index>& shape, DType dt) {
  Index b = static_cast<Index>(size_of(dt));
  for (std::size_t d = 1; d < shape.size(); ++d) b *= shape[d];
  return b;
}
int rank_of(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank;
}
}  // namespace

ShareScan::ShareScan(MPI_Comm comm, const std::vector<Index>& shape, int split, DType dt,
                     const Progress& progress)
    : pieces(shape, split >= 0 ? split : 1, share_of(shape, split, comm).first,
             share_of(shape, split, comm).second, piece_bytes() / static_cast<Index>(size_of(dt))),
      calls(most_pieces(pieces, comm)),
      report(progress, rank_of(comm), shape[0], calls, bytes_per_sample(shape, dt)) {}

ChannelStats scan(const File& f, const std::string& dset, int cdim, const Progress& progress) {
  const DatasetInfo in = f.info(dset);
  const std::vector<Index>& shape = in.shape;
  const int nd = static_cast<int>(shape.size());
  collective_check(f.comm(), in.dtype == DType::f32 || in.dtype == DType::f64,
                   f.where(dset) + " holds " + in.type_name + "; statistics need float32/64");
  collective_check(f.comm(), nd >= 2 && cdim > 0 && cdim < nd,
                   f.where(dset) + " of shape " + shape_str(shape) + " has no channel dim " +
                       std::to_string(cdim));
  int rank = 0, P = 1;
  MPI_Comm_rank(f.comm(), &rank);
  MPI_Comm_size(f.comm(), &P);
  // Each sample is split over the ranks along its largest non-channel dim (none: a dataset
  // (N, C), each sample rank 0's); each rank streams its share in pieces.
  int split = -1;
  for (int d = 1; d < nd; ++d)
    if (d != cdim &&
        (split < 0 || shape[static_cast<std::size_t>(d)] > shape[static_cast<std::size_t>(split)]))
      split = d;
  const std::size_t C = static_cast<std::size_t>(shape[static_cast<std::size_t>(cdim)]);
  std::vector<Moments> acc(std::max<std::size_t>(C, 1));
  double first_bad = -1, bad_value = 0;
  const DType dt = *in.dtype;
  const ShareScan plan(f.comm(), shape, split, dt, progress);
  const SamplePieces& pieces = plan.pieces;
  const long long calls = plan.calls;
  const PieceProgress& report = plan.report;
  for (Index n = 0; n < shape[0]; ++n) {
    Share share(C);
    for (long long k = 0; k < calls; ++k) {
      const Box box = pieces.piece(n, static_cast<Index>(k));
      const Tensor piece = read_slab(f, dset, box, dt);
      if (C > 0 && piece.numel() > 0) {
        if (dt == DType::f32)
          accumulate<float>(piece, box, shape, cdim, share, first_bad, bad_value);
        else
          accumulate<double>(piece, box, shape, cdim, share, first_bad, bad_value);
      }
      report(n, k);
    }
    // The share's moments join this rank's, sample after sample.
    for (std::size_t c = 0; c < C; ++c) acc[c].merge(share.moments(c));
    if (calls == 0) report(n, 0);
  }
  // Every rank's partial results, merged in rank order: the same bits on every rank.
  const std::size_t per = 5 * C + 2;
  std::vector<double> mine(per), all(per * static_cast<std::size_t>(P));
  for (std::size_t c = 0; c < C; ++c) {
    mine[5 * c] = acc[c].n;
    mine[5 * c + 1] = acc[c].mean;
    mine[5 * c + 2] = acc[c].m2;
    mine[5 * c + 3] = acc[c].min;
    mine[5 * c + 4] = acc[c].max;
  }
  mine[5 * C] = first_bad;
  mine[5 * C + 1] = bad_value;
  MPI_Allgather(mine.data(), static_cast<int>(per), MPI_DOUBLE, all.data(), static_cast<int>(per),
                MPI_DOUBLE, f.comm());
  std::vector<Moments> tot(C);
  ChannelStats s;
  double best = -1;
  for (int r = 0; r < P; ++r) {
    const double* p = all.data() + per * static_cast<std::size_t>(r);
    for (std::size_t c = 0; c < C; ++c) {
      Moments m;
      m.n = p[5 * c];
      m.mean = p[5 * c + 1];
      m.m2 = p[5 * c + 2];
      m.min = p[5 * c + 3];
      m.max = p[5 * c + 4];
      tot[c].merge(m);
    }
    if (p[5 * C] >= 0 && (best < 0 || p[5 * C] < best)) {
      best = p[5 * C];
      s.first_bad_value = p[5 * C + 1];
    }
  }
  for (std::size_t c = 0; c < C; ++c) {
    s.mean.push_back(tot[c].mean);
    s.std.push_back(tot[c].n > 0 ? std::sqrt(tot[c].m2 / tot[c].n) : 0.0);
    s.min.push_back(tot[c].n > 0 ? tot[c].min : 0.0);
    s.max.push_back(tot[c].n > 0 ? tot[c].max : 0.0);
    s.finite.push_back(static_cast<Index>(tot[c].n));
  }
  s.count = C > 0 ? static_cast<Index>(tot[0].n) : 0;
  if (best >= 0) {
    s.first_bad.resize(static_cast<std::size_t>(nd));
    delinearize(Box::from_shape(shape), static_cast<Index>(best), s.first_bad.data());
  }
  return s;
}

void write_stats(File& f, const std::string& dset, const ChannelStats& s) {
  f.set_attr(dset, "mean", s.mean);
  f.set_attr(dset, "std", s.std);
  f.set_attr(dset, "min", s.min);
  f.set_attr(dset, "max", s.max);
  f.set_attr(dset, "stats_count", static_cast<std::int64_t>(s.count));
}

}  // namespace tessera::io::schema
