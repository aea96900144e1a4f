#include "runtime/train/loss.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "runtime/comm/collective_error.hpp"
#include "runtime/comm/mpi_error.hpp"
#include "runtime/tensor/tensor_math.hpp"

namespace tessera {
namespace {

// The target in the prediction's spec (redistributed if it is sharded otherwise).
ShardTensor matched_target(const ShardTensor& pred, const ShardTensor& target) {
  TESSERA_CHECK(pred.global_shape() == target.global_shape(),
                "loss: prediction " << shape_str(pred.global_shape()) << " and target "
                                    << shape_str(target.global_shape())
                                    << " differ in global shape");
  TESSERA_CHECK(pred.dtype() == target.dtype() && pred.local().space() == target.local().space(),
                "loss: prediction and target differ in dtype or memory space");
  TESSERA_CHECK(!pred.spec().has_partial(),
                "loss: prediction " << pred.spec().str() << " is partial; reduce it first");
  TESSERA_CHECK(pred.spec().ndim() >= 1, "loss: needs a tensor of rank >= 1");
  return target.spec() == pred.spec() ? target : target.redistribute(pred.spec());
}

// Ranks of the group holding the same cells: the product of group axes that shard no dim.
double replicas(const Mesh& mesh, const ShardSpec& spec, const std::vector<int>& axes) {
  double r = 1;
  for (int a : axes)
    if (spec.dim_on_axis(a) < 0) r *= mesh.dim(a);
  return r;
}

// Relative L2's rescaled second round: a target whose sum of squares is below
// kTinySquares (its values below ~1e-146, or all zero) is summed again times 2^600, one
// whose squares overflow times 2^-600; float64 spans 2^-1074..2^1024, so either brings
// every representable value's square into range.
constexpr double kTinySquares = 1e-292;
constexpr int kRescaleExponent = 600;

// The contiguous 1-D window [j * seg, (j + 1) * seg) of a contiguous tensor.
Tensor segment(const Tensor& t, Index j, Index seg) {
  return t.reshape({t.numel()}).view(Box({j * seg}, {(j + 1) * seg}));
}

}  // namespace

const AxesComm& Loss::comm_for(const Mesh& mesh) {
  auto it = comms_.find(mesh.comm());
  if (it == comms_.end()) {
    std::vector<int> axes = opts_.axes;
    if (axes.empty())
      for (int a = 0; a < mesh.ndim(); ++a) axes.push_back(a);
    it = comms_.emplace(mesh.comm(), AxesComm(mesh, axes)).first;
  }
  return it->second;
}

LossResult Loss::operator()(const ShardTensor& pred, const ShardTensor& target, bool want_grad) {
  const ShardTensor target_here = matched_target(pred, target);
  const Mesh& mesh = pred.mesh();
  const AxesComm& group = comm_for(mesh);
  const double rep = replicas(mesh, pred.spec(), group.axes());
  const Tensor p = pred.local().contiguous(), y = target_here.local().contiguous();
  LossResult r;
  Tensor g;
  if (want_grad) g = Tensor::empty(p.shape(), p.dtype(), p.space());

  if (kind_ == LossKind::Mse) {
    double sums[2] = {sum_sq_diff(p, y), static_cast<double>(p.numel())};
    TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, group.comm()));
    collective_check(mesh.comm(), sums[1] > 0, "MSE loss of an empty tensor");
    r.value = sums[0] / sums[1];
    if (want_grad) scaled_diff(g, p, y, 2.0 * rep / sums[1]);
  } else {
    const Index n = pred.global_shape()[0];
    const Box box = pred.local_box();
    const Index lo = box.lo[0], nloc = box.extent(0);
    const Index seg = nloc > 0 ? p.numel() / nloc : 0;
    // Per global sample: sum (p - y)^2, sum y^2, ranks holding a piece of it.
    std::vector<double> sums(static_cast<std::size_t>(3 * n), 0.0);
    const auto sum_over_group = [&](std::vector<double>& v) {
      TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE,
                                MPI_SUM, group.comm()));
    };
    for (Index j = 0; j < nloc; ++j) {
      const auto i = static_cast<std::size_t>(lo + j);
      sums[3 * i] = sum_sq_diff(segment(p, j, seg), segment(y, j, seg));
      sums[3 * i + 1] = sum_squares(segment(y, j, seg));
      sums[3 * i + 2] = 1;
    }
    sum_over_group(sums);
    // Squares leave float64 below |v| ~ 1e-154 (zero) and above ~ 1e154 (inf): a float64
    // sample whose target's squares did is summed again with p and y scaled by 2^e (exact),
    // so the ratio and the gradient stay exact where they are representable. Its ||y||^2 is
    // then t 2^(-2e); sum (p - y)^2 is taken from the round that kept it finite and nonzero.
    // e is decided from the reduced sums and agreed by a maximum over the group (ranks that
    // read a sum a bit apart at the threshold would otherwise meet different reductions).
    std::vector<int> expo(static_cast<std::size_t>(n), 0);
    if (pred.dtype() == DType::f64) {
      for (std::size_t k = 0; k < expo.size(); ++k) {
        const double t = sums[3 * k + 1];
        if (sums[3 * k + 2] > 0 && t < kTinySquares) expo[k] = kRescaleExponent;
        if (sums[3 * k + 2] > 0 && std::isinf(t)) expo[k] = -kRescaleExponent;
      }
      TESSERA_MPI(MPI_Allreduce(MPI_IN_PLACE, expo.data(), static_cast<int>(expo.size()), MPI_INT,
                                MPI_MAX, group.comm()));
    }
    std::vector<double> scaled(sums.size(), 0.0);
    if (std::any_of(expo.begin(), expo.end(), [](int e) { return e != 0; })) {
      for (Index j = 0; j < nloc; ++j) {
        const auto k = static_cast<std::size_t>(lo + j);
        if (expo[k] == 0) continue;
        const double s = std::ldexp(1.0, expo[k]);
        const Tensor ps = segment(p, j, seg).clone(), ys = segment(y, j, seg).clone();
        scale_inplace(ps, s);
        scale_inplace(ys, s);
        scaled[3 * k] = sum_sq_diff(ps, ys);
        scaled[3 * k + 1] = sum_squares(ys);
      }
      sum_over_group(scaled);
    }
    std::string why;
    double total = 0, count = 0;
    std::vector<double> rel(static_cast<std::size_t>(n), 0.0);
    std::vector<int> shifts(static_cast<std::size_t>(n), 0);
    for (Index i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      if (sums[3 * k + 2] == 0) continue;  // a sample of another replica group
      double d = sums[3 * k], t = sums[3 * k + 1];
      int shift = 0;  // rel = sqrt(d / t) 2^shift
      if (expo[k] != 0) {
        // The rescaled round's sums; sum (p - y)^2 from the first where the second's left
        // float64 (a tiny target, a prediction of ordinary size): then ||y||^2 = t 2^(-2e).
        t = scaled[3 * k + 1];
        if ((std::isfinite(scaled[3 * k]) && scaled[3 * k] > 0) || !std::isfinite(d))
          d = scaled[3 * k];
        else
          shift = expo[k];
        sums[3 * k] = d;      // for the gradient: ||p - y|| = sqrt(d) 2^(shift - e)
        sums[3 * k + 1] = t;  // ||y|| = sqrt(t) 2^-e
        shifts[k] = shift;
      }
      if (!(t > 0)) {
        if (opts_.skip_zero_targets && !want_grad) continue;
        std::ostringstream os;
        os << "relative L2 loss: the target of sample " << i
           << " of the batch has zero norm (all zeros)";
        why = os.str();
        break;
      }
      rel[k] = std::ldexp(std::sqrt(d / t), shift);
      total += rel[k];
      count += 1;
    }
    const bool all_skipped = count == 0 && opts_.skip_zero_targets && !want_grad;
    if (why.empty() && count == 0 && !all_skipped) why = "relative L2 loss of an empty batch";
    collective_check(mesh.comm(), why.empty(), why);
    r.value = all_skipped ? 0.0 : total / count;
    r.samples = static_cast<Index>(count);
    // d r_i / d p = (p - y) / (r_i * ||y_i||^2); ||y_i||^2 counted once per replica. A
    // rescaled sample takes the same as (p - y) / ||p - y|| * 1 / ||y||, in steps that stay in
    // float64 wherever the gradient does: (p - y) 2^(e - shift) is of the size of sqrt(d),
    // divided by sqrt(d) sqrt(t) it is of the size of 1 / sqrt(t), and 2^e brings it home.
    for (Index j = 0; want_grad && j < nloc; ++j) {
      const auto k = static_cast<std::size_t>(lo + j);
      const Tensor gj = segment(g, j, seg);
      if (expo[k] == 0 || !(rel[k] > 0)) {
        const double alpha = rel[k] > 0 ? rep / (count * rel[k] * sums[3 * k + 1]) : 0.0;
        scaled_diff(gj, segment(p, j, seg), segment(y, j, seg), alpha);
      } else {
        scaled_diff(gj, segment(p, j, seg), segment(y, j, seg),
                    std::ldexp(1.0, expo[k] - shifts[k]));
        scale_inplace(gj, rep / (count * std::sqrt(sums[3 * k]) * std::sqrt(sums[3 * k + 1])));
        scale_inplace(gj, std::ldexp(1.0, expo[k]));
      }
    }
  }
  if (want_grad) r.grad = ShardTensor::unchecked(mesh, pred.spec(), g);
  return r;
}

LossResult mse_loss(const ShardTensor& pred, const ShardTensor& target, bool want_grad) {
  Loss l(LossKind::Mse);
  return l(pred, target, want_grad);
}

LossResult relative_l2_loss(const ShardTensor& pred, const ShardTensor& target, bool want_grad) {
  Loss l(LossKind::RelativeL2);
  return l(pred, target, want_grad);
}

}  // namespace tessera
