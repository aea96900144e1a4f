#include "decomp/fft_stages.hpp"

#include <algorithm>
#include <sstream>

#include "decomp/error.hpp"

namespace tessera {
namespace {

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Index volume(const std::vector<Index>& s) {
  Index v = 1;
  for (Index e : s) v *= e;
  return v;
}

struct Planner {
  const FftLayout& in;
  std::vector<FftStage> out;
  std::vector<Index> shape;
  std::vector<int> placement;
  std::vector<int> done;  // transformed dims

  explicit Planner(const FftLayout& l) : in(l), shape(l.shape), placement(l.axis) {}

  void move(int axis, int from, int to) {
    TESSERA_CHECK(placement[static_cast<std::size_t>(to)] < 0,
                  "FFT plan: dim " << to << " is taken");
    placement[static_cast<std::size_t>(from)] = -1;
    placement[static_cast<std::size_t>(to)] = axis;
    FftStage s;
    s.kind = FftStage::Kind::Move;
    s.dim = from;
    s.to = to;
    s.axis = axis;
    s.shape = shape;
    s.placement = placement;
    out.push_back(s);
  }

  // The whole dim with the largest extent among `cands`, or -1.
  int largest_free(const std::vector<int>& cands, int except) const {
    int best = -1;
    for (int d : cands) {
      if (d == except || placement[static_cast<std::size_t>(d)] >= 0) continue;
      if (best < 0 || shape[static_cast<std::size_t>(d)] > shape[static_cast<std::size_t>(best)])
        best = d;
    }
    return best;
  }

  int landing_for(int dim) const {
    if (int d = largest_free(done, dim); d >= 0) return d;
    std::vector<int> others, todo;
    for (int d = 0; d < static_cast<int>(shape.size()); ++d)
      (contains(in.dims, d) ? todo : others).push_back(d);
    if (int d = largest_free(others, dim); d >= 0) return d;
    std::vector<int> later;
    for (int d : todo)
      if (!contains(done, d)) later.push_back(d);
    return largest_free(later, dim);
  }

  void transform(std::size_t i) {
    const int dim = in.dims[i];
    const auto d = static_cast<std::size_t>(dim);
    // An axis of one rank leaves the dim whole: nothing to move.
    if (const int a = placement[d]; a >= 0 && in.axis_size.at(static_cast<std::size_t>(a)) > 1) {
      const int to = landing_for(dim);
      TESSERA_CHECK(to >= 0, "FFT plan: dim " << dim << " is sharded over mesh axis " << a
                                              << " and every other dim is sharded too; "
                                                 "shard fewer dims than the tensor has");
      move(a, dim, to);
    }
    FftStage s;
    s.kind = FftStage::Kind::Transform;
    s.dim = dim;
    s.real = i + 1 == in.dims.size();
    s.n = shape[d];
    s.kept = kept_extent(s.n, in.modes.empty() ? 0 : in.modes[i], s.real);
    shape[d] = s.kept;
    s.shape = shape;
    s.placement = placement;
    out.push_back(s);
    done.push_back(dim);
  }

  // Moves axes until the placement equals `want` (each move needs a whole target dim).
  void settle(const std::vector<int>& want) {
    for (int round = 0; round < static_cast<int>(shape.size()) + 1; ++round) {
      bool moved = false, left = false;
      for (int a = 0; a < static_cast<int>(in.axis_size.size()); ++a) {
        const int from = index_of(placement, a), to = index_of(want, a);
        if (from == to) continue;
        left = true;
        if (to >= 0 && placement[static_cast<std::size_t>(to)] >= 0) continue;  // wait for it
        TESSERA_CHECK(from >= 0 && to >= 0,
                      "FFT plan: the spectrum layout must keep each mesh axis on some dim");
        move(a, from, to);
        moved = true;
      }
      if (!left) return;
      TESSERA_CHECK(moved,
                    "FFT plan: cannot reach the requested spectrum layout (a cycle of "
                    "axes; request it in two steps)");
    }
  }

  static int index_of(const std::vector<int>& v, int x) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] == x) return static_cast<int>(i);
    return -1;
  }
};

}  // namespace

Index kept_extent(Index n, Index modes, bool real_dim) {
  TESSERA_CHECK(n >= 1 && modes >= 0, "FFT: extent " << n << ", modes " << modes);
  if (real_dim) {
    const Index bins = n / 2 + 1;
    return modes == 0 ? bins : std::min(bins, modes);
  }
  return (modes == 0 || 2 * modes >= n) ? n : 2 * modes;
}

