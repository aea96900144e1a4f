#pragma once
// Normalization element functions shared by the OpenMP loops and the CUDA kernels;
// arithmetic in double, results stored in the element type.
#include "kernels/floor.hpp"
#include "decomp/error.hpp"
#include "kernels/norm.hpp"
#include "kernels/stat_layout.hpp"

namespace tessera::kernels {

template <class T>
struct NormParams {
  StatLayout l;
  const double* mean;
  const double* rstd;
  const T* gamma;  // may be null
  TESSERA_HD double gamma_of(Index ch) const {
    return gamma ? static_cast<double>(gamma[ch]) : 1.0;
  }
  TESSERA_HD double xhat(const T* x, Index e, Index g) const {
    return (static_cast<double>(x[e]) - mean[g]) * rstd[g];
  }
};

// Validates a (throws naming `where`) and takes its parameters for element type T.
template <class T>
NormParams<T> norm_params(const NormArgs& a, const char* where) {
  check_stat_layout(a.layout, where);
  TESSERA_CHECK(a.mean && a.rstd, where << ": mean and rstd are required");
  return {a.layout, a.mean, a.rstd, static_cast<const T*>(a.gamma)};
}

template <class T>
struct NormForward {
  NormParams<T> p;
  const T* beta;
  const T* x;
  T* y;
  TESSERA_HD void operator()(Index e) const { at(e, p.l.channel_of(e), p.l.group_of(e)); }
  TESSERA_HD void at(Index e, Index ch, Index g) const {
    const double b = beta ? static_cast<double>(beta[ch]) : 0.0;
    y[e] = static_cast<T>(p.xhat(x, e, g) * p.gamma_of(ch) + b);
  }
};

template <class T>
struct NormBackwardSums {
  NormParams<T> p;
  const T* x;
  const T* dy;
  double* s1;
  double* s2;
  TESSERA_HD const StatLayout& walk() const { return p.l; }
  TESSERA_HD void add(Index g, Index j, double& a, double& b) const {
    add_cell(p.l.cell(g, j), g, a, b);
  }
  TESSERA_HD void add_cell(const StatLayout::Cell& k, Index g, double& a, double& b) const {
    const double dyg = static_cast<double>(dy[k.e]) * p.gamma_of(k.ch);
    a += dyg;
    b += dyg * p.xhat(x, k.e, g);
  }
  TESSERA_HD void store(Index g, double a, double b) const {
    s1[g] = a;
    s2[g] = b;
  }
};

template <class T>
struct NormBackwardDx {
  NormParams<T> p;
  const T* x;
  const T* dy;
  const double* S1;
  const double* S2;
  double inv_m;
  T* dx;
  TESSERA_HD void operator()(Index e) const { at(e, p.l.channel_of(e), p.l.group_of(e)); }
  TESSERA_HD void at(Index e, Index ch, Index g) const {
    const double dyg = static_cast<double>(dy[e]) * p.gamma_of(ch);
    dx[e] = static_cast<T>(p.rstd[g] * (dyg - (S1[g] + p.xhat(x, e, g) * S2[g]) * inv_m));
  }
};

// Reduced per channel (the groups of `by_channel`); statistics looked up through p.l.
template <class T>
struct NormParamGrads {
  NormParams<T> p;
  StatLayout by_channel;
  const T* x;
  const T* dy;
  double* dgamma;
  double* dbeta;
  // Host: a group of a sample per channel for GroupNorm layouts (group_at divides), or null.
  const Index* group_in_sample = nullptr;
  TESSERA_HD const StatLayout& walk() const { return by_channel; }
  TESSERA_HD void add(Index ch, Index j, double& a, double& b) const {
    add_cell(by_channel.cell(ch, j), ch, a, b);
  }
  TESSERA_HD void add_cell(const StatLayout::Cell& k, Index, double& a, double& b) const {
    const double d = static_cast<double>(dy[k.e]);
    const Index g =
        group_in_sample ? k.nn * p.l.groups + group_in_sample[k.ch] : p.l.group_at(k.nn, k.ch, k.s);
    a += d * p.xhat(x, k.e, g);
    b += d;
  }
  TESSERA_HD void store(Index ch, double a, double b) const {
    if (dgamma) dgamma[ch] = a;
    if (dbeta) dbeta[ch] = b;
  }
};

}  // namespace tessera::kernels
