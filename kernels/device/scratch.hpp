#pragma once
// Host scratch of the kernels, tracked like a tensor: counted in memory_stats (so peak
// figures are true) and refused past TESSERA_MEMORY_LIMIT_MB with the allocator's error,
// where a plain std::vector would be neither. Allocate it before a parallel region (an
// exception must not leave one): ScratchVector for a buffer shared by the region,
// ThreadScratch for one slice per thread.
#include "kernels/floor.hpp"
#include <omp.h>

#include <cstddef>
#include <vector>

#include "kernels/device/memory.hpp"

namespace tessera::kernels {

template <class T>
struct TrackedAllocator {
  using value_type = T;
  TrackedAllocator() = default;
  template <class U>
  TrackedAllocator(const TrackedAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(mem_alloc(MemSpace::Host, n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { mem_free(MemSpace::Host, p, n * sizeof(T)); }
  template <class U>
  bool operator==(const TrackedAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using ScratchVector = std::vector<T, TrackedAllocator<T>>;

// `per_thread` elements for each thread of the next parallel region, in one tracked block.
template <class T>
class ThreadScratch {
 public:
  explicit ThreadScratch(std::size_t per_thread)
      : per_(per_thread), data_(per_thread * static_cast<std::size_t>(omp_get_max_threads())) {}
  // This thread's slice (call inside the region).
  T* mine() { return data_.data() + per_ * static_cast<std::size_t>(omp_get_thread_num()); }
  std::size_t per_thread() const { return per_; }

 private:
  std::size_t per_;
  ScratchVector<T> data_;
};

}  // namespace tessera::kernels
