// Local attention kernels against a naive float64 reference (dense softmax), forward (output
// and LSE) and every gradient (q, k, v, bias), with odd lengths, causal blocks with offsets,
// additive biases with masked entries (broadcast and per problem), rows with no visible key,
// float64 and float32; the reference's gradients against finite differences; and the LSE
// merge of two key halves equal to attention over all keys.
#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/env_choice.hpp"
#include "tests/support/random_values.hpp"

using namespace tessera;
using namespace tessera::kernels;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

struct Ref {
  std::vector<double> out, lse, dq, dk, dv, dbias;
};

// Dense attention and its gradients for loss <out, dout>.
Ref reference(const AttentionDesc& a, const std::vector<double>& q, const std::vector<double>& k,
              const std::vector<double>& v, const std::vector<double>* bias,
              const std::vector<double>& dout) {
  const double sc = a.effective_scale();
  Ref r;
  r.out.assign(static_cast<std::size_t>(a.batch * a.sq * a.d), 0);
  r.lse.assign(static_cast<std::size_t>(a.batch * a.sq), -kInf);
  r.dq.assign(r.out.size(), 0);
  r.dk.assign(static_cast<std::size_t>(a.batch * a.sk * a.d), 0);
  r.dv.assign(r.dk.size(), 0);
  r.dbias.assign(static_cast<std::size_t>(a.batch * a.sq * a.sk), 0);
  for (Index b = 0; b < a.batch; ++b)
    for (Index i = 0; i < a.sq; ++i) {
      std::vector<double> s(static_cast<std::size_t>(a.sk), -kInf), p(s.size(), 0);
      double mx = -kInf;
      for (Index j = 0; j < a.sk; ++j) {
        if (a.causal && j + a.k_offset > i + a.q_offset) continue;
        double x = 0;
        for (Index e = 0; e < a.d; ++e)
          x += q[(b * a.sq + i) * a.d + e] * k[(b * a.sk + j) * a.d + e];
        x *= sc;
        if (bias) x += (*bias)[b * a.bias_batch_stride + i * a.sk + j];
        s[j] = x;
        mx = std::max(mx, x);
      }
      if (mx == -kInf) continue;
      double z = 0;
      for (Index j = 0; j < a.sk; ++j) z += p[j] = std::exp(s[j] - mx);
      const Index row = b * a.sq + i;
      r.lse[row] = mx + std::log(z);
      for (Index j = 0; j < a.sk; ++j) p[j] /= z;
      for (Index j = 0; j < a.sk; ++j)
        for (Index e = 0; e < a.d; ++e) r.out[row * a.d + e] += p[j] * v[(b * a.sk + j) * a.d + e];
      double di = 0;
      for (Index e = 0; e < a.d; ++e) di += dout[row * a.d + e] * r.out[row * a.d + e];
      for (Index j = 0; j < a.sk; ++j) {
        double dp = 0;
        for (Index e = 0; e < a.d; ++e) dp += dout[row * a.d + e] * v[(b * a.sk + j) * a.d + e];
        const double ds = p[j] * (dp - di);
        r.dbias[row * a.sk + j] = ds;
        for (Index e = 0; e < a.d; ++e) {
          r.dq[row * a.d + e] += sc * ds * k[(b * a.sk + j) * a.d + e];
          r.dk[(b * a.sk + j) * a.d + e] += sc * ds * q[row * a.d + e];
          r.dv[(b * a.sk + j) * a.d + e] += p[j] * dout[row * a.d + e];
        }
      }
    }
  return r;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;  // equal infinities too
    m = std::max(m, std::abs(a[i] - b[i]));
  }
  return m;
}

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}
template <class T>
std::vector<double> back(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

template <class T>
void check_case(AttentionDesc a, bool with_bias, bool broadcast, double tol,
                Index masked_prefix = 0) {
  a.type = std::is_same_v<T, double> ? DType::f64 : DType::f32;
  const auto q = test::random_values(static_cast<std::size_t>(a.batch * a.sq * a.d), 1);
  const auto k = test::random_values(static_cast<std::size_t>(a.batch * a.sk * a.d), 2);
  const auto v = test::random_values(static_cast<std::size_t>(a.batch * a.sk * a.d), 3);
  const auto dout = test::random_values(static_cast<std::size_t>(a.batch * a.sq * a.d), 4);
  std::vector<double> bias;
  if (with_bias) {
    bias =
        test::random_values(static_cast<std::size_t>((broadcast ? 1 : a.batch) * a.sq * a.sk), 5);
    for (std::size_t i = 0; i < bias.size(); i += 3) bias[i] = -kInf;  // masked entries
    if (a.sq > 1)  // a row that sees no key at all
      for (Index j = 0; j < a.sk; ++j) bias[static_cast<std::size_t>(1 * a.sk + j)] = -kInf;
    if (a.sq > 2)  // a row that sees keys only past the first masked_prefix
      for (Index j = 0; j < std::min(masked_prefix, a.sk); ++j)
        bias[static_cast<std::size_t>(2 * a.sk + j)] = -kInf;
    a.bias_batch_stride = broadcast ? 0 : a.sq * a.sk;
  }
  const Ref ref = reference(a, q, k, v, with_bias ? &bias : nullptr, dout);
  const auto qt = as<T>(q), kt = as<T>(k), vt = as<T>(v), dt = as<T>(dout), bt = as<T>(bias);
  a.bias = with_bias ? bt.data() : nullptr;
  std::vector<T> out(ref.out.size()), dq(ref.dq.size()), dk(ref.dk.size()), dv(ref.dv.size()),
      db(ref.dbias.size());
  std::vector<double> lse(ref.lse.size());
  attention_forward(Device::host(), a, qt.data(), kt.data(), vt.data(), out.data(), lse.data());
  CHECK(max_diff(back(out), ref.out) < tol);
  CHECK(max_diff(lse, ref.lse) < tol);
  attention_backward(Device::host(), a, qt.data(), kt.data(), vt.data(), out.data(), dt.data(),
                     lse.data(), dq.data(), dk.data(), dv.data(), with_bias ? db.data() : nullptr);
  CHECK(max_diff(back(dq), ref.dq) < tol);
  CHECK(max_diff(back(dk), ref.dk) < tol);
  CHECK(max_diff(back(dv), ref.dv) < tol);
  if (with_bias) CHECK(max_diff(back(db), ref.dbias) < tol);
}

}  // namespace

