#pragma once
// ParameterShard: a parameter held in blocks (dfno's mode-sharded spectral weights). Each
// rank's Parameter::value and grad are its block of one global tensor; the blocks tile the
// global tensor over the mesh axes `axes` and are replicated over the others, so:
//   - the gradient of a block is reduced (GradSync) only over axes outside `axes`, among
//     ranks holding the same block;
//   - an optimizer updates each block locally, element for element as the global update;
//   - norms sum each block once (over the `axes` communicator);
//   - checkpoints store the global tensor (gathered here), so a run restarts at any rank
//     count, with the blocks of its own decomposition.
#include "runtime/floor.hpp"
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "decomp/box.hpp"
#include "runtime/comm/axes_comm.hpp"
#include "runtime/nn/layer.hpp"

namespace tessera {

struct ParameterShard {
  std::vector<Index> global_shape;
  Box block;              // this rank's block of the global tensor
  std::vector<int> axes;  // mesh axes over which the blocks differ, ascending
  AxesComm comm;          // the ranks over `axes`: together they hold every block once
};

// A parameter's initial value, allocated when it is laid out: entry i of the global tensor
// (row-major) is at(i), a function of i alone (counter-based random numbers), so a rank
// fills just its block and the blocks equal the whole at any rank count. A whole table or
// weight made first on every rank would cost, at build time, what sharding it saves.
struct DeferredValue {
  std::vector<Index> shape;
  DType dtype = DType::f32;
  MemSpace space = MemSpace::Host;
  std::function<double(Index)> at;
};

// Defers p's value (p then awaits its layout; no communication).
void defer_value(Parameter& p, DeferredValue d);
// Allocates a deferred parameter's whole value (and a zero gradient): a layout that keeps it
// whole, or values loaded before any layout. With `initial` false the value is left
// undefined for the caller to overwrite whole (a load), and not computed. Nothing for a
// parameter that holds its value.
void materialize(Parameter& p, bool initial = true);
// The value of a deferred parameter's block `block` of the global tensor, on the host.
Tensor deferred_block(const DeferredValue& d, const Box& block);

// Counter-based random numbers: uniform in [0, 1), and standard normal (Box-Muller over two
// uniforms), each a function of (seed, i) alone.
double counter_uniform(std::uint64_t seed, std::uint64_t i);
double counter_normal(std::uint64_t seed, std::uint64_t i);

// Shards a parameter that holds its global value (or defers it): keeps the block `block` (value,
// and a zero gradient) in the value's memory space. Collective over the mesh (the communicator of
// `axes`). Checks that the blocks over `axes` tile the global tensor.
void shard_parameter(Parameter& p, const Mesh& mesh, const Box& block, std::vector<int> axes);

// The global shape (the value's own for a replicated parameter).
std::vector<Index> global_shape(const Parameter& p);
// The element type (known before a deferred value is allocated).
DType parameter_dtype(const Parameter& p);
// A host copy of the global tensor whose local block (of p's layout) is `local` (p.value,
// p.grad or an optimizer state of p). Collective over p.shard's axes; local copy if p is
// replicated.
Tensor gather_global(const Parameter& p, const Tensor& local);
// This rank's block (of p's layout) of a global host tensor, as a host tensor.
Tensor local_block(const Parameter& p, const Tensor& global);
// Why p cannot be registered with a trainer yet ("" if it can).
std::string layout_problem(const Parameter& p);

}  // namespace tessera
