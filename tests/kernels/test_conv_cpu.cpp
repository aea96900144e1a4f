// CPU convolution kernels against a naive float64 reference (tests/unit/conv_reference.hpp):
// forward, backward-data, backward-weights and bias over a sweep of 1-D/2-D/3-D
// descriptors, in float32 (oneDNN, and the direct loops as a second opinion) and float64
// (the direct loops); adjoint identities in float64; descriptor errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <string>
#include <limits>
#include <thread>

#include "decomp/error.hpp"
#include "kernels/conv_pieces.hpp"
#include "kernels/cpu/conv_direct.hpp"
#include "kernels/device/device.hpp"
#include "kernels/device/memory.hpp"
#include "tests/kernels/conv_reference.hpp"

using namespace tessera;
using namespace tessera::test_conv;
using tessera::kernels::ConvDesc;

namespace {

enum class Path { Api, Direct };

struct Errors {
  double y = 0, dx = 0, dw = 0, db = 0;
  bool x_untouched_outside = true;  // dx outside the window is left as it was
};

// Runs all three passes of case sc in type T through `path` and compares with the
// float64 reference on the same (rounded to T) inputs.
template <class T>
Errors run_case(const SweepCase& sc, Path path, unsigned seed) {
  ConvDesc c = sc.c;
  c.type = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  const Window win = sc.margin ? make_windowed(c, sc.margin) : dense_window(c);
  // x: the window gets data, the rest of the buffer NaN (reading it would show).
  std::vector<double> xd(sz(win.size), std::numeric_limits<double>::quiet_NaN());
  {
    const auto vals = random_vector(sz(c.x_elems()), seed);
    std::size_t j = 0;
    Index xs[5];
    c.x_strides_or_dense(xs);
    // Walk x densely and place each value at its strided position.
    for (Index lin = 0; lin < c.x_elems(); ++lin, ++j) {
      Index r = lin, off = 0;
      for (int d = c.nd + 1; d >= 0; --d) {
        const Index ext = d == 0 ? c.n : d == 1 ? c.c_in : c.in[d - 2];
        off += (r % ext) * xs[d];
        r /= ext;
      }
      xd[sz(win.offset + off)] = vals[j];
    }
  }
  // Inputs rounded to T first, so the reference sees exactly what the kernel sees.
  auto round = [](std::vector<double> v) {
    for (auto& e : v) e = static_cast<double>(static_cast<T>(e));
    return v;
  };
  xd = round(xd);
  const auto w = round(random_vector(sz(c.w_elems()), seed + 1));
  const auto b = round(random_vector(sz(c.c_out), seed + 2));
  const auto dy = round(random_vector(sz(c.y_elems()), seed + 3));

  const std::vector<double> x_window(xd.begin() + win.offset, xd.end());
  const auto y_ref = ref_forward(c, x_window, w, b.data());
  const auto dx_ref = ref_backward_data(c, dy, w, win.size - win.offset);
  std::vector<double> dw_ref, db_ref;
  ref_backward_weights(c, x_window, dy, dw_ref, db_ref);

  const auto xt = cast<T>(xd), wt = cast<T>(w), bt = cast<T>(b), dyt = cast<T>(dy);
  const T sentinel = T(12345);
  std::vector<T> y(sz(c.y_elems()), sentinel), dx(sz(win.size), sentinel),
      dw(sz(c.w_elems()), sentinel), db(sz(c.c_out), sentinel);
  const T* x0 = xt.data() + win.offset;
  T* dx0 = dx.data() + win.offset;
  if (path == Path::Api) {
    kernels::conv_forward(Device::host(), c, x0, wt.data(), bt.data(), y.data());
    kernels::conv_backward_data(Device::host(), c, dyt.data(), wt.data(), dx0);
    kernels::conv_backward_weights(Device::host(), c, x0, dyt.data(), dw.data(), db.data());
  } else {
    kernels::direct::forward<T>(c, x0, wt.data(), bt.data(), y.data());
    kernels::direct::backward_data<T>(c, dyt.data(), wt.data(), dx0);
    kernels::direct::backward_weights<T>(c, x0, dyt.data(), dw.data(), db.data());
  }
  Errors e;
  e.y = rel_error(y, y_ref);
  // dx: compare the window; every element outside it must still hold the sentinel.
  std::vector<double> dx_full(sz(win.offset), 0.0);
  dx_full.insert(dx_full.end(), dx_ref.begin(), dx_ref.end());
  std::vector<T> dx_win(dx.size());
  for (std::size_t i = 0; i < dx.size(); ++i) {
    const bool inside = !std::isnan(xd[i]);
    if (inside)
      dx_win[i] = dx[i];
    else {
      dx_win[i] = T(0);
      e.x_untouched_outside = e.x_untouched_outside && dx[i] == sentinel;
      dx_full[i] = 0.0;
    }
  }
  e.dx = rel_error(dx_win, dx_full);
  e.dw = rel_error(dw, dw_ref);
  e.db = rel_error(db, db_ref);
  return e;
}

template <class T>
void check_sweep(Path path, double tol) {
  const auto cases = sweep(std::is_same_v<T, float> ? DType::f32 : DType::f64);
  REQUIRE(cases.size() > 300);
  unsigned seed = 1;
  for (const auto& sc : cases) {
    INFO(sc.c.str() << (sc.margin ? " (windowed x)" : ""));
    const Errors e = run_case<T>(sc, path, seed += 7);
    CHECK(e.y <= tol);
    CHECK(e.dx <= tol);
    CHECK(e.dw <= tol);
    CHECK(e.db <= tol);
    CHECK(e.x_untouched_outside);
  }
}

double dot(const std::vector<double>& a, const std::vector<double>& b, double& scale) {
  double s = 0;
  scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i], scale += std::abs(a[i] * b[i]);
  return s;
}