TEST_CASE("attention equals the dense reference, forward and backward") {
  for (bool causal : {false, true})
    for (int variant = 0; variant < 3; ++variant) {
      AttentionDesc a;
      a.batch = 3;
      a.sq = 37;   // more than one row tile, odd
      a.sk = 131;  // more than one key block, odd
      a.d = 5;
      a.causal = causal;
      a.q_offset = causal ? 100 : 0;  // a query block late in the sequence
      INFO("causal " << causal << ", bias variant " << variant);
      check_case<double>(a, variant > 0, variant == 1, 1e-12);
      check_case<float>(a, variant > 0, variant == 1, 2e-5);
    }
}

TEST_CASE("float32 attention over several row tiles and key blocks (the online softmax)") {
  // The float32 path works on tiles of 128 rows x 512 keys: 133 queries and 4133 keys make
  // two row tiles and nine key blocks, with rows whose first eight blocks are all masked (by
  // the bias) or whose last one is (causally), so the running maximum starts late or a block
  // adds nothing.
  for (bool causal : {false, true}) {
    AttentionDesc a;
    a.batch = 1;
    a.sq = 133;
    a.sk = 4133;
    a.d = 6;
    a.causal = causal;
    a.q_offset = causal ? 4000 : 0;  // rows below 96 see none of the second block
    INFO("causal " << causal);
    check_case<float>(a, true, false, 2e-5, 4096);
    check_case<float>(a, false, false, 2e-5);
  }
}

