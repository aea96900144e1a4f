#pragma once
// A block of tracked memory (mem_alloc: counted, under the memory limit) in one space, freed
// on scope exit. On the device the free is in stream order: the device cache hands the block
// on only to work queued after what used it.
#include "kernels/floor.hpp"
#include <cstddef>

#include "kernels/device/memory.hpp"

namespace tessera::kernels {

class TrackedBlock {
 public:
  TrackedBlock(MemSpace space, std::size_t bytes)
      : space_(space), bytes_(bytes), p_(bytes ? mem_alloc(space, bytes) : nullptr) {}
  ~TrackedBlock() { mem_free(space_, p_, bytes_); }
  TrackedBlock(const TrackedBlock&) = delete;
  TrackedBlock& operator=(const TrackedBlock&) = delete;
  void* get() const { return p_; }  // null for 0 bytes

 private:
  MemSpace space_;
  std::size_t bytes_;
  void* p_;
};

}  // namespace tessera::kernels
