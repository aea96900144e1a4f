#pragma once
// WindowCopyLayer: the sharded frame of a layer whose outputs are fixed linear combinations
// of input cells near them, with no parameters and nothing kept for backward (upsampling,
// padding): each rank fills a halo sized to the input cells its output block reads (the
// subclass's reach), runs the local kernel on that window, and backward runs the kernel's
// adjoint into a zeroed padded buffer whose ghosts the adjoint exchange adds into their
// owners. The subclass gives the output spec, the reach and the two local kernel calls.
#include "runtime/floor.hpp"
#include <memory>
#include <string>
#include <vector>

#include "decomp/window_halo.hpp"
#include "runtime/nn/layer.hpp"

namespace tessera {

struct WindowPlan;

class WindowCopyLayer : public Layer {
 public:
  // nd: the spatial dims the layer works on.
  explicit WindowCopyLayer(int nd);
  ~WindowCopyLayer() override;

  ShardTensor forward(const ShardTensor& x) override;
  ShardTensor backward(const ShardTensor& dy) override;
  // Ghost room (Layer::input_room): the plan's widths; the input gradient in its frame.
  HaloWidths input_room(const Mesh& mesh, const ShardSpec& in) override;
  ShardTensor backward_in_room(const ShardTensor& dy) override { return backward_impl(dy, true); }
  bool keeps_input() const override { return false; }
  // One pass over x and y forward, two backward (and flops_per_output per output cell);
  // the halo of the plan forward() makes.
  OpCost cost(const ShardSpec& in, const ShardSpec& out, DType dtype) const override;
  // The input cells each output block reads, per dim of an input spec.
  virtual std::vector<HaloReach> reach(const ShardSpec& in) const = 0;

 protected:
  // This rank's window: the input cells xw holds (global box `in_box`) and the output block
  // y (global box `out_box`, not empty) of an input of global shape `in_shape`.
  struct Window {
    Box in_box, out_box;
    std::vector<Index> in_shape;
  };
  // y = the output block from the input window xw (strided); saves what backward needs.
  virtual void forward_window(const Window& w, const Tensor& xw, const Tensor& y) = 0;
  // dxw (the input window's frame, overwritten) = the adjoint applied to dy (contiguous),
  // for the window of the last forward_window.
  virtual void backward_window(const Tensor& dy, const Tensor& dxw) = 0;
  virtual double flops_per_output() const { return 0.0; }
  // The fields the window kernels' descriptors share (kernels/window_geom.hpp): nd, batch and
  // channels, the global input extent, the input and output windows, and x's strides (also
  // set_x_strides alone: backward's dx frame).
  template <class Desc>
  static void describe_window(Desc& d, int nd, const Window& w, const Tensor& xw) {
    d.nd = nd;
    d.n = w.out_box.extent(0);
    d.c = w.out_box.extent(1);
    for (int k = 0; k < nd; ++k) {
      d.in_global[k] = w.in_shape[2 + k];
      d.in_lo[k] = w.in_box.lo[2 + k];
      d.in_n[k] = w.in_box.extent(2 + k);
      d.out_lo[k] = w.out_box.lo[2 + k];
      d.out_n[k] = w.out_box.extent(2 + k);
    }
    set_x_strides(d, xw);
  }
  template <class Desc>
  static void set_x_strides(Desc& d, const Tensor& x) {
    for (int k = 0; k < d.nd + 2; ++k) d.x_strides[k] = x.strides()[k];
  }

 private:
  ShardTensor backward_impl(const ShardTensor& dy, bool keep_room);
  WindowPlan& plan_for(const Mesh& mesh, const ShardSpec& in);
  int nd_;
  std::unique_ptr<WindowPlan> plan_;  // reused while the input layout stays the same
  MemSpace space_ = MemSpace::Host;
  DType dtype_ = DType::f32;
  bool have_forward_ = false, worked_ = false;
};

}  // namespace tessera
