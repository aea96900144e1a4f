// Per-thread caches of oneDNN matmul primitives. A primitive is planned and run with the
// calling thread's OpenMP thread count set to one, so oneDNN neither splits the product's
// inner dimension across threads nor starts a nested team inside the caller's parallel
// region. Both: the brgemm matmul (AVX-512) fixes its threads when planned, but the gemm-based
// one (AVX2 only: oneDNN 2.6's "gemm:jit") takes them when run, and a lone call outside a
// parallel region, with two threads, gave other bits than the same call inside a team.
#include "kernels/cpu/tile_sgemm.hpp"

#include <omp.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "decomp/error.hpp"

namespace tessera::kernels::cpu {
namespace {

struct Key {
  char ta, tb;
  Index m, n, k, lda, ldb, ldc;
  float alpha, beta;
  bool operator==(const Key&) const = default;
};

struct Planned {
  Key key;
  dnnl::matmul product;
  dnnl::memory a, b, c;
};

// Shapes per thread: full tiles and the tails of a few sequence lengths and scales. Past
// the bound the oldest plans go (a layer's shapes repeat every step, so this rarely fires).
constexpr std::size_t kMaxPlans = 48;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Planned plan(const Key& key) {
  using dnnl::memory;
  using dt = memory::data_type;
  const memory::desc a({key.m, key.k}, dt::f32,
                       key.ta == 'N' ? memory::dims{key.lda, 1} : memory::dims{1, key.lda});
  const memory::desc b({key.k, key.n}, dt::f32,
                       key.tb == 'N' ? memory::dims{key.ldb, 1} : memory::dims{1, key.ldb});
  const memory::desc c({key.m, key.n}, dt::f32, memory::dims{key.ldc, 1});
  dnnl::primitive_attr attr;
  if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
  if (key.beta == 1.0f) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);  // this thread's setting only, restored below
  try {
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine());
    Planned p{key, dnnl::matmul(pd), memory(a, engine(), nullptr), memory(b, engine(), nullptr),
              memory(c, engine(), nullptr)};
    omp_set_num_threads(threads);
    return p;
  } catch (const dnnl::error& e) {
    omp_set_num_threads(threads);
    std::ostringstream os;
    os << "tile_sgemm: oneDNN cannot plan a " << key.m << " x " << key.n << " x " << key.k
       << " product (" << e.what() << ")";
    throw Error(os.str());
  }
}

}  // namespace

void tile_sgemm(char ta, char tb, Index m, Index n, Index k, float alpha, const float* a, Index lda,
                const float* b, Index ldb, float beta, float* c, Index ldc) {
  TESSERA_CHECK((ta == 'N' || ta == 'T') && (tb == 'N' || tb == 'T'),
                "tile_sgemm: transposes are 'N' or 'T'");
  TESSERA_CHECK(beta == 0.0f || beta == 1.0f, "tile_sgemm: beta is 0 or 1, not " << beta);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty product: C = beta C
    if (beta == 0.0f)
      for (Index i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  thread_local std::vector<Planned> plans;
  thread_local dnnl::stream stream(engine());
  const Key key{ta, tb, m, n, k, lda, ldb, ldc, alpha, beta};
  auto it =
      std::find_if(plans.begin(), plans.end(), [&](const Planned& p) { return p.key == key; });
  if (it == plans.end()) {
    if (plans.size() == kMaxPlans) plans.erase(plans.begin());
    plans.push_back(plan(key));
    it = plans.end() - 1;
  }
  it->a.set_data_handle(const_cast<float*>(a));
  it->b.set_data_handle(const_cast<float*>(b));
  it->c.set_data_handle(c);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);  // this thread's setting only, restored below
  try {
    it->product.execute(stream,
                        {{DNNL_ARG_SRC, it->a}, {DNNL_ARG_WEIGHTS, it->b}, {DNNL_ARG_DST, it->c}});
  } catch (...) {
    omp_set_num_threads(threads);
    throw;
  }
  omp_set_num_threads(threads);
}

}  // namespace tessera::kernels::cpu
