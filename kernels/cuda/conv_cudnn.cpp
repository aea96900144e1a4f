// CUDA convolution through cuDNN's legacy convolution API (cudnn_cnn), float32 and
// float64; queued on the caller's stream (cudnnSetStream per call), not waited for.
//
// Per device: one cuDNN handle, one growable workspace and a cache of plans keyed by the
// full ConvDesc (descriptors, the algorithm of each pass and its workspace size), all
// used under the device's mutex (a cuDNN handle is not for concurrent use).
//
// Asymmetric padding: the legacy API pads both sides alike. Where pad_lo != pad_hi in
// some dim, x is copied into a dense staging buffer whose extra zero margins supply the
// difference (pad_lo - min, pad_hi - min) and cuDNN pads by min(pad_lo, pad_hi). This is
// exact for every stride (over-padding and cropping the output is not: the crop would
// have to be a multiple of the stride). backward-data writes the staged layout and its
// interior is copied out to dx. Staging buffers come from the tracked allocator per call
// (the device cache makes that free once shapes repeat), not held by the plan: a shard at
// a domain border pads one side only, so nearly every layer has such a plan, and buffers
// held per plan would keep two more copies of every layer's input for the process. The same staging
// serves a strided x for which cuDNN offers no algorithm. float32 runs with CUDNN_FMA_MATH (no
// TF32), so results match the CPU to float32 rounding.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "decomp/error.hpp"
#include "kernels/conv.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/device/device.hpp"
#include "kernels/device/memory.hpp"
#include "kernels/device/tracked_block.hpp"
#include "kernels/strided_copy.hpp"

namespace tessera::kernels {
namespace {

void check_cudnn(cudnnStatus_t s, const char* call) {
  if (s != CUDNN_STATUS_SUCCESS)
    throw Error(std::string("cuDNN error in ") + call + ": " + cudnnGetErrorString(s));
}
#define TESSERA_CUDNN_CHECK(call) check_cudnn((call), #call)

// The most workspace one algorithm may ask for; larger ones are passed over.
constexpr std::size_t kMaxWorkspace = std::size_t(1) << 30;

int to_int(Index v, const char* what) {
  if (v > std::numeric_limits<int>::max())
    throw Error(std::string("conv (cuDNN): ") + what + " exceeds int range for cuDNN");
  return static_cast<int>(v);
}

// The descriptor as cuDNN sees it: at least 2 spatial dims (a 1-D conv gets a leading
// extent-1 dim) and the padding split into cuDNN's symmetric part and staging margins.
struct Lifted {
  int ns = 2;  // spatial dims given to cuDNN
  Index in[3] = {}, k[3] = {}, s[3] = {}, dl[3] = {}, pad[3] = {}, m_lo[3] = {}, m_hi[3] = {},
        out[3] = {};
  Index xs[5] = {};  // caller's x strides (N, C, spatial...) lifted
  bool asymmetric = false;
};

Lifted lift(const ConvDesc& c) {
  Lifted l;
  l.ns = std::max(c.nd, 2);
  const int lead = l.ns - c.nd;
  Index xs[5];
  c.x_strides_or_dense(xs);
  l.xs[0] = xs[0], l.xs[1] = xs[1];
  for (int d = 0; d < l.ns; ++d) {
    const int s = d - lead;
    l.in[d] = s < 0 ? 1 : c.in[s];
    l.k[d] = s < 0 ? 1 : c.kernel[s];
    l.s[d] = s < 0 ? 1 : c.stride[s];
    l.dl[d] = s < 0 ? 1 : c.dilation[s];
    const Index lo = s < 0 ? 0 : c.pad_lo[s], hi = s < 0 ? 0 : c.pad_hi[s];
    l.pad[d] = std::min(lo, hi);
    l.m_lo[d] = lo - l.pad[d];
    l.m_hi[d] = hi - l.pad[d];
    l.asymmetric = l.asymmetric || lo != hi;
    l.out[d] = s < 0 ? 1 : c.out(s);
  }
  // A lifted extent-1 dim gets the stride of a packed row of the next dim.
  for (int d = l.ns - 1; d >= 0; --d) {
    const int s = d - lead;
    l.xs[2 + d] = s >= 0 ? xs[2 + s] : l.xs[3 + d] * l.in[d + 1];
  }
  return l;
}

cudnnDataType_t dtype(DType t) {
  return t == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

// Dense row-major strides of dims[0..n).
void dense_strides(const int* dims, int n, int* strides) {
  Index acc = 1;
  for (int d = n - 1; d >= 0; --d) {
    strides[d] = to_int(acc, "a tensor stride");
    acc *= dims[d];
  }
}

// The fastest algorithm cuDNN timed (Find, once per plan; its heuristic order where Find
// fails) that works and fits the workspace cap: in float32 FMA math (the descriptors ask
// for CUDNN_FMA_MATH; a default-math result only if none is FMA), and deterministic ones
// first, so that repeated runs give the same bits.
template <class Perf>
bool pick(const Perf* perf, int n, DType t, Perf& chosen) {
  for (int pass = 0; pass < 4; ++pass)
    for (int i = 0; i < n; ++i) {
      const Perf& p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxWorkspace) continue;
      const bool fma_pass = pass < 2, deterministic_pass = pass % 2 == 0;
      if (t == DType::f32 && p.mathType != (fma_pass ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH))
        continue;
      if (deterministic_pass && p.determinism != CUDNN_DETERMINISTIC) continue;
      chosen = p;
      return true;
    }
  return false;
}

struct Plan {
  ConvDesc c;
  Lifted l;
  bool stage = false;  // x (and dx) go through a dense buffer with zero margins
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv[3] = {nullptr, nullptr, nullptr};  // fwd, bwd data, bwd w
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
  cudnnConvolutionBwdFilterAlgo_t bwd_w_algo{};
  std::size_t workspace = 0;
  std::size_t stage_bytes = 0;  // of the staged x (and of cuDNN's dx in that layout)
  StridedCopy to_stage, from_stage;
  Index stage_offset = 0;  // element offset of x's origin inside the staging buffer

