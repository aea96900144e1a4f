#pragma once
// Memory accounting: every tensor allocation goes through here, so benchmarks and
// the training log can report current and peak bytes per rank and memory space.
#include "kernels/floor.hpp"
#include <cstddef>
#include <string>

#include "decomp/mem_space.hpp"

namespace tessera {

struct MemoryStats {
  std::size_t current = 0;
  std::size_t peak = 0;
};

MemoryStats memory_stats(MemSpace s);
void reset_peak_memory(MemSpace s);  // peak := current

// Host blocks of >= 1 MiB freed by tensors are cached for reuse (up to
// TESSERA_HOST_CACHE_MB, default 4096); they do not count as current bytes.
std::size_t cached_host_bytes();
std::size_t release_cached_host_memory();  // returns the bytes given back to the OS

// Device blocks freed by tensors are cached for reuse too (any size, rounded up to 512
// bytes; up to TESSERA_DEVICE_CACHE_MB, default no limit, 0 turns it off), so a training
// step calls neither cudaMalloc nor cudaFree once the shapes repeat. A failed cudaMalloc
// gives the cache back and tries again; cached bytes are free for the memory checks.
std::size_t cached_device_bytes();
std::size_t release_cached_device_memory();  // waits for the device, then cudaFree's them

// A per-rank cap on the tracked bytes of each memory space: an allocation that would take
// current use past it throws a tessera::Error naming the request, the limit and the use,
// so a run can model a smaller machine (capacity benchmarks) or fail early and clearly.
// The start value is TESSERA_MEMORY_LIMIT_MB (MiB; unset or 0: no limit).
std::size_t memory_limit();  // bytes, 0: none
// 0: none. `named`: what the refusal says the limit is ("this rank's share of the node's
// available memory, 5.5 GiB"); empty: "TESSERA_MEMORY_LIMIT_MB = X per rank".
void set_memory_limit(std::size_t bytes, const std::string& named = "");

// Raw allocation in a memory space, 64-byte aligned on the host. Tracked; honours the
// memory limit.
void* mem_alloc(MemSpace s, std::size_t bytes);
void mem_free(MemSpace s, void* p, std::size_t bytes) noexcept;

}  // namespace tessera