ConvDesc desc2d(Index cin, Index cout, Index hw, Index k, Index s, DType t = DType::f32) {
  ConvDesc c;
  c.nd = 2, c.type = t, c.n = 2, c.c_in = cin, c.c_out = cout;
  for (int d = 0; d < 2; ++d)
    c.in[d] = hw, c.kernel[d] = k, c.stride[d] = s, c.pad_lo[d] = k / 2, c.pad_hi[d] = k / 2;
  return c;
}

}  // namespace

TEST_CASE("Conv float32 (oneDNN) matches the float64 reference over the sweep", "[conv]") {
  check_sweep<float>(Path::Api, 1e-5);
}

TEST_CASE("Conv float64 matches the float64 reference over the sweep", "[conv]") {
  check_sweep<double>(Path::Api, 1e-12);
}

TEST_CASE("Conv direct loops in float32 match the reference (second opinion)", "[conv]") {
  check_sweep<float>(Path::Direct, 1e-5);
}

namespace {

// Runs the sweep in type T under per-call limits that force the piecewise path: chunks
// of one sample, slabs of one and of two output rows. Every pass must equal the
// reference as one call does, and every call the limit cannot hold must have split.
template <class T>
void check_pieces(double tol) {
  unsigned seed = 3;
  long batch_splits = 0, slab_splits = 0;
  for (const auto& sweep_case : sweep(std::is_same_v<T, float> ? DType::f32 : DType::f64)) {
    const ConvDesc& c = sweep_case.c;
    for (const Index limit : {sample_limit(c), slab_limit(c, 2), slab_limit(c, 1)}) {
      const kernels::ScopedConvCallLimit scope(limit);
      INFO(c.str() << (sweep_case.margin ? " (windowed x)" : "") << " limit " << limit);
      const bool split = !kernels::conv_fits_one_call(Device::host(), c);
      const Errors e = run_case<T>(sweep_case, Path::Api, seed += 7);
      CHECK(e.y <= tol);
      CHECK(e.dx <= tol);
      CHECK(e.dw <= tol);
      CHECK(e.db <= tol);
      CHECK(e.x_untouched_outside);
      CHECK(scope.batch_split_calls() + scope.slab_split_calls() == (split ? 3 : 0));
      batch_splits += scope.batch_split_calls();
      slab_splits += scope.slab_split_calls();
    }
  }
  // The sweep reaches both kinds of pieces often.
  CHECK(batch_splits > 60);
  CHECK(slab_splits > 300);
}

}  // namespace

TEST_CASE("Conv past the per-call limit runs in pieces equal to one call", "[conv]") {
  SECTION("float64") {
    check_pieces<double>(1e-12);
  }
  SECTION("float32") {
    check_pieces<float>(1e-5);
  }
}

