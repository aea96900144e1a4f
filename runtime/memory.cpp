#include "runtime/memory.hpp"

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "runtime/device.hpp"
#include "runtime/error.hpp"

namespace tessera {
namespace {
struct Counter {
  std::atomic<std::size_t> current{0}, peak{0};
  void add(std::size_t b) {
    const std::size_t now = current.fetch_add(b) + b;
    std::size_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
  }
  void sub(std::size_t b) { current.fetch_sub(b); }
};
Counter& counter(MemSpace s) {
  static Counter host, cuda;
  return s == MemSpace::Host ? host : cuda;
}
}  // namespace

const char* name_of(MemSpace s) { return s == MemSpace::Host ? "host" : "cuda"; }

MemoryStats memory_stats(MemSpace s) {
  return {counter(s).current.load(), counter(s).peak.load()};
}

void reset_peak_memory(MemSpace s) { counter(s).peak.store(counter(s).current.load()); }

void* mem_alloc(MemSpace s, std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  if (s == MemSpace::Host) {
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    p = std::aligned_alloc(64, rounded);
    if (!p) throw Error("host allocation of " + std::to_string(bytes) + " bytes failed");
  } else {
    p = device::alloc(bytes);
  }
  counter(s).add(bytes);
  return p;
}

void mem_free(MemSpace s, void* p, std::size_t bytes) noexcept {
  if (!p) return;
  if (s == MemSpace::Host)
    std::free(p);
  else
    device::free(p);
  counter(s).sub(bytes);
}

}  // namespace tessera
