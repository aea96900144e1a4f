#pragma once
// Model: a trainable network on the layer graph, as the trainer, inference and checkpoints
// see it - the graph (parameters keyed by name), what inputs it takes, non-parameter state
// (BatchNorm statistics) and a signature that checkpoints store. UNet and FNO implement it.
#include "runtime/floor.hpp"
#include <string>
#include <vector>

#include "runtime/nn/graph.hpp"

namespace tessera {

class Model {
 public:
  virtual ~Model() = default;

  virtual Graph& graph() = 0;
  // Collective over x's mesh.
  ShardTensor forward(const ShardTensor& x) { return graph().forward(x); }
  ShardTensor backward(const ShardTensor& dy) { return graph().backward(dy); }

  // Why a global input shape (N, C, spatial...) cannot be taken, or "" if it can (the same
  // verdict on every rank: it depends on the shape only).
  virtual std::string input_problem(const std::vector<Index>& shape) const = 0;
  // Training mode (BatchNorm batch statistics) or evaluation.
  virtual void train(bool on) { (void)on; }

  // State that is not a parameter, for checkpoints.
  struct Buffer {
    std::string name;
    std::vector<double> value;
  };
  virtual std::vector<Buffer> buffers() const { return {}; }
  virtual void load_buffers(const std::vector<Buffer>& b) { (void)b; }

  // One line naming the architecture and every option that shapes a parameter; a
  // checkpoint of another signature is refused on resume.
  virtual std::string signature() const = 0;
};

}  // namespace tessera