  Plan(cudnnHandle_t h, const ConvDesc& c_, bool staged) : c(c_), l(lift(c_)), stage(staged) {
    try {
      build(h);
    } catch (...) {
      release();
      throw;
    }
  }
  ~Plan() { release(); }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  bool ok = true;  // every pass has an algorithm

 private:
  void build(cudnnHandle_t h) {
    const int nb = l.ns + 2;
    const cudnnDataType_t dt = dtype(c.type);
    int xd[5], xst[5], yd[5], yst[5], wd[5], bd[5], bst[5];
    xd[0] = to_int(c.n, "n"), xd[1] = to_int(c.c_in, "c_in");
    yd[0] = xd[0], yd[1] = to_int(c.c_out, "c_out");
    wd[0] = yd[1], wd[1] = to_int(c.c_in / c.groups, "c_in/groups");
    bd[0] = 1, bd[1] = yd[1];
    int pad[3], str[3], dil[3];
    for (int d = 0; d < l.ns; ++d) {
      xd[2 + d] = to_int(stage ? l.in[d] + l.m_lo[d] + l.m_hi[d] : l.in[d], "in");
      yd[2 + d] = to_int(l.out[d], "out");
      wd[2 + d] = to_int(l.k[d], "kernel");
      bd[2 + d] = 1;
      pad[d] = to_int(l.pad[d], "pad"), str[d] = to_int(l.s[d], "stride");
      dil[d] = to_int(l.dl[d], "dilation");
    }
    if (stage) {
      dense_strides(xd, nb, xst);
    } else {
      for (int d = 0; d < nb; ++d) xst[d] = to_int(l.xs[d], "x_strides");
    }
    dense_strides(yd, nb, yst);
    dense_strides(bd, nb, bst);
    TESSERA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    TESSERA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    TESSERA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&b));
    TESSERA_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    TESSERA_CUDNN_CHECK(cudnnSetTensorNdDescriptor(x, dt, nb, xd, xst));
    TESSERA_CUDNN_CHECK(cudnnSetTensorNdDescriptor(y, dt, nb, yd, yst));
    TESSERA_CUDNN_CHECK(cudnnSetTensorNdDescriptor(b, dt, nb, bd, bst));
    TESSERA_CUDNN_CHECK(cudnnSetFilterNdDescriptor(w, dt, CUDNN_TENSOR_NCHW, nb, wd));
    for (auto& cv : conv) {
      TESSERA_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&cv));
      TESSERA_CUDNN_CHECK(
          cudnnSetConvolutionNdDescriptor(cv, l.ns, pad, str, dil, CUDNN_CROSS_CORRELATION, dt));
      TESSERA_CUDNN_CHECK(cudnnSetConvolutionGroupCount(cv, to_int(c.groups, "groups")));
      TESSERA_CUDNN_CHECK(cudnnSetConvolutionMathType(
          cv, c.type == DType::f32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
    }
    // cuDNN's output extents must be ours.
    int od[5];
    TESSERA_CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(conv[0], x, w, nb, od));
    for (int d = 0; d < nb; ++d)
      if (od[d] != yd[d])
        throw Error("conv (cuDNN): output extent " + std::to_string(od[d]) + " in dim " +
                    std::to_string(d) + " differs from " + std::to_string(yd[d]) + " for " +
                    c.str());
    // Find allocates each candidate's workspace itself, outside the tracked allocator: blocks
    // kept in the device cache would make it skip candidates (or settle for the heuristic),
    // so a plan's choice would depend on what ran before. Once per plan.
    release_cached_device_memory();
    choose_algorithms(h);
    if (ok && stage) make_staging(xd);
  }

  // cuDNN's timed list of algorithms (Find), or its heuristic list where Find fails.
  template <class Perf, class FindFn, class GetFn>
  static int algorithms(Perf* perf, int count, FindFn find, GetFn get) {
    int n = 0;
    if (find(count, &n, perf) != CUDNN_STATUS_SUCCESS || n == 0) {
      // A Find that failed in an allocation may leave that error for the next launch
      // check to report against an unrelated kernel.
      (void)cudaGetLastError();
      TESSERA_CUDNN_CHECK(get(count, &n, perf));
    }
    return n;
  }

  void choose_algorithms(cudnnHandle_t h) {
    cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT], a1{};
    const int n1 = algorithms(
        pf, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
        [&](int c, int* n, auto* p) {
          return cudnnFindConvolutionForwardAlgorithm(h, x, w, conv[0], y, c, n, p);
        },
        [&](int c, int* n, auto* p) {
          return cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, conv[0], y, c, n, p);
        });
    const bool f1 = pick(pf, n1, c.type, a1);
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT], a2{};
    const int n2 = algorithms(
        pd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
        [&](int c, int* n, auto* p) {
          return cudnnFindConvolutionBackwardDataAlgorithm(h, w, y, conv[1], x, c, n, p);
        },
        [&](int c, int* n, auto* p) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, y, conv[1], x, c, n, p);
        });
    const bool f2 = pick(pd, n2, c.type, a2);
    cudnnConvolutionBwdFilterAlgoPerf_t pw[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT], a3{};
    const int n3 = algorithms(
        pw, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
        [&](int c, int* n, auto* p) {
          return cudnnFindConvolutionBackwardFilterAlgorithm(h, x, y, conv[2], w, c, n, p);
        },
        [&](int c, int* n, auto* p) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, conv[2], w, c, n, p);
        });
    const bool f3 = pick(pw, n3, c.type, a3);
    ok = f1 && f2 && f3;
    if (!ok) return;
    fwd_algo = a1.algo, bwd_data_algo = a2.algo, bwd_w_algo = a3.algo;
    if (c.type == DType::f64) {  // float32 stays on FMA math (no TF32)
      TESSERA_CUDNN_CHECK(cudnnSetConvolutionMathType(conv[0], a1.mathType));
      TESSERA_CUDNN_CHECK(cudnnSetConvolutionMathType(conv[1], a2.mathType));
      TESSERA_CUDNN_CHECK(cudnnSetConvolutionMathType(conv[2], a3.mathType));
    }
    std::size_t s1 = 0, s2 = 0, s3 = 0;
    TESSERA_CUDNN_CHECK(
        cudnnGetConvolutionForwardWorkspaceSize(h, x, w, conv[0], y, fwd_algo, &s1));
    TESSERA_CUDNN_CHECK(
        cudnnGetConvolutionBackwardDataWorkspaceSize(h, w, y, conv[1], x, bwd_data_algo, &s2));
    TESSERA_CUDNN_CHECK(
        cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x, y, conv[2], w, bwd_w_algo, &s3));
    workspace = std::max({s1, s2, s3});
  }

  void make_staging(const int* xd) {
    const int nb = l.ns + 2;
    Index st[5], acc = 1, elems = 1;
    for (int d = nb - 1; d >= 0; --d) st[d] = acc, acc *= xd[d];
    elems = acc;
    stage_offset = 0;
    for (int d = 0; d < l.ns; ++d) stage_offset += l.m_lo[d] * st[2 + d];
    const Index ext[5] = {c.n, c.c_in, l.in[0], l.in[1], l.in[2]};
    to_stage.ndim = from_stage.ndim = nb;
    for (int d = 0; d < nb; ++d) {
      to_stage.shape[d] = from_stage.shape[d] = ext[d];
      to_stage.src_stride[d] = from_stage.dst_stride[d] = l.xs[d];
      to_stage.dst_stride[d] = from_stage.src_stride[d] = st[d];
    }
    stage_bytes = static_cast<std::size_t>(elems) * size_of(c.type);
  }

  void release() noexcept {
    // Errors while tearing down (e.g. at process exit) are not actionable: ignored.
    if (x) (void)cudnnDestroyTensorDescriptor(x);
    if (y) (void)cudnnDestroyTensorDescriptor(y);
    if (b) (void)cudnnDestroyTensorDescriptor(b);
    if (w) (void)cudnnDestroyFilterDescriptor(w);
    for (auto& cv : conv)
      if (cv) (void)cudnnDestroyConvolutionDescriptor(cv);
    x = y = b = nullptr, w = nullptr;
    for (auto& cv : conv) cv = nullptr;
  }
};

