#include "kernels/device/memory.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <iomanip>
#include <new>
#include <sstream>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "kernels/device/device.hpp"
#include "decomp/error.hpp"

namespace tessera {
namespace {
struct Counter {
  std::atomic<std::size_t> current{0}, peak{0};
  // Adds b unless that passes limit (0: none); returns false, counting nothing, then.
  // `before` is the use it saw.
  bool add(std::size_t b, std::size_t limit, std::size_t& before) {
    before = current.load();
    do {
      if (limit != 0 && before + b > limit) return false;
    } while (!current.compare_exchange_weak(before, before + b));
    const std::size_t now = before + b;
    std::size_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    return true;
  }
  void sub(std::size_t b) { current.fetch_sub(b); }
};
Counter& counter(MemSpace s) {
  static Counter host, cuda;
  return s == MemSpace::Host ? host : cuda;
}

// Large host blocks are mapped on their own, start on a 2 MiB boundary and ask for
// transparent huge pages: strided walks (halo W-faces, conv windows) touch a new 4 KiB
// page every few rows, and TLB misses then cost as much as the data. Mapping them directly
// (not through malloc) keeps the advice off memory malloc would hand to small objects
// later. TESSERA_HUGE_PAGES=0 turns this off.
constexpr std::size_t kHugePage = std::size_t(2) << 20;
bool huge_pages() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_HUGE_PAGES");
    return !(v && std::string(v) == "0");
  }();
  return on;
}
bool mapped_on_its_own(std::size_t bytes) {
  return huge_pages() && bytes >= 2 * kHugePage;
}
void* host_alloc(std::size_t bytes) {
  if (!mapped_on_its_own(bytes)) return std::aligned_alloc(64, bytes);
  // Over-map by one huge page, then trim the ends so the block starts aligned.
  const std::size_t span = bytes + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t end = (start + bytes + page - 1) / page * page;
  if (start > base) munmap(raw, start - base);
  if (base + span > end) munmap(reinterpret_cast<void*>(end), base + span - end);
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(start), bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<void*>(start);
}
void host_free(void* p, std::size_t bytes) {
  if (mapped_on_its_own(bytes))
    munmap(p, bytes);
  else
    std::free(p);
}

// Caching allocator: blocks freed by tensors are kept and handed out again for the same
// (rounded) size, so a loop that allocates the same shapes every step pays the system
// allocator once (as PyTorch's caching allocator). On the host that saves mmap, munmap and
// a page fault per 4 KiB; on the device it saves cudaMalloc and cudaFree, which waits for
// the whole device, so every freed temporary would stall the host behind the queued kernels.
// Device blocks are reused in stream order: they are freed and taken on the one current
// stream, and changing that stream empties the cache first.
class BlockCache {
 public:
  using Release = void (*)(void*, std::size_t);
  BlockCache(Release release, std::size_t min_bytes, std::size_t limit)
      : release_(release), min_bytes_(min_bytes), limit_(limit) {}
  // A block of `bytes` under `key` (the size; on the device the size and the device).
  void* take(std::size_t key, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(key);
    if (it == free_.end()) return nullptr;
    void* p = it->second;
    free_.erase(it);
    cached_ -= bytes;
    return p;
  }
  void* take(std::size_t bytes) { return take(bytes, bytes); }
  bool give(void* p, std::size_t key, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes < min_bytes_ || cached_ + bytes > limit_) return false;
    free_.emplace(key, p);
    cached_ += bytes;
    return true;
  }
  bool give(void* p, std::size_t bytes) { return give(p, bytes, bytes); }
  std::size_t release() {
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t n = cached_;
    for (auto& [key, p] : free_) release_(p, key);
    free_.clear();
    cached_ = 0;
    return n;
  }
  std::size_t cached() {
    std::lock_guard<std::mutex> lock(mu_);
    return cached_;
  }

 private:
  Release release_;
  std::size_t min_bytes_, limit_;
  std::mutex mu_;
  std::multimap<std::size_t, void*> free_;
  std::size_t cached_ = 0;
};

// Bytes from a variable in MiB (unset or empty: fallback_mib); past 2^43 MiB, no limit.
std::size_t mib_from_env(const char* var, std::size_t fallback_mib) {
  const char* v = std::getenv(var);
  if (!v || !*v) return fallback_mib << 20;
  char* end = nullptr;
  const double mb = std::strtod(v, &end);
  if (*end != '\0' || !(mb >= 0))
    throw Error(std::string(var) + " = '" + v + "' is not a number of MiB");
  return mb >= static_cast<double>(std::size_t(1) << 43) ? SIZE_MAX
                                                         : static_cast<std::size_t>(mb * (1 << 20));
}

// Host blocks of >= 1 MiB, up to TESSERA_HOST_CACHE_MB (default 4096).
struct HostCache : BlockCache {
  HostCache()
      : BlockCache([](void* p, std::size_t b) { host_free(p, b); }, std::size_t(1) << 20,
                   mib_from_env("TESSERA_HOST_CACHE_MB", 4096)) {}
  ~HostCache() { release(); }
};
HostCache& host_cache() {
  static HostCache c;
  return c;
}

