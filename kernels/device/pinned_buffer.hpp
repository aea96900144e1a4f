#pragma once
// PinnedBuffer: page-locked host memory that grows on demand and is kept, for staging
// device data through the host when MPI cannot take device pointers (DMA straight from
// and to it, no bounce through pageable memory).
#include "kernels/floor.hpp"
#include <cstddef>

#include "kernels/device/device.hpp"

namespace tessera {

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { device::free_pinned(p_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // At least `bytes` (contents not kept when it grows); null for zero bytes.
  unsigned char* reserve(std::size_t bytes) {
    if (bytes > bytes_) {
      device::free_pinned(p_);
      p_ = nullptr;
      bytes_ = 0;
      p_ = static_cast<unsigned char*>(device::alloc_pinned(bytes));
      bytes_ = bytes;
    }
    return p_;
  }
  unsigned char* data() const { return p_; }

 private:
  unsigned char* p_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace tessera