struct DescHash {
  std::size_t operator()(const ConvDesc& c) const { return c.hash(); }
};

// Everything cuDNN needs on one device. Deliberately leaked at exit: destroying
// handles after the CUDA runtime has shut down fails.
struct DeviceState {
  std::mutex mutex;
  cudnnHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  std::unordered_map<ConvDesc, std::unique_ptr<Plan>, DescHash> plans;

  void* workspace_of(std::size_t bytes) {
    if (bytes > workspace_bytes) {
      mem_free(MemSpace::Cuda, workspace, workspace_bytes);
      workspace = nullptr, workspace_bytes = 0;
      workspace = mem_alloc(MemSpace::Cuda, bytes);
      workspace_bytes = bytes;
    }
    return workspace;
  }
  const Plan& plan(const ConvDesc& c) {
    auto it = plans.find(c);
    if (it != plans.end()) return *it->second;
    const bool asym = lift(c).asymmetric;
    std::unique_ptr<Plan> p;
    if (!asym) {
      // The caller's x as it is; a strided x that cuDNN rejects or has no algorithm for
      // falls through to the staged plan below.
      try {
        p = std::make_unique<Plan>(handle, c, false);
      } catch (const Error&) {
        if (c.x_dense()) throw;
      }
    }
    if (!p || !p->ok) p = std::make_unique<Plan>(handle, c, true);
    if (!p->ok)
      throw Error("conv (cuDNN): no algorithm for every pass of " + c.str() +
                  " within the workspace cap");
    return *plans.emplace(c, std::move(p)).first->second;
  }
};