TEST_CASE("float32 attention with sharp scores: underflowing probabilities, exact zeros") {
  // A scale of 60 spreads each row's scores over hundreds, so most probabilities underflow
  // float32 (the exponential's argument passes -127 in log2 units): they must come out 0, as
  // the dense reference's do in effect, masked keys' gradients exactly 0, and the rest stay
  // accurate relative to each result's size (the gradients grow with the scale).
  AttentionDesc a;
  a.batch = 2;
  a.sq = 70;
  a.sk = 600;  // two key blocks
  a.d = 6;
  a.scale = 60;
  a.type = DType::f32;
  const auto q = test::random_values(static_cast<std::size_t>(a.batch * a.sq * a.d), 11);
  const auto k = test::random_values(static_cast<std::size_t>(a.batch * a.sk * a.d), 12);
  const auto v = test::random_values(static_cast<std::size_t>(a.batch * a.sk * a.d), 13);
  const auto dout = test::random_values(static_cast<std::size_t>(a.batch * a.sq * a.d), 14);
  auto bias = test::random_values(static_cast<std::size_t>(a.batch * a.sq * a.sk), 15);
  for (std::size_t i = 0; i < bias.size(); i += 7) bias[i] = -kInf;
  a.bias_batch_stride = a.sq * a.sk;
  const Ref ref = reference(a, q, k, v, &bias, dout);
  const auto qt = as<float>(q), kt = as<float>(k), vt = as<float>(v), dt = as<float>(dout),
             bt = as<float>(bias);
  a.bias = bt.data();
  std::vector<float> out(ref.out.size()), dq(ref.dq.size()), dk(ref.dk.size()), dv(ref.dv.size()),
      db(ref.dbias.size());
  std::vector<double> lse(ref.lse.size());
  attention_forward(Device::host(), a, qt.data(), kt.data(), vt.data(), out.data(), lse.data());
  attention_backward(Device::host(), a, qt.data(), kt.data(), vt.data(), out.data(), dt.data(),
                     lse.data(), dq.data(), dk.data(), dv.data(), db.data());
  const auto relative = [](const std::vector<double>& x, const std::vector<double>& r) {
    double scale = 0;
    for (double e : r) scale = std::max(scale, std::abs(e));
    return max_diff(x, r) / std::max(scale, 1e-300);
  };
  CHECK(relative(back(out), ref.out) < 1e-4);
  CHECK(max_diff(lse, ref.lse) < 1e-4);  // the LSE itself is in the hundreds
  CHECK(relative(back(dq), ref.dq) < 1e-4);
  CHECK(relative(back(dk), ref.dk) < 1e-4);
  CHECK(relative(back(dv), ref.dv) < 1e-4);
  CHECK(relative(back(db), ref.dbias) < 1e-4);
  std::size_t masked_nonzero = 0, underflowed = 0;
  for (std::size_t i = 0; i < bias.size(); ++i) {
    if (bias[i] == -kInf && db[i] != 0.0f) ++masked_nonzero;
    if (bias[i] != -kInf && db[i] == 0.0f) ++underflowed;
  }
  CHECK(masked_nonzero == 0);
  CHECK(underflowed > bias.size() / 4);  // the case does reach the underflow
}