TEST_CASE("Conv slabs that read only padding give the bias and its gradient", "[conv]") {
  // 1-D, 3 input cells and 9 cells of padding: the first and last slabs of one output row
  // read no input cell at all.
  ConvDesc c;
  c.nd = 1, c.type = DType::f64, c.n = 2, c.c_in = 2, c.c_out = 3;
  c.in[0] = 3, c.kernel[0] = 2, c.pad_lo[0] = 4, c.pad_hi[0] = 5;
  const kernels::ScopedConvCallLimit scope(slab_limit(c, 1));
  const Errors e = run_case<double>({c, 0}, Path::Api, 77);
  CHECK(scope.slab_split_calls() == 3);
  CHECK(e.y <= 1e-12);
  CHECK(e.dx <= 1e-12);
  CHECK(e.dw <= 1e-12);
  CHECK(e.db <= 1e-12);
}

TEST_CASE("Conv past the per-call limit even in one-row slabs is refused by name", "[conv]") {
  const ConvDesc c = desc2d(4, 4, 8, 3, 1, DType::f64);
  const kernels::ScopedConvCallLimit scope(slab_limit(c, 1) - 1);
  std::vector<double> buf(4096);
  double* p = buf.data();
  CHECK_THROWS_WITH(kernels::conv_forward(Device::host(), c, p, p, nullptr, p),
                    Catch::Contains("even in slabs of one output row") &&
                        Catch::Contains("conv2d float64 n=2 cin=4"));
  CHECK_THROWS_WITH(kernels::conv_backward_data(Device::host(), c, p, p, p),
                    Catch::Contains("even in slabs of one output row"));
  CHECK_THROWS_WITH(kernels::conv_backward_weights(Device::host(), c, p, p, p, nullptr),
                    Catch::Contains("even in slabs of one output row"));
}

TEST_CASE("Conv float64 adjoint identities", "[conv]") {
  unsigned seed = 1000;
  int checked = 0;
  for (const auto& sc : sweep(DType::f64)) {
    ConvDesc c = sc.c;
    INFO(c.str());
    const Window win = sc.margin ? make_windowed(c, sc.margin) : dense_window(c);
    // Fill the whole buffer: cells outside the window must not matter (checked below
    // by comparing with a dense x holding the same window).
    const auto xbuf = random_vector(sz(win.size), seed += 5);
    const auto w = random_vector(sz(c.w_elems()), seed + 1);
    const auto dy = random_vector(sz(c.y_elems()), seed + 2);
    const auto b = random_vector(sz(c.c_out), seed + 3);
    std::vector<double> y(sz(c.y_elems())), yb(sz(c.y_elems())), dx(sz(win.size), 0.0),
        dw(sz(c.w_elems())), db(sz(c.c_out));
    const double* x0 = xbuf.data() + win.offset;
    kernels::conv_forward(Device::host(), c, x0, w.data(), nullptr, y.data());
    kernels::conv_backward_data(Device::host(), c, dy.data(), w.data(), dx.data() + win.offset);
    kernels::conv_backward_weights(Device::host(), c, x0, dy.data(), dw.data(), db.data());
    // <conv(x; w), dy> == <x, conv_bwd_data(dy; w)>: dx is zero outside the window.
    double s1, s2, s3, s4;
    const double lhs = dot(y, dy, s1);
    const double rhs_x = dot(xbuf, dx, s2);
    CHECK(std::abs(lhs - rhs_x) <= 1e-12 * std::max(s1, s2));
    // <conv(x; w), dy> == <w, conv_bwd_weights(x, dy)>: y is linear in w.
    const double rhs_w = dot(w, dw, s3);
    CHECK(std::abs(lhs - rhs_w) <= 1e-12 * std::max(s1, s3));
    // Bias: <y(b) - y(0), dy> == <b, dbias>.
    kernels::conv_forward(Device::host(), c, x0, w.data(), b.data(), yb.data());
    for (std::size_t i = 0; i < y.size(); ++i) yb[i] -= y[i];
    const double lb = dot(yb, dy, s4);
    double s5;
    const double rb = dot(b, db, s5);
    CHECK(std::abs(lb - rb) <= 1e-12 * std::max(s4, s5));
    ++checked;
  }
  CHECK(checked > 300);
}