// The current device's state, locked for the duration of one call.
struct Session {
  DeviceState& dev;
  std::unique_lock<std::mutex> lock;
  const Plan& p;

  static DeviceState& current() {
    static std::mutex m;
    static auto* states = new std::map<int, std::unique_ptr<DeviceState>>();
    int d = -1;
    TESSERA_CUDA_CHECK(cudaGetDevice(&d));
    std::lock_guard<std::mutex> g(m);
    auto& s = (*states)[d];
    if (!s) {
      auto n = std::make_unique<DeviceState>();
      TESSERA_CUDNN_CHECK(cudnnCreate(&n->handle));
      s = std::move(n);
    }
    return *s;
  }
  // The handle runs on the caller's stream for this call.
  Session(const Device& d, const ConvDesc& c) : dev(current()), lock(dev.mutex), p(dev.plan(c)) {
    TESSERA_CUDNN_CHECK(cudnnSetStream(dev.handle, static_cast<cudaStream_t>(d.stream)));
  }
};

// alpha/beta in the compute type: double for float64, float otherwise.
struct Scale {
  float f;
  double d;
  explicit Scale(double v) : f(static_cast<float>(v)), d(v) {}
  const void* of(DType t) const { return t == DType::f64 ? static_cast<const void*>(&d) : &f; }
};