TEST_CASE("float32 attention gives the same bits at every thread count") {
  // Two problems of 300 queries (three row tiles) and 2100 keys (five key blocks), causal: no
  // thread count may change a bit of any result (a run must not depend on OMP_NUM_THREADS).
  AttentionDesc a;
  a.batch = 2;
  a.sq = 300;
  a.sk = 2100;
  a.d = 8;
  a.causal = true;
  a.q_offset = 1900;
  const auto q = as<float>(test::random_values(static_cast<std::size_t>(a.batch * a.sq * a.d), 1));
  const auto k = as<float>(test::random_values(static_cast<std::size_t>(a.batch * a.sk * a.d), 2));
  const auto v = as<float>(test::random_values(static_cast<std::size_t>(a.batch * a.sk * a.d), 3));
  const auto dout =
      as<float>(test::random_values(static_cast<std::size_t>(a.batch * a.sq * a.d), 4));
  auto run = [&](int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> out(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
    std::vector<double> lse(static_cast<std::size_t>(a.batch * a.sq));
    attention_forward(Device::host(), a, q.data(), k.data(), v.data(), out.data(), lse.data());
    attention_backward(Device::host(), a, q.data(), k.data(), v.data(), out.data(), dout.data(),
                       lse.data(), dq.data(), dk.data(), dv.data());
    omp_set_num_threads(before);
    return std::vector<std::vector<float>>{out, dq, dk, dv};
  };
  const auto one = run(1);
  for (int threads : {2, 3}) {
    INFO(threads << " threads");
    const auto many = run(threads);
    for (std::size_t r = 0; r < one.size(); ++r) CHECK(many[r] == one[r]);
  }
}

TEST_CASE("the reference's gradients are the loss's finite differences") {
  AttentionDesc a;
  a.batch = 1;
  a.sq = 3;
  a.sk = 4;
  a.d = 2;
  a.type = DType::f64;
  auto q = test::random_values(6, 1), k = test::random_values(8, 2), v = test::random_values(8, 3);
  const auto dout = test::random_values(6, 4);
  const Ref r = reference(a, q, k, v, nullptr, dout);
  auto loss = [&] {
    const Ref x = reference(a, q, k, v, nullptr, dout);
    double s = 0;
    for (std::size_t i = 0; i < x.out.size(); ++i) s += x.out[i] * dout[i];
    return s;
  };
  const double h = 1e-6;
  for (auto [vec, grad] : {std::pair{&q, &r.dq}, std::pair{&k, &r.dk}, std::pair{&v, &r.dv}})
    for (std::size_t i = 0; i < vec->size(); ++i) {
      const double x0 = (*vec)[i];
      (*vec)[i] = x0 + h;
      const double lp = loss();
      (*vec)[i] = x0 - h;
      const double lm = loss();
      (*vec)[i] = x0;
      CHECK(std::abs((lp - lm) / (2 * h) - (*grad)[i]) < 1e-8);
    }
}

TEST_CASE("the LSE merge of two key halves equals attention over all keys") {
  for (bool causal : {false, true}) {
    AttentionDesc a;
    a.batch = 2;
    a.sq = 9;
    a.sk = 10;
    a.d = 4;
    a.type = DType::f64;
    a.causal = causal;
    const auto q = test::random_values(72, 1), k = test::random_values(80, 2),
               v = test::random_values(80, 3);
    std::vector<double> whole(72), lw(18);
    attention_forward(Device::host(), a, q.data(), k.data(), v.data(), whole.data(), lw.data());
    // Keys [0, 6) and [6, 10) separately (the causal rule on global positions), merged.
    std::vector<double> k1, k2, v1, v2;
    for (Index b = 0; b < 2; ++b)
      for (Index j = 0; j < 10; ++j)
        for (Index e = 0; e < 4; ++e) {
          const double kv = k[(b * 10 + j) * 4 + e], vv = v[(b * 10 + j) * 4 + e];
          (j < 6 ? k1 : k2).push_back(kv);
          (j < 6 ? v1 : v2).push_back(vv);
        }
    AttentionDesc h1 = a, h2 = a;
    h1.sk = 6;
    h2.sk = 4;
    h2.k_offset = 6;
    std::vector<double> o1(72), o2(72), l1(18), l2(18);
    attention_forward(Device::host(), h1, q.data(), k1.data(), v1.data(), o1.data(), l1.data());
    attention_forward(Device::host(), h2, q.data(), k2.data(), v2.data(), o2.data(), l2.data());
    attention_merge(Device::host(), DType::f64, 2, 9, 4, o1.data(), l1.data(), o2.data(),
                    l2.data());
    CHECK(max_diff(o1, whole) < 1e-13);
    CHECK(max_diff(l1, lw) < 1e-13);
  }
}

// Which entries of a (rows, d) result are NaN, row by row: 1 where any entry of the row is.
template <class T>
std::vector<int> nan_rows(const std::vector<T>& x, Index d) {
  std::vector<int> r(x.size() / static_cast<std::size_t>(d), 0);
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::isnan(static_cast<double>(x[i]))) r[i / static_cast<std::size_t>(d)] = 1;
  return r;
}

