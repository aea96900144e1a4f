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