void check_call_args(const ConvDesc& c, const char* where, std::initializer_list<const void*> ps) {
  c.validate();
  for (const void* p : ps)
    if (!p) throw Error(std::string(where) + ": null tensor pointer");
}

char* at(void* base, Index elems, DType t) {
  return static_cast<char*>(base) + elems * static_cast<Index>(size_of(t));
}

// A staging buffer of the plan's size for one call (none where the plan stages nothing).
struct Stage : TrackedBlock {
  explicit Stage(const Plan& p) : TrackedBlock(MemSpace::Cuda, p.stage ? p.stage_bytes : 0) {}
};

// The pointer cuDNN sees as x: the caller's, or a dense staging copy of it with zero
// margins (the padding cuDNN's symmetric padding leaves out).
const void* x_for_cudnn(const Device& dev, const ConvDesc& c, const Plan& p, const void* x,
                        const Stage& stage) {
  if (!p.stage) return x;
  TESSERA_CUDA_CHECK(
      cudaMemsetAsync(stage.get(), 0, p.stage_bytes, static_cast<cudaStream_t>(dev.stream)));
  cuda::strided_copy(dev, at(stage.get(), p.stage_offset, c.type), x, p.to_stage, size_of(c.type));
  return stage.get();
}

}  // namespace

void cuda::conv_forward(const Device& dev, const ConvDesc& c, const void* x, const void* w,
                        const void* bias, void* y) {
  check_call_args(c, "conv_forward_cuda", {x, w, y});
  Session s(dev, c);
  const Plan& p = s.p;
  const Scale one(1), zero(0);
  const Stage stage(p);
  const void* xp = x_for_cudnn(dev, c, p, x, stage);
  void* ws = s.dev.workspace_of(p.workspace);
  TESSERA_CUDNN_CHECK(cudnnConvolutionForward(s.dev.handle, one.of(c.type), p.x, xp, p.w, w,
                                              p.conv[0], p.fwd_algo, ws, p.workspace,
                                              zero.of(c.type), p.y, y));
  if (bias)
    TESSERA_CUDNN_CHECK(
        cudnnAddTensor(s.dev.handle, one.of(c.type), p.b, bias, one.of(c.type), p.y, y));
  device::count_launches(bias ? 2 : 1);
}

void cuda::conv_backward_data(const Device& dev, const ConvDesc& c, const void* dy, const void* w,
                              void* dx) {
  check_call_args(c, "conv_backward_data_cuda", {dy, w, dx});
  Session s(dev, c);
  const Plan& p = s.p;
  const Scale one(1), zero(0);
  const Stage dx_stage(p);  // cuDNN's dx in the staged layout, written whole
  void* ws = s.dev.workspace_of(p.workspace);
  TESSERA_CUDNN_CHECK(cudnnConvolutionBackwardData(
      s.dev.handle, one.of(c.type), p.w, w, p.y, dy, p.conv[1], p.bwd_data_algo, ws, p.workspace,
      zero.of(c.type), p.x, p.stage ? dx_stage.get() : dx));
  if (p.stage)
    cuda::strided_copy(dev, dx, at(dx_stage.get(), p.stage_offset, c.type), p.from_stage,
                       size_of(c.type));
  device::count_launches();
}

void cuda::conv_backward_weights(const Device& dev, const ConvDesc& c, const void* x,
                                 const void* dy, void* dw, void* dbias) {
  check_call_args(c, "conv_backward_weights_cuda", {x, dy, dw});
  Session s(dev, c);
  const Plan& p = s.p;
  const Scale one(1), zero(0);
  const Stage stage(p);
  const void* xp = x_for_cudnn(dev, c, p, x, stage);
  void* ws = s.dev.workspace_of(p.workspace);
  TESSERA_CUDNN_CHECK(cudnnConvolutionBackwardFilter(s.dev.handle, one.of(c.type), p.x, xp, p.y, dy,
                                                     p.conv[2], p.bwd_w_algo, ws, p.workspace,
                                                     zero.of(c.type), p.w, dw));
  if (dbias)
    TESSERA_CUDNN_CHECK(cudnnConvolutionBackwardBias(s.dev.handle, one.of(c.type), p.y, dy,
                                                     zero.of(c.type), p.b, dbias));
  device::count_launches(dbias ? 2 : 1);
}

}  // namespace tessera::kernels
