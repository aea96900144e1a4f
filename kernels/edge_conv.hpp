#pragma once
// The local part of a point convolution over neighbour lists (EdgeConv / PointNet++ set
// abstraction without sampling): for point i and each of its k neighbours j (index -1: no
// neighbour), the edge feature e_ij = [f_j, x_j - x_i] (C + 3 values) goes through one
// Linear and an activation, h_ij = act(W e_ij + b), and the edges are reduced per output
// channel, y_i = max_j h_ij or mean_j h_ij over the existing neighbours (0 if none).
// Backward: the max routes each channel's gradient to its first maximal edge (neighbours
// come ordered by (distance, global id), so the choice is the same at every decomposition);
// the mean spreads it evenly. Host: oneDNN's sgemm (float32) or double loops (float64), dW and
// db accumulated per output channel, so results do not depend on the thread count. CUDA:
// cuBLAS GEMMs; the bias, the reduction and its adjoint are the host's functors
// (edge_conv_impl.hpp). Buffers live in the memory of `dev`; dw and db are float64 there.
#include "kernels/floor.hpp"
#include <cstdint>

#include "decomp/dtype.hpp"
#include "decomp/index.hpp"
#include "kernels/activation.hpp"
#include "kernels/device/device.hpp"

namespace tessera::kernels {

struct EdgeConvShape {
  Index points = 0, neighbours = 0;  // m, k
  Index edge = 0, out = 0;           // C + 3, C_out
  bool mean = false;                 // reduction: max (false) or mean
  Activation activation = Activation::GELU;
};

// edges (m, k, edge), ids (m, k) (-1: none), w (out, edge), b (out) -> z (m, k, out) (the
// pre-activations, for backward), y (m, out), argmax (m, out) (max: the chosen neighbour).
void edge_conv_forward(const Device& dev, DType t, const EdgeConvShape& s, const void* edges,
                       const std::int64_t* ids, const void* w, const void* b, void* z, void* y,
                       std::int64_t* argmax);
// dy (m, out) -> dedges (m, k, edge) overwritten; dw (out, edge), db (out) float64, added to.
void edge_conv_backward(const Device& dev, DType t, const EdgeConvShape& s, const void* edges,
                        const std::int64_t* ids, const void* w, const void* z,
                        const std::int64_t* argmax, const void* dy, void* dedges, double* dw,
                        double* db);

namespace cpu {
void edge_conv_forward(DType t, const EdgeConvShape& s, const void* edges, const std::int64_t* ids,
                       const void* w, const void* b, void* z, void* y, std::int64_t* argmax);
void edge_conv_backward(DType t, const EdgeConvShape& s, const void* edges, const std::int64_t* ids,
                        const void* w, const void* z, const std::int64_t* argmax, const void* dy,
                        void* dedges, double* dw, double* db);
}  // namespace cpu
namespace cuda {
void edge_conv_forward(const Device& dev, DType t, const EdgeConvShape& s, const void* edges,
                       const std::int64_t* ids, const void* w, const void* b, void* z, void* y,
                       std::int64_t* argmax);
void edge_conv_backward(const Device& dev, DType t, const EdgeConvShape& s, const void* edges,
                        const std::int64_t* ids, const void* w, const void* z,
                        const std::int64_t* argmax, const void* dy, void* dedges, double* dw,
                        double* db);
}  // namespace cuda

}  // namespace tessera::kernels