// A NaN in q, k or the bias: its rows are NaN (output, LSE, dq) as in the whole-row softmax
// (PyTorch's too), and every key they see gets NaN gradients; rows that do not see it (causal)
// stay finite. Partial results over key halves merge to the same pattern: a NaN LSE propagates.
template <class T>
void nan_case(bool causal) {
  AttentionDesc a;
  a.batch = 1;
  a.sq = 6;
  a.sk = 600;  // several key blocks on both paths
  a.d = 4;
  a.causal = causal;
  a.q_offset = 596;  // causal: row i sees keys j <= 596 + i
  a.type = std::is_same_v<T, double> ? DType::f64 : DType::f32;
  const auto q0 = as<T>(test::random_values(24, 1)), k0 = as<T>(test::random_values(2400, 2)),
             v = as<T>(test::random_values(2400, 3)), dout = as<T>(test::random_values(24, 4));
  auto run = [&](const std::vector<T>& q, const std::vector<T>& k, Index sk, Index k_off,
                 const T* kp, const T* vp) {
    AttentionDesc h = a;
    h.sk = sk;
    h.k_offset = k_off;
    std::vector<T> out(24);
    std::vector<double> lse(6);
    attention_forward(Device::host(), h, q.data(), kp ? kp : k.data(), vp ? vp : v.data(),
                      out.data(), lse.data());
    return std::make_pair(out, lse);
  };
  {  // a NaN query row: that row alone; every key it sees gets NaN gradients
    auto q = q0;
    q[2 * 4 + 1] = std::numeric_limits<T>::quiet_NaN();
    const auto [out, lse] = run(q, k0, 600, 0, nullptr, nullptr);
    CHECK(nan_rows(out, 4) == std::vector<int>{0, 0, 1, 0, 0, 0});
    CHECK(std::isnan(lse[2]));
    CHECK(std::isfinite(lse[3]));
    std::vector<T> dq(24), dk(2400), dv(2400);
    attention_backward(Device::host(), a, q.data(), k0.data(), v.data(), out.data(), dout.data(),
                       lse.data(), dq.data(), dk.data(), dv.data(), nullptr);
    CHECK(nan_rows(dq, 4) == std::vector<int>{0, 0, 1, 0, 0, 0});
    const auto dk_rows = nan_rows(dk, 4), dv_rows = nan_rows(dv, 4);
    for (Index j : {0, 300, 598}) {  // row 2 sees keys <= 598 when causal
      CHECK(dk_rows[static_cast<std::size_t>(j)] == 1);
      CHECK(dv_rows[static_cast<std::size_t>(j)] == 1);
    }
    if (causal) CHECK(dv_rows[599] == 0);  // seen by rows 3 to 5 only, all finite
  }
  {  // a NaN key at 597: every row that sees it (causal: rows 1 to 5), in one pass or merged
    auto k = k0;
    k[597 * 4 + 3] = std::numeric_limits<T>::quiet_NaN();
    const auto [out, lse] = run(q0, k, 600, 0, nullptr, nullptr);
    const std::vector<int> seen =
        causal ? std::vector<int>{0, 1, 1, 1, 1, 1} : std::vector<int>{1, 1, 1, 1, 1, 1};
    CHECK(nan_rows(out, 4) == seen);
    // The gradients: every row that sees the key, and the key itself (the entries of masked
    // pairs may be NaN too: the float32 path's GEMMs multiply their zeros by NaN).
    std::vector<T> dq(24), dk(2400), dv(2400);
    attention_backward(Device::host(), a, q0.data(), k.data(), v.data(), out.data(), dout.data(),
                       lse.data(), dq.data(), dk.data(), dv.data(), nullptr);
    const auto dq_rows = nan_rows(dq, 4);
    for (std::size_t i = 0; i < 6; ++i)
      if (seen[i]) CHECK(dq_rows[i] == 1);
    CHECK(nan_rows(dk, 4)[597] == 1);
    CHECK(nan_rows(dv, 4)[597] == 1);
    auto [o1, l1] = run(q0, k, 400, 0, nullptr, nullptr);
    auto [o2, l2] = run(q0, k, 200, 400, k.data() + 1600, v.data() + 1600);
    attention_merge(Device::host(), a.type, 1, 6, 4, o1.data(), l1.data(), o2.data(), l2.data());
    CHECK(nan_rows(o1, 4) == seen);
    for (std::size_t i = 0; i < 6; ++i) CHECK(std::isnan(l1[i]) == (seen[i] == 1));
  }
}

TEST_CASE("a NaN in q or k makes the rows that see it NaN, merged or not, as PyTorch's") {
  for (bool causal : {false, true}) {
    nan_case<double>(causal);
    nan_case<float>(causal);
  }
}

TEST_CASE("attention refuses bad arguments") {
  AttentionDesc a;
  a.type = DType::c64;
  a.sq = a.sk = a.d = 1;
  double x = 0, l = 0;
  CHECK_THROWS_WITH(attention_forward(Device::host(), a, &x, &x, &x, &x, &l),
                    Catch::Contains("float32 or float64"));
  a.type = DType::f64;
  a.d = 0;
  CHECK_THROWS_WITH(attention_forward(Device::host(), a, &x, &x, &x, &x, &l),
                    Catch::Contains("bad shape"));
}

TEST_CASE("a kernel path's environment variable takes only its named values") {
  const char* var = "TESSERA_TEST_KERNEL_CHOICE";
  unsetenv(var);
  CHECK(env_choice(var, {"gemm", "fused"}) == 0);  // unset: the first, the default
  setenv(var, "fused", 1);
  CHECK(env_choice(var, {"gemm", "fused"}) == 1);
  setenv(var, "Fused", 1);  // no guessing: names are exact
  CHECK_THROWS_WITH(env_choice(var, {"gemm", "fused", "auto"}),
                    Catch::Contains("TESSERA_TEST_KERNEL_CHOICE is 'Fused': gemm, fused or auto"));
  setenv(var, "", 1);
  CHECK_THROWS_WITH(env_choice(var, {"kernel", "gemm"}), Catch::Contains("'': kernel or gemm"));
  unsetenv(var);
}