// Device blocks of any size (rounded up to 512 bytes), up to TESSERA_DEVICE_CACHE_MB
// (default: no limit; a failed cudaMalloc empties the cache and tries again). Never
// destroyed: at exit the CUDA runtime may be gone before static destructors run.
constexpr std::size_t kDeviceGranule = 512;
BlockCache& device_cache() {
  static BlockCache* c =
      new BlockCache([](void* p, std::size_t) { device::free(p); }, 0,
                     mib_from_env("TESSERA_DEVICE_CACHE_MB", std::size_t(1) << 43));
  return *c;
}
std::size_t device_block(std::size_t bytes) {
  return (bytes + kDeviceGranule - 1) / kDeviceGranule * kDeviceGranule;
}
// A cached block's key: its size plus its device (below the granule), so that a block freed
// on one device is never handed to another's kernels (a second Context on another device, a
// tensor outliving a device switch). With one visible device, device 0 without asking.
std::size_t device_key(std::size_t block, int dev) {
  return block + static_cast<std::size_t>(dev % static_cast<int>(kDeviceGranule));
}
bool several_devices() {
  static const bool several = device::count() > 1;
  return several;
}
void* device_alloc(std::size_t bytes) {
  const std::size_t block = device_block(bytes);
  const int dev = several_devices() ? device::current() : 0;
  if (void* p = device_cache().take(device_key(block, dev), block)) return p;
  try {
    return device::alloc(block);
  } catch (const AllocationError&) {
    // Cached blocks of other sizes may be what is missing: give them back and try once more.
    if (release_cached_device_memory() == 0) throw;
    return device::alloc(block);
  }
}

std::atomic<std::size_t>& limit_bytes() {
  static std::atomic<std::size_t> l = mib_from_env("TESSERA_MEMORY_LIMIT_MB", 0);
  return l;
}

std::string mib(std::size_t bytes) {
  std::ostringstream os;
  os << std::setprecision(4) << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return os.str();
}

// What the limit is, for its refusals ("" : TESSERA_MEMORY_LIMIT_MB's).
std::mutex limit_name_mu;
std::string& limit_name() {
  static std::string n;
  return n;
}

// Counts the bytes, or refuses them (counting nothing) when they pass the limit.
void reserve(MemSpace s, std::size_t bytes) {
  const std::size_t limit = limit_bytes().load();
  std::size_t in_use = 0;
  if (counter(s).add(bytes, limit, in_use)) return;
  std::string named;
  {
    std::lock_guard<std::mutex> lock(limit_name_mu);
    // The name of this limit (another set since it was read: then the env's wording).
    if (limit_bytes().load() == limit) named = limit_name();
  }
  if (named.empty()) named = "TESSERA_MEMORY_LIMIT_MB = " + mib(limit) + " per rank";
  throw AllocationError("memory limit: allocating " + mib(bytes) + " (" + std::to_string(bytes) +
                        " bytes) of " + (s == MemSpace::Host ? "host" : "device") +
                        " memory would pass " + named + " (" + mib(in_use) + " in use)");
}
}  // namespace

std::size_t memory_limit() {
  return limit_bytes().load();
}
void set_memory_limit(std::size_t bytes, const std::string& named) {
  std::lock_guard<std::mutex> lock(limit_name_mu);
  limit_name() = named;
  limit_bytes().store(bytes);
}

std::size_t cached_host_bytes() {
  return host_cache().cached();
}
std::size_t release_cached_host_memory() {
  return host_cache().release();
}
std::size_t cached_device_bytes() {
  return device_cache().cached();
}
std::size_t release_cached_device_memory() {
  if (device_cache().cached() == 0) return 0;
  device::synchronize();  // queued kernels may still use the blocks cudaFree would return
  return device_cache().release();
}

MemoryStats memory_stats(MemSpace s) {
  return {counter(s).current.load(), counter(s).peak.load()};
}

void reset_peak_memory(MemSpace s) {
  counter(s).peak.store(counter(s).current.load());
}

void* mem_alloc(MemSpace s, std::size_t bytes) {
  if (bytes == 0) return nullptr;
  reserve(s, bytes);  // before the allocation: a refused request allocates nothing
  void* p = nullptr;
  if (s == MemSpace::Host) {
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    p = host_cache().take(rounded);
    if (!p) p = host_alloc(rounded);
    if (!p) {
      counter(s).sub(bytes);
      throw AllocationError("host allocation of " + std::to_string(bytes) + " bytes failed");
    }
  } else {
    try {
      p = device_alloc(bytes);
    } catch (...) {
      counter(s).sub(bytes);
      throw;
    }
  }
  return p;
}

void mem_free(MemSpace s, void* p, std::size_t bytes) noexcept {
  if (!p) return;
  if (s == MemSpace::Host) {
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    if (!host_cache().give(p, rounded)) host_free(p, rounded);
  } else {
    const std::size_t block = device_block(bytes);
    const int dev = several_devices() ? device::device_of(p) : 0;
    if (dev < 0 || !device_cache().give(p, device_key(block, dev), block)) device::free(p);
  }
  counter(s).sub(bytes);
}

}  // namespace tessera
