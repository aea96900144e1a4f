#include "io/sharded.hpp"

#include <algorithm>

#include "decomp/error.hpp"
#include "runtime/comm/collective_error.hpp"

namespace tessera::io {
namespace {

// Whether this rank is the one that writes its shard: coordinate 0 on every mesh axis
// that shards no dim (the others hold copies of the same cells).
bool writes_its_shard(const Mesh& mesh, const ShardSpec& spec) {
  for (int a = 0; a < mesh.ndim(); ++a)
    if (spec.dim_on_axis(a) < 0 && mesh.coords()[static_cast<std::size_t>(a)] != 0) return false;
  return true;
}

void check_no_partial(const ShardSpec& spec, const std::string& what) {
  TESSERA_CHECK(!spec.has_partial(),
                what << ": the spec has Partial axes; redistribute to Replicate or Shard first");
}

}  // namespace

ShardTensor read_sharded(const File& f, const std::string& dset, const Mesh& mesh,
                         const ShardSpec& spec, DType dtype, const IoOptions& opts,
                         TransferReport* report) {
  check_no_partial(spec, "reading " + f.where(dset));
  f.open_dataset(dset, dtype, spec.global_shape());  // the checks, with clear messages
  const Box box = spec.local_box(mesh.coords());
  Tensor local = Tensor::empty(box.shape(), dtype);
  const TransferReport r = read_box(f, dset, box, local, Box::from_shape(box.shape()), opts);
  if (report) *report = r;
  return ShardTensor::unchecked(mesh, spec, local);
}

HaloTensor read_halo(const File& f, const std::string& dset, const Mesh& mesh,
                     const ShardSpec& spec, const std::vector<Index>& left,
                     const std::vector<Index>& right, DType dtype, const IoOptions& opts,
                     TransferReport* report) {
  check_no_partial(spec, "reading " + f.where(dset));
  HaloTensor h(mesh, spec, left, right, dtype);  // zeroed: ghosts outside stay zero
  const TransferReport r = read_halo_into(f, dset, h, opts);
  if (report) *report = r;
  return h;
}

TransferReport read_halo_into(const File& f, const std::string& dset, const HaloTensor& h,
                              const IoOptions& opts) {
  const ShardSpec& spec = h.spec();
  check_no_partial(spec, "reading " + f.where(dset));
  f.open_dataset(dset, h.padded().dtype(), spec.global_shape());
  const std::vector<Index>& shape = spec.global_shape();
  const int nd = spec.ndim();
  TESSERA_CHECK(opts.periodic.empty() || static_cast<int>(opts.periodic.size()) == nd,
                "reading " << f.where(dset) << " with a halo: " << opts.periodic.size()
                           << " periodic flags for " << nd << " dims");
  // Wrapping dims: a block's ghosts reach up to `reach` domain lengths past an edge (ghosts
  // wider than the domain wrap again, as HaloExchange's do), so the padded box meets the
  // domain shifted by -reach..reach lengths along each. From all blocks' widths, so every
  // rank makes the same reads.
  std::vector<int> wrap;
  std::vector<Index> reach;
  long long combos = 1;
  for (int d = 0; d < nd; ++d) {
    if (opts.periodic.empty() || !opts.periodic[static_cast<std::size_t>(d)]) continue;
    Index w = 0;
    for (int b = 0; b < spec.partition().num_blocks(); ++b)
      w = std::max({w, h.widths().left(b)[static_cast<std::size_t>(d)],
                    h.widths().right(b)[static_cast<std::size_t>(d)]});
    const Index n = shape[static_cast<std::size_t>(d)];
    wrap.push_back(d);
    reach.push_back(n > 0 ? (w + n - 1) / n : 0);
    combos *= 2 * reach.back() + 1;
    TESSERA_CHECK(combos <= 4096, "reading " << f.where(dset)
                                             << " with a periodic halo: the ghosts wrap the domain "
                                                "so often (dim "
                                             << d << ": width " << w << " over extent " << n
                                             << ", with the dims before it) that the read would "
                                                "take more than 4096 shifted pieces");
  }
  const Box domain = Box::from_shape(shape);
  const Box& pb = h.padded_box();
  // One collective read per shift (the same sequence on every rank; empty pieces take
  // part with empty selections): the cells of the shifted domain inside the padded box.
  TransferReport all;
  all.collective = true;
  all.calls = 0;
  for (long long c = 0; c < combos; ++c) {
    std::vector<Index> off(static_cast<std::size_t>(nd), 0);
    long long rest = c;
    for (std::size_t k = 0; k < wrap.size(); ++k) {
      const auto d = static_cast<std::size_t>(wrap[k]);
      const long long span = 2 * reach[k] + 1;
      off[d] = (static_cast<Index>(rest % span) - reach[k]) * shape[d];
      rest /= span;
    }
    const Box piece = intersect(pb, shift(domain, off));
    std::vector<Index> back(off.size());
    for (std::size_t d = 0; d < off.size(); ++d) back[d] = -off[d];
    const TransferReport r =
        read_box(f, dset, shift(piece, back), h.padded(), relative_to(piece, pb), opts);
    all.collective = all.collective && r.collective;
    all.calls += r.calls;
    if (all.mode.empty() || !r.collective) all.mode = r.mode;
    if (!r.cause.empty() && all.cause.find(r.cause) == std::string::npos)
      all.cause += (all.cause.empty() ? "" : "; ") + r.cause;
  }
  return all;
}

std::vector<Index> decomposition_chunk(const ShardSpec& spec, std::size_t elem_size,
                                       std::size_t max_chunk_bytes) {
  std::vector<Index> chunk;
  for (int d = 0; d < spec.ndim(); ++d) {
    Index m = 0;
    for (Index s : spec.sizes(d)) m = std::max(m, s);
    chunk.push_back(std::max<Index>(m, 1));
  }
  auto bytes = [&] {
    std::size_t b = elem_size;
    for (Index c : chunk) b *= static_cast<std::size_t>(c);
    return b;
  };
  for (std::size_t d = 0; d < chunk.size() && bytes() > max_chunk_bytes;) {
    if (chunk[d] > 1)
      chunk[d] = (chunk[d] + 1) / 2;
    else
      ++d;
  }
  return chunk;
}

TransferReport write_sharded(File& f, const std::string& dset, const ShardTensor& t,
                             const WriteOptions& opts) {
  check_no_partial(t.spec(), "writing " + f.where(dset));
  collective_check(f.comm(), !f.exists(dset), f.where(dset) + " exists already", "write_sharded",
                   "the dataset, spec or element type",
                   dset + " " + t.spec().str() + " " + name_of(t.dtype()));
  std::vector<Index> chunk = opts.chunk;
  const bool any_empty = Box::from_shape(t.global_shape()).empty();
  if (chunk == std::vector<Index>{0} || any_empty)
    chunk.clear();
  else if (chunk.empty())
    chunk = decomposition_chunk(t.spec(), size_of(t.dtype()), opts.max_chunk_bytes);
  f.create_dataset(dset, t.global_shape(), t.dtype(), chunk);
  // A dataset without elements has no storage to write to (HDF5 gives it no address).
  if (any_empty) return TransferReport{true, "none (no elements)", "", 0};
  const Tensor local =
      t.local().space() == MemSpace::Host ? t.local().contiguous() : t.local().to(MemSpace::Host);
  const Box box = writes_its_shard(t.mesh(), t.spec()) ? t.local_box() : Box();
  return write_box(f, dset, box, local, box.ndim ? Box::from_shape(box.shape()) : Box(), opts.io);
}

Tensor read_slab(const File& f, const std::string& dset, const Box& box, DType dtype,
                 const IoOptions& opts, TransferReport* report) {
  std::vector<Index> shape = box.shape();
  for (Index& s : shape) s = std::max<Index>(s, 0);
  Tensor t = Tensor::empty(shape, dtype);
  const TransferReport r = read_box(f, dset, box, t, Box::from_shape(shape), opts);
  if (report) *report = r;
  return t;
}

Tensor read_points(const File& f, const std::string& dset, Index sample, Index begin, Index end,
                   DType dtype, const IoOptions& opts) {
  const DatasetInfo in = f.info(dset);
  collective_check(
      f.comm(), in.shape.size() == 3,
      f.where(dset) + " is not a point-cloud dataset (N, P, C): shape " + shape_str(in.shape));
  const Index C = in.shape[2];
  Tensor t = read_slab(f, dset, Box({sample, begin, 0}, {sample + 1, end, C}), dtype, opts);
  return t.reshape({std::max<Index>(end - begin, 0), C});
}

std::pair<Index, Index> balanced_range(Index count, int nranks, int rank) {
  const Index base = count / nranks, extra = count % nranks;
  const Index b = rank * base + std::min<Index>(rank, extra);
  return {b, b + base + (rank < extra ? 1 : 0)};
}

}  // namespace tessera::io