TEST_CASE("Conv descriptor checks name the bad field", "[conv]") {
  auto bad = [](auto edit, const char* field) {
    ConvDesc c = desc2d(4, 4, 8, 3, 1);
    edit(c);
    INFO(field);
    CHECK_THROWS_AS(c.validate(), Error);
    CHECK_THROWS_WITH(c.validate(), Catch::Contains(field));
    std::vector<float> buf(4096);
    CHECK_THROWS_AS(
        kernels::conv_forward(Device::host(), c, buf.data(), buf.data(), nullptr, buf.data()),
        Error);
  };
  bad([](ConvDesc& c) { c.nd = 0; }, "nd");
  bad([](ConvDesc& c) { c.nd = 4; }, "nd");
  bad([](ConvDesc& c) { c.n = 0; }, "n must");
  bad([](ConvDesc& c) { c.c_in = 0; }, "c_in");
  bad([](ConvDesc& c) { c.c_out = -1; }, "c_out");
  bad([](ConvDesc& c) { c.groups = 0; }, "groups");
  bad([](ConvDesc& c) { c.groups = 3; }, "c_in is not a multiple of groups");
  bad([](ConvDesc& c) { c.c_out = 6, c.groups = 4; }, "c_out is not a multiple of groups");
  bad([](ConvDesc& c) { c.in[1] = 0; }, "in[1]");
  bad([](ConvDesc& c) { c.kernel[0] = 0; }, "kernel[0]");
  bad([](ConvDesc& c) { c.stride[1] = 0; }, "stride[1]");
  bad([](ConvDesc& c) { c.dilation[0] = 0; }, "dilation[0]");
  bad([](ConvDesc& c) { c.pad_lo[1] = -1; }, "pad_lo[1]");
  bad([](ConvDesc& c) { c.pad_hi[0] = -2; }, "pad_hi[0]");
  bad([](ConvDesc& c) { c.kernel[1] = 11, c.pad_lo[1] = c.pad_hi[1] = 1; }, "out(1) <= 0");
  bad([](ConvDesc& c) { c.dilation[0] = 5, c.pad_lo[0] = c.pad_hi[0] = 0; }, "out(0) <= 0");
  bad([](ConvDesc& c) { c.x_strides[0] = 100; }, "x_strides[1]");  // partly set
  bad([](ConvDesc& c) { c.type = static_cast<DType>(7); }, "type");
  // Null tensors.
  ConvDesc c = desc2d(4, 4, 8, 3, 1);
  std::vector<float> buf(4096);
  CHECK_THROWS_AS(
      kernels::conv_forward(Device::host(), c, nullptr, buf.data(), nullptr, buf.data()), Error);
  CHECK_THROWS_AS(kernels::conv_backward_data(Device::host(), c, buf.data(), buf.data(), nullptr),
                  Error);
  CHECK_THROWS_AS(
      kernels::conv_backward_weights(Device::host(), c, buf.data(), nullptr, buf.data(), nullptr),
      Error);
}

TEST_CASE("Conv output extents", "[conv]") {
  ConvDesc c;
  c.nd = 3;
  c.in[0] = 10, c.kernel[0] = 3, c.stride[0] = 2, c.pad_lo[0] = 1, c.pad_hi[0] = 0;  // 9 / 2 + 1
  c.in[1] = 7, c.kernel[1] = 2, c.dilation[1] = 3, c.pad_hi[1] = 2;                  // 5 / 1 + 1
  c.in[2] = 5, c.kernel[2] = 5, c.stride[2] = 3;                                     // 0 / 3 + 1
  CHECK(c.out(0) == 5);
  CHECK(c.out(1) == 6);
  CHECK(c.out(2) == 1);
  CHECK_NOTHROW(c.validate());
  CHECK(c.y_elems() == 30);
  CHECK(c.w_elems() == 30);
}