std::vector<FftStage> plan_fft_stages(const FftLayout& in) {
  const std::size_t nd = in.shape.size();
  TESSERA_CHECK(in.axis.size() == nd, "FFT plan: one placement per dim");
  TESSERA_CHECK(!in.dims.empty(), "FFT plan: no dims to transform");
  TESSERA_CHECK(in.modes.empty() || in.modes.size() == in.dims.size(),
                "FFT plan: " << in.modes.size() << " mode counts for " << in.dims.size()
                             << " transformed dims");
  for (int d : in.dims) TESSERA_CHECK(d >= 0 && d < static_cast<int>(nd), "FFT plan: no dim " << d);
  Planner p(in);
  // The real dim first (its input is real), then the whole ones, then those still sharded,
  // each group from the last dim backwards.
  p.transform(in.dims.size() - 1);
  std::vector<std::size_t> order;
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t i = in.dims.size() - 1; i-- > 0;) {
      const bool sharded = in.axis[static_cast<std::size_t>(in.dims[i])] >= 0;
      if (sharded == (pass == 1)) order.push_back(i);
    }
  for (std::size_t i : order) p.transform(i);
  std::vector<int> want = in.spectrum_axis;
  if (want.empty()) {
    // Transposed layout, but an axis the plan parked on a batch/channel dim goes to a
    // transformed dim: the spectral weights mix whole channels per mode.
    want = p.placement;
    for (std::size_t d = 0; d < nd; ++d) {
      const int a = p.placement[d];
      if (a < 0 || contains(in.dims, static_cast<int>(d)) || in.axis[d] == a) continue;
      want[d] = -1;
      int to = -1;
      for (int c : in.dims)
        if (want[static_cast<std::size_t>(c)] < 0 &&
            (to < 0 ||
             p.shape[static_cast<std::size_t>(c)] > p.shape[static_cast<std::size_t>(to)]))
          to = c;
      TESSERA_CHECK(to >= 0, "FFT plan: no transformed dim is free for mesh axis " << a);
      want[static_cast<std::size_t>(to)] = a;
    }
  }
  TESSERA_CHECK(want.size() == nd, "FFT plan: spectrum layout needs one entry per dim");
  // Each entry a mesh axis or -1, no axis on two dims (the second was dropped silently).
  const int axes = static_cast<int>(in.axis_size.size());
  for (std::size_t d = 0; d < nd; ++d) {
    const int a = want[d];
    TESSERA_CHECK(a >= -1 && a < axes, "FFT plan: spectrum layout entry "
                                           << a << " for dim " << d
                                           << " is no mesh axis (the mesh has " << axes
                                           << "; -1: whole)");
    for (std::size_t e = 0; e < d; ++e)
      TESSERA_CHECK(a < 0 || want[e] != a, "FFT plan: spectrum layout puts mesh axis "
                                               << a << " on dims " << e << " and " << d
                                               << "; an axis shards one dim");
  }
  p.settle(want);
  return p.out;
}

std::string describe_fft_stages(const FftLayout& in, const std::vector<FftStage>& stages) {
  auto layout = [](const std::vector<Index>& shape, const std::vector<int>& pl) {
    std::ostringstream o;
    o << "(";
    for (std::size_t d = 0; d < shape.size(); ++d) {
      o << (d ? ", " : "") << shape[d];
      if (pl[d] >= 0) o << "/a" << pl[d];
    }
    return o.str() + ")";
  };
  std::ostringstream o;
  o << "input " << layout(in.shape, in.axis) << "\n";
  for (const FftStage& s : stages) {
    if (s.kind == FftStage::Kind::Move)
      o << "  all-to-all on axis " << s.axis << ": dim " << s.dim << " -> dim " << s.to;
    else
      o << "  " << (s.real ? "r2c" : "c2c") << " dim " << s.dim << ": " << s.n << " points"
        << (s.real ? " -> " + std::to_string(s.n / 2 + 1) + " bins" : std::string()) << ", keep "
        << s.kept;
    o << "  => " << layout(s.shape, s.placement) << "\n";
  }
  return o.str();
}

Index fft_elements_moved(const FftLayout& in, const std::vector<FftStage>& stages) {
  Index moved = 0;
  for (const FftStage& s : stages) {
    if (s.kind != FftStage::Kind::Move) continue;
    const Index p = in.axis_size.at(static_cast<std::size_t>(s.axis));
    moved += volume(s.shape) - volume(s.shape) / p;  // all but the diagonal blocks (balanced)
  }
  return moved;
}

}  // namespace tessera
