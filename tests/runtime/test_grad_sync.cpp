// Bucketed gradient sync: the result equals the exact sum over the summed axes and
// mean over the averaged axes (values chosen so every order of summation is exact),
// for 1-D and domain x data meshes, bucket sizes from one parameter per bucket to one
// bucket, mixed float32/float64, ranks marking parameters in different orders, partial
// marking finished by finish(), repeated steps, and collective errors.
#include <algorithm>
#include <climits>
#include <memory>
#include <numeric>
#include <random>

#include "runtime/comm/grad_sync.hpp"
#include "runtime/comm/message_pieces.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/expect_error.hpp"

using namespace tessera;

namespace {

std::vector<Mesh> sync_meshes(MPI_Comm comm) {
  int P = 1;
  MPI_Comm_size(comm, &P);
  std::vector<Mesh> m;
  m.push_back(Mesh(comm, {P}, {"domain"}));
  for (int dp = 1; dp <= P; ++dp)
    if (P % dp == 0) m.push_back(Mesh(comm, {P / dp, dp}, {"domain", "data"}));
  return m;
}

// The gradient value rank `rank` contributes for element i of parameter k at step s:
// small integers, so sums are exact in float32 and float64 in any order.
double contribution(int rank, std::size_t k, Index i, int s) {
  return static_cast<double>((rank * 7 + static_cast<int>(k) * 3 + static_cast<int>(i % 13) + s) %
                             11) -
         5;
}

struct Params {
  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<Parameter*> ptrs;
};

Params make_params(std::mt19937& rng) {
  Params p;
  const int n = 1 + static_cast<int>(rng() % 9);
  for (int k = 0; k < n; ++k) {
    auto q = std::make_unique<Parameter>();
    q->name.append("p").append(
        std::to_string(k));  // ("p" + s trips a GCC 12 -Wrestrict false positive)
    const DType dt = rng() % 3 == 0 ? DType::f32 : DType::f64;
    std::vector<Index> shape = {1 + static_cast<Index>(rng() % 5),
                                1 + static_cast<Index>(rng() % 7)};
    q->value = Tensor::zeros(shape, dt);
    q->grad = Tensor::zeros(shape, dt);
    p.ptrs.push_back(q.get());
    p.owned.push_back(std::move(q));
  }
  return p;
}

void fill(const Params& p, int rank, int step) {
  for (std::size_t k = 0; k < p.ptrs.size(); ++k) {
    const Tensor& g = p.ptrs[k]->grad;
    for (Index i = 0; i < g.numel(); ++i) {
      const double v = contribution(rank, k, i, step);
      if (g.dtype() == DType::f64)
        g.data<double>()[i] = v;
      else
        g.data<float>()[i] = static_cast<float>(v);
    }
  }
}

// The exact reduced gradient: sum over ranks differing from this one only in the
// summed or averaged axes, divided by the product of the averaged axes' sizes.
bool matches_exact(const Mesh& mesh, const Params& p, const std::vector<int>& sum_axes,
                   const std::vector<int>& mean_axes, int step) {
  std::vector<int> group;
  for (int r = 0; r < mesh.size(); ++r) {
    const auto c = mesh.coords_of(r);
    bool same = true;
    for (int a = 0; a < mesh.ndim(); ++a) {
      const bool reduced = std::count(sum_axes.begin(), sum_axes.end(), a) ||
                           std::count(mean_axes.begin(), mean_axes.end(), a);
      if (!reduced && c[a] != mesh.coords()[a]) same = false;
    }
    if (same) group.push_back(r);
  }
  double div = 1;
  for (int a : mean_axes) div *= mesh.dim(a);
  for (std::size_t k = 0; k < p.ptrs.size(); ++k) {
    const Tensor& g = p.ptrs[k]->grad;
    for (Index i = 0; i < g.numel(); ++i) {
      double want = 0;
      for (int r : group) want += contribution(r, k, i, step);
      want /= div;
      const double got = g.dtype() == DType::f64 ? g.data<double>()[i] : g.data<float>()[i];
      // Sums are exact; a mean multiplies by 1/size, which may round (1 ulp) when size is 3.
      const double tol = (g.dtype() == DType::f64 ? 1e-15 : 1e-6) * std::max(1.0, std::abs(want));
      if (std::abs(got - want) > tol) return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("grad sync equals the exact sum over domain and mean over data", "[grad_sync]") {
  std::mt19937 shared_rng(5);  // same on every rank
  int cases = 0;
  for (const Mesh& mesh : sync_meshes(MPI_COMM_WORLD)) {
    std::vector<std::pair<std::vector<int>, std::vector<int>>> configs = {{{0}, {}}};
    if (mesh.ndim() == 2) configs = {{{0}, {1}}, {{0, 1}, {}}, {{}, {1}}, {{1}, {}}};
    for (const auto& [sum_axes, mean_axes] : configs) {
      for (std::size_t bucket : {std::size_t{1}, std::size_t{100}, std::size_t{1} << 20}) {
        Params p = make_params(shared_rng);
        INFO("mesh " << mesh.str() << " sum " << sum_axes.size() << " mean " << mean_axes.size()
                     << " bucket " << bucket << " params " << p.ptrs.size());
        GradSync sync(mesh, p.ptrs, GradSyncOptions{sum_axes, mean_axes, bucket});

        // Layout: each parameter in one bucket, reverse order, one dtype per bucket,
        // within the byte limit unless alone.
        std::vector<int> seen;
        for (const auto& b : sync.bucket_layout()) {
          std::size_t bytes = 0;
          for (int k : b) {
            seen.push_back(k);
            bytes += p.ptrs[static_cast<std::size_t>(k)]->grad.nbytes();
            MPI_CHECK(p.ptrs[static_cast<std::size_t>(k)]->grad.dtype() ==
                      p.ptrs[static_cast<std::size_t>(b.front())]->grad.dtype());
          }
          MPI_CHECK((b.size() == 1 || bytes <= bucket));
        }
        std::vector<int> reversed(p.ptrs.size());
        std::iota(reversed.rbegin(), reversed.rend(), 0);
        MPI_CHECK(seen == reversed);

        std::mt19937 local_rng(
            static_cast<unsigned>(mesh.rank() * 1000 + cases));  // differs per rank
        for (int step = 0; step < 3; ++step) {
          fill(p, mesh.rank(), step);
          std::vector<Parameter*> order = p.ptrs;
          std::shuffle(order.begin(), order.end(), local_rng);
          if (step == 0) {
            sync.sync();
          } else {
            // Mark all (step 1) or only some (step 2; finish() starts the rest).
            const std::size_t marked = step == 1 ? order.size() : order.size() / 2;
            for (std::size_t i = 0; i < marked; ++i) sync.mark_ready(order[i]);
            sync.finish();
          }
          MPI_CHECK(matches_exact(mesh, p, sum_axes, mean_axes, step));
        }
        // Three steps: every bucket all-reduced once per step, all gradient bytes moved.
        std::int64_t bytes = 0;
        for (const Parameter* q : p.ptrs) bytes += static_cast<std::int64_t>(q->grad.nbytes());
        const bool reduces = sync.bucket_layout().empty() ? false : true;
        const int group = [&] {
          int n = 1;
          for (int a : sum_axes) n *= mesh.dim(a);
          for (int a : mean_axes) n *= mesh.dim(a);
          return n;
        }();
        if (reduces && group > 1) {
          // Once per bucket (each bucket's run is one piece, runtime/comm/message_pieces); the
          // .p2p entry lowers the count limit to 5, so runs go as several all-reduces.
          const Index piece = piece_units(MPI_FLOAT);
          Index elems = 0;
          for (const Parameter* q : p.ptrs) elems += q->grad.numel();
          const Index pieces = (elems + piece - 1) / piece;  // at least, over all runs
          if (mpi_count_limit() == INT_MAX)
            MPI_CHECK(sync.stats().allreduces == 3 * sync.num_buckets());
          else
            MPI_CHECK(sync.stats().allreduces >= 3 * std::max<Index>(sync.num_buckets(), pieces));
          MPI_CHECK(sync.stats().bytes == 3 * bytes);
          MPI_CHECK(sync.stats().seconds >= sync.stats().wait_seconds);
        } else {
          MPI_CHECK(sync.stats().allreduces == 0);  // a group of one moves nothing
        }
        sync.reset_stats();
        MPI_CHECK(sync.stats().bytes == 0);
        ++cases;
      }
    }
  }
  MPI_REQUIRE(cases > 0);
}

TEST_CASE("grad sync reports bad use on every rank", "[grad_sync]") {
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  Parameter a{"a", Tensor::zeros({3}, DType::f64), Tensor::zeros({3}, DType::f64)};
  Parameter wrong{"wrong", Tensor::zeros({3}, DType::f64), Tensor::zeros({4}, DType::f64)};
  Parameter ints{"ints", Tensor::zeros({3}, DType::i64), Tensor::zeros({3}, DType::i64)};
  MPI_CHECK_ERROR(GradSync(mesh, {&a, &wrong}, {}), "'wrong' has no gradient");
  MPI_CHECK_ERROR(GradSync(mesh, {&ints}, {}), "float32 or float64");
  MPI_CHECK_ERROR(GradSync(mesh, {&a, &a}, {}), "'a' is registered twice");
  MPI_CHECK_ERROR(GradSync(mesh, {&a}, GradSyncOptions{{0}, {0}, 1024}),
                  "both summed and averaged");
  MPI_CHECK_ERROR(GradSync(mesh, {&a}, GradSyncOptions{{3}, {}, 1024}), "out of range");
  // Rank 0 registers one parameter more than the others.
  if (mesh.size() > 1) {
    std::vector<Parameter*> list = {&a};
    Parameter extra{"extra", Tensor::zeros({2}, DType::f64), Tensor::zeros({2}, DType::f64)};
    if (mesh.rank() == 0) list.push_back(&extra);
    MPI_CHECK_ERROR(GradSync(mesh, list, {}), "different parameter lists");
  }
  GradSync sync(mesh, {&a}, GradSyncOptions{{0}, {}, 1024});
  sync.mark_ready(&a);
  MPI_CHECK_ERROR(sync.mark_ready(&a), "marked twice");
  sync.finish();
  MPI_CHECK_ERROR(sync.mark_ready(&wrong), "not registered");
}
