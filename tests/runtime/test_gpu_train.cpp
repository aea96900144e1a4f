// CUDA-against-CPU tests of the training runtime's device paths: element-wise kernels
// and reductions, SGD/Adam/AdamW updates, losses and bucketed gradient sync on device
// tensors. They skip, saying so, where no device exists.
#include <iostream>
#include <random>

#include "kernels/device/device.hpp"
#include "runtime/comm/grad_sync.hpp"
#include "runtime/train/loss.hpp"
#include "runtime/train/optim.hpp"
#include "runtime/tensor/tensor_math.hpp"
#include "tests/support/have_device.hpp"
#include "tests/harness/mpi_test.hpp"
#include "tests/support/helpers.hpp"
#include "tests/support/random_tensor.hpp"

using namespace tessera;
using tessera::test::random_tensor;

namespace {
double max_diff(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(MemSpace::Host), y = b.to(MemSpace::Host);
  double m = 0;
  for (Index i = 0; i < x.numel(); ++i) {
    m = std::max(m, std::abs(test::value_at(x, i) - test::value_at(y, i)));
  }
  return m;
}
}  // namespace

TEST_CASE("device element-wise kernels and reductions equal the host ones", "[gpu]") {
  if (!test::have_device()) return;
  std::mt19937 rng(1);
  for (DType dt : {DType::f64, DType::f32}) {
    const double tol = dt == DType::f64 ? 1e-15 : 1e-6;
    for (Index n : {Index{1}, Index{1000}, Index{300001}}) {
      const Tensor a = random_tensor(rng, {n}, dt), b = random_tensor(rng, {n}, dt);
      const Tensor ha = a.clone(), da = a.to(MemSpace::Cuda), db = b.to(MemSpace::Cuda);
      add_into(ha, b, 0.75);
      add_into(da, db, 0.75);
      MPI_CHECK(max_diff(ha, da) <= tol);
      scale_inplace(ha, -1.5);
      scale_inplace(da, -1.5);
      MPI_CHECK(max_diff(ha, da) <= tol);
      const Tensor ho = Tensor::empty({n}, dt), dout = Tensor::empty({n}, dt, MemSpace::Cuda);
      scaled_diff(ho, ha, b, 2.0);
      scaled_diff(dout, da, db, 2.0);
      MPI_CHECK(max_diff(ho, dout) <= 2 * tol);
      // Double accumulation in different orders: each within the rounding bound of a
      // sum of n non-negative terms, (n - 1) u times the sum (u = 2^-53), of a long double
      // sum of its own operands (the device's float32 operands may differ from the host's
      // in the last bit: fused multiply-adds).
      auto reference = [&](const Tensor& x, const Tensor& y) {
        const Tensor xh = x.to(MemSpace::Host), yh = y.to(MemSpace::Host);
        long double s = 0, d = 0;
        for (Index i = 0; i < n; ++i) {
          const long double u = test::value_at(xh, i), w = test::value_at(yh, i);
          s += u * u;
          d += (u - w) * (u - w);
        }
        return std::pair<double, double>{static_cast<double>(s), static_cast<double>(d)};
      };
      const double hs = sum_squares(ha), ds = sum_squares(da);
      const double hd = sum_sq_diff(ha, b), dd = sum_sq_diff(da, db);
      const auto [hrs, hrd] = reference(ha, b);
      const auto [drs, drd] = reference(da, db);
      const double bound = static_cast<double>(n) * 0x1p-53 + 1e-15;
      INFO(name_of(dt) << " n " << n << ": sum of squares host " << hs << " (reference " << hrs
                       << ") device " << ds << " (reference " << drs << "); of differences host "
                       << hd << " (" << hrd << ") device " << dd << " (" << drd << ")");
      MPI_CHECK(std::abs(hs - hrs) <= bound * hrs);
      MPI_CHECK(std::abs(ds - drs) <= bound * drs);
      MPI_CHECK(std::abs(hd - hrd) <= bound * hrd);
      MPI_CHECK(std::abs(dd - drd) <= bound * drd);
      MPI_CHECK(sum_squares(da) == ds);  // deterministic on the device
    }
  }
}

