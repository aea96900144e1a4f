#pragma once
// The Tessera dataset schema (version 1):
//   /                       attr tessera_schema_version (int64) = 1, attr generator (string)
//   /fields/NAME            float32 (N, C, spatial...), one dataset per field
//       attrs: variables (C strings), spacing and extent (one double per spatial dim),
//              origin (optional, per spatial dim), mean/std/min/max (C doubles each,
//              written by `tessera-prep stats`)
//   /points/coords          float32 (N, P, 3)
//   /points/features        float32 (N, P, C), attr variables (C strings), stats as above
// All datasets of a file share N (sample i of every dataset belongs together).
#include "io/floor.hpp"
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/file.hpp"
#include "io/pieces.hpp"

namespace tessera::io::schema {

inline constexpr std::int64_t kVersion = 1;
inline constexpr const char* kVersionAttr = "tessera_schema_version";
inline constexpr const char* kFields = "/fields";
inline constexpr const char* kCoords = "/points/coords";
inline constexpr const char* kFeatures = "/points/features";

// Stamps the root group with the schema version and the program that wrote the file.
void write_root(File& f, const std::string& generator);

struct GridMeta {
  std::vector<std::string> variables;           // one per channel
  std::vector<double> spacing, extent, origin;  // one per spatial dim
};
// Collective: the attributes of a grid field dataset.
void write_grid_meta(File& f, const std::string& dset, const GridMeta& m);

// Per-channel statistics over every sample and every cell or point.
struct ChannelStats {
  std::vector<double> mean, std, min, max;
  Index count = 0;            // values per channel
  std::vector<Index> finite;  // per channel: the finite values the other figures are over
  // The first value that is NaN or +-Inf, in row-major order: its multi-index, else empty.
  std::vector<Index> first_bad;
  double first_bad_value = 0;
};
// Progress of a long scan: slabs done of total, bytes read so far.
using Progress = std::function<void(Index done, Index total, double bytes)>;
// The same for a scan of several datasets, naming the one being read.
using DatasetProgress =
    std::function<void(const std::string& dataset, Index done, Index total, double bytes)>;

// A scan's progress by piece (each sample read in `calls` pieces; 0: one report per
// sample), so a single sample larger than memory shows progress while it is read. Rank 0
// reports.
class PieceProgress {
 public:
  PieceProgress(const Progress& p, int rank, Index samples, long long calls, Index sample_bytes)
      : p_(rank == 0 ? p : Progress()),
        samples_(samples),
        per_(std::max(calls, 1LL)),
        sample_bytes_(sample_bytes) {}
  void operator()(Index n, long long k) const {
    if (!p_) return;
    const Index done = n * per_ + static_cast<Index>(k) + 1;
    p_(done, samples_ * per_,
       static_cast<double>(sample_bytes_) * static_cast<double>(done) / static_cast<double>(per_));
  }

 private:
  Progress p_;
  Index samples_;
  Index per_;
  Index sample_bytes_;
};

// How a scan streams a dataset of `shape` (N first): this rank's share of each sample (dim
// `split` balanced over the ranks of comm; split < 0: the whole sample on rank 0), cut into
// pieces of at most piece_bytes(); `calls`, the collective reads per sample every rank makes
// (the most pieces any rank has); `report`, the progress by piece. Collective.
struct ShareScan {
  ShareScan(MPI_Comm comm, const std::vector<Index>& shape, int split, DType dt,
            const Progress& progress);
  SamplePieces pieces;
  long long calls = 0;
  PieceProgress report;
};
// Collective: reads the dataset once in parallel and computes per-channel statistics along
// `channel_dim` (1 for fields, 2 for points). Each sample is split over the ranks along its
// largest dim after N but the channel dim, and each rank streams its share in pieces of at
// most io::piece_bytes() (io/pieces.hpp; 64 MiB), so a sample of any size is read in bounded
// memory. What the results depend on:
//  - count, finite, min, max and the first non-finite value (its index and value): exact,
//    the same bits at any rank count and any piece size;
//  - mean: a rank's share of a sample is summed in its row-major order across the pieces,
//    the shares' moments merged sample after sample, then the ranks' in rank order (Chan et
//    al.): the same bits at any piece size, and on every rank; at another rank count the
//    shares differ, so the mean may differ in the last bits;
//  - std: each piece's m2 around its own mean, the pieces' merged one after the other: the
//    same bits as reading the whole share at once when it fits one piece (any share up to
//    64 MiB by default), else equal to rounding (a relative 1e-15 or so); across rank
//    counts as the mean.
ChannelStats scan(const File& f, const std::string& dset, int channel_dim,
                  const Progress& progress = {});
// Collective: writes mean, std, min, max and stats_count attributes.
void write_stats(File& f, const std::string& dset, const ChannelStats& s);
// The channel dim of a dataset by where it sits in the schema (1 under /fields, else 2).
int channel_dim_of(const std::string& dset);

struct Expectation {  // what a caller demands of one dataset on top of the schema
  std::string dataset;
  std::string dtype;         // "" : schema's float32
  std::vector<Index> shape;  // empty: any; -1 entries: any extent
};
// Collective: every violation of the schema, each naming the dataset (and for
// non-finite values the first bad index); empty when the file is good. The rules:
//  - root: tessera_schema_version one integer in 1..kVersion; generator, if present, a string;
//  - datasets only /fields/NAME (directly under /fields), /points/coords, /points/features;
//    float32; fields (N, C, spatial...) with 1 to 3 spatial dims, points (N, P, 3 or C);
//    no empty dim (N >= 1); one N for every dataset, coords and features share (N, P);
//  - attributes only those above; variables (fields, features): C distinct non-empty
//    strings; spacing, extent (fields): one finite number > 0 per spatial dim, and the n
//    nodes of a dim span (n - 1) spacing <= extent; origin: one finite number per dim;
//  - mean, std, min, max: all four or none, C finite numbers each, std >= 0 and
//    min <= mean <= max per channel; stats_count: the values per channel of the dataset;
//  - storage (metadata): written whole: not never written, not partly (h5py's unwritten
//    chunks), so no fill value passes for data;
//  - values (check_values): every one finite.
std::vector<std::string> validate(const File& f, const std::vector<Expectation>& expect = {},
                                  bool check_values = true, const DatasetProgress& progress = {});
// Collective: throws the first problem validate(f, {}, false) finds (the apps' check of
// the files they read: every rule but the scan of values, which loading does).
void require_valid(const File& f);

}  // namespace tessera::io::schema