TEST_CASE("Conv without bias, cached primitives and concurrent callers agree", "[conv]") {
  for (DType t : {DType::f32, DType::f64}) {
    const ConvDesc a = desc2d(8, 8, 12, 3, 1, t), b = desc2d(4, 8, 10, 2, 2, t);
    auto run = [](const ConvDesc& c, unsigned seed, std::vector<double>& out) {
      const auto x = random_vector(sz(c.x_elems()), seed),
                 w = random_vector(sz(c.w_elems()), seed + 1);
      const auto dy = random_vector(sz(c.y_elems()), seed + 2);
      auto go = [&](auto tag) {
        using T = decltype(tag);
        const auto xt = cast<T>(x), wt = cast<T>(w), dyt = cast<T>(dy);
        std::vector<T> y(sz(c.y_elems())), dx(sz(c.x_elems())), dw(sz(c.w_elems()));
        kernels::conv_forward(Device::host(), c, xt.data(), wt.data(), nullptr, y.data());
        kernels::conv_backward_data(Device::host(), c, dyt.data(), wt.data(), dx.data());
        kernels::conv_backward_weights(Device::host(), c, xt.data(), dyt.data(), dw.data(),
                                       nullptr);
        out.assign(y.begin(), y.end());
        out.insert(out.end(), dx.begin(), dx.end());
        out.insert(out.end(), dw.begin(), dw.end());
      };
      if (c.type == DType::f32)
        go(float{});
      else
        go(double{});
    };
    std::vector<double> ra, rb;
    run(a, 5, ra);
    run(b, 9, rb);
    // References without bias.
    {
      const auto x = random_vector(sz(a.x_elems()), 5), w = random_vector(sz(a.w_elems()), 6);
      const auto y = ref_forward(a, x, w, nullptr);
      std::vector<double> got(ra.begin(), ra.begin() + static_cast<long>(y.size()));
      CHECK(rel_error(got, y) <= (t == DType::f32 ? 1e-5 : 1e-12));
    }
    std::vector<std::vector<double>> res(6);
    std::vector<std::thread> threads;
    for (int i = 0; i < 6; ++i)
      threads.emplace_back([&, i] { run(i % 2 ? b : a, i % 2 ? 9 : 5, res[sz(i)]); });
    for (auto& th : threads) th.join();
    for (int i = 0; i < 6; ++i) CHECK(res[sz(i)] == (i % 2 ? rb : ra));
  }
}

TEST_CASE("Conv CUDA entry points throw tessera::Error where no device can run them", "[conv]") {
  if (device::count() > 0) return;  // tests/gpu/test_gpu_conv.cpp covers devices
  const ConvDesc c = desc2d(4, 4, 8, 3, 1);
  std::vector<float> buf(4096);
  float* p = buf.data();
  CHECK_THROWS_AS(kernels::conv_forward(Device::cuda(), c, p, p, nullptr, p), Error);
  CHECK_THROWS_AS(kernels::conv_backward_data(Device::cuda(), c, p, p, p), Error);
  CHECK_THROWS_AS(kernels::conv_backward_weights(Device::cuda(), c, p, p, p, nullptr), Error);
  if (!device::built_with_cuda())
    CHECK_THROWS_WITH(kernels::conv_forward(Device::cuda(), c, p, p, nullptr, p),
                      Catch::Contains("built without CUDA"));
}

TEST_CASE("Conv float32 runs channels-last copies, or plain where the memory limit refuses them",
          "[conv]") {
  // A 3x3 conv into 8 channels takes the channels-last path in every pass: the copies of x
  // and y show in the peak. Under a limit that refuses them the same call runs plain, with
  // nothing extra allocated, and both agree with the float64 reference.
  const SweepCase sc{desc2d(8, 8, 24, 3, 1), 0};
  const std::size_t copies = static_cast<std::size_t>(sc.c.x_elems() + sc.c.y_elems()) * 4;
  const std::size_t smaller =
      static_cast<std::size_t>(std::min(sc.c.x_elems(), sc.c.y_elems())) * 4;
  const char* layout = std::getenv("TESSERA_CONV_LAYOUT");  // "plain": no copies at all
  const bool plain = layout && std::string(layout) == "plain";
  const std::size_t saved = memory_limit();
  for (const bool limited : {false, true}) {
    INFO((limited ? "under a limit" : "without a limit"));
    const std::size_t base = memory_stats(MemSpace::Host).current;
    set_memory_limit(limited ? base + smaller / 2 : 0);
    reset_peak_memory(MemSpace::Host);
    const Errors e = run_case<float>(sc, Path::Api, 5);
    const std::size_t extra = memory_stats(MemSpace::Host).peak - base;
    set_memory_limit(saved);
    CHECK(e.y <= 1e-5);
    CHECK(e.dx <= 1e-5);
    CHECK(e.dw <= 1e-5);
    CHECK(e.db <= 1e-5);
    if (limited || plain)
      CHECK(extra == 0);
    else
      CHECK(extra >= copies);
  }
}
