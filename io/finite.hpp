#pragma once
// Where the first non-finite value (NaN, +-Inf) of a tensor is: the checks that keep
// non-finite values out of training, checkpoints and loaded data.
#include "io/floor.hpp"
#include <string>
#include <vector>

#include "runtime/tensor/named_tensor.hpp"

namespace tessera::io {

// Flat (row-major) index of the first non-finite element of t (any memory space; float
// types; other types are finite), -1 when there is none.
Index first_nonfinite(const Tensor& t);
// "WHAT NAME (element I = nan)" for the first tensor of ts holding a non-finite value,
// "" when all are finite. `what` says what they are ("parameter", "gradient of"). Entries
// made when used (NamedTensor::make) are skipped.
std::string first_nonfinite(const std::vector<NamedTensor>& ts, const std::string& what);

}  // namespace tessera::io