TEST_CASE("device optimizer steps equal host steps", "[gpu]") {
  if (!test::have_device()) return;
  std::mt19937 rng(2);
  for (DType dt : {DType::f64, DType::f32}) {
    for (int which = 0; which < 3; ++which) {
      const Tensor v0 = random_tensor(rng, {257, 3}, dt);
      Parameter hp{"w", v0.clone(), Tensor::zeros({257, 3}, dt)};
      Parameter dp{"w", v0.to(MemSpace::Cuda), Tensor::zeros({257, 3}, dt, MemSpace::Cuda)};
      std::unique_ptr<Optimizer> ho, dop;
      if (which == 0) {
        ho = std::make_unique<Sgd>(std::vector<NamedParameter>{{"w", &hp}},
                                   SgdOptions{0.1, 0.9, 0, 0.01, true});
        dop = std::make_unique<Sgd>(std::vector<NamedParameter>{{"w", &dp}},
                                    SgdOptions{0.1, 0.9, 0, 0.01, true});
      } else {
        const AdamOptions o{1e-2, 0.9, 0.999, 1e-8, 0.05};
        ho = std::make_unique<Adam>(std::vector<NamedParameter>{{"w", &hp}}, o, which == 2);
        dop = std::make_unique<Adam>(std::vector<NamedParameter>{{"w", &dp}}, o, which == 2);
      }
      for (int s = 0; s < 4; ++s) {
        const Tensor g = random_tensor(rng, {257, 3}, dt);
        hp.grad.copy_from(g);
        dp.grad.copy_from(g.to(MemSpace::Cuda));
        ho->step();
        dop->step();
      }
      // Same formula, same precision; FMA contraction on the device may differ by ulps.
      MPI_CHECK(max_diff(hp.value, dp.value) <= (dt == DType::f64 ? 1e-13 : 1e-5));
      const auto hs = ho->state(), ds = dop->state();
      for (std::size_t k = 1; k < hs.size(); ++k)
        MPI_CHECK(max_diff(hs[k].tensor, ds[k].tensor) <= (dt == DType::f64 ? 1e-13 : 1e-5));
    }
  }
}

TEST_CASE("device losses and gradient sync equal the host ones", "[gpu]") {
  if (!test::have_device()) return;
  std::mt19937 rng(3);
  const Mesh mesh = Mesh::line(MPI_COMM_WORLD);
  const std::vector<Placement> dims = {Replicate(), Replicate(), Shard(0), Replicate()};
  const Tensor p = random_tensor(rng, {3, 2, 9, 4}, DType::f64),
               y = random_tensor(rng, {3, 2, 9, 4}, DType::f64);
  const ShardTensor hp = ShardTensor::scatter(mesh, p, dims),
                    hy = ShardTensor::scatter(mesh, y, dims);
  const ShardTensor dp = ShardTensor::unchecked(mesh, hp.spec(), hp.local().to(MemSpace::Cuda));
  const ShardTensor dy = ShardTensor::unchecked(mesh, hy.spec(), hy.local().to(MemSpace::Cuda));
  for (LossKind kind : {LossKind::Mse, LossKind::RelativeL2}) {
    Loss l(kind);
    const LossResult h = l(hp, hy), d = l(dp, dy);
    MPI_CHECK(std::abs(h.value - d.value) <= 1e-13 * h.value);
    MPI_CHECK(d.grad.local().space() == MemSpace::Cuda);
    MPI_CHECK(max_diff(h.grad.local(), d.grad.local()) <= 1e-15);
  }
  // Device gradients through GradSync (CUDA-aware MPI or host staging).
  Parameter a{"a", Tensor::zeros({5, 7}, DType::f32, MemSpace::Cuda),
              Tensor::zeros({5, 7}, DType::f32, MemSpace::Cuda)};
  Parameter b{"b", Tensor::zeros({11}, DType::f64, MemSpace::Cuda),
              Tensor::zeros({11}, DType::f64, MemSpace::Cuda)};
  Tensor ga = Tensor::empty({5, 7}, DType::f32), gb = Tensor::empty({11}, DType::f64);
  for (Index i = 0; i < 35; ++i) ga.data<float>()[i] = static_cast<float>(i + mesh.rank());
  for (Index i = 0; i < 11; ++i) gb.data<double>()[i] = static_cast<double>(2 * i - mesh.rank());
  a.grad.copy_from(ga.to(MemSpace::Cuda));
  b.grad.copy_from(gb.to(MemSpace::Cuda));
  GradSync sync(mesh, {&a, &b}, GradSyncOptions{{0}, {}, 64});
  sync.sync();
  const int P = mesh.size();
  const Tensor ra = a.grad.to(MemSpace::Host), rb = b.grad.to(MemSpace::Host);
  bool ok = true;
  for (Index i = 0; i < 35; ++i)
    ok = ok && ra.data<float>()[i] == static_cast<float>(P * i + P * (P - 1) / 2);
  for (Index i = 0; i < 11; ++i)
    ok = ok && rb.data<double>()[i] == static_cast<double>(P * 2 * i - P * (P - 1) / 2);
  MPI_CHECK(ok);
}
