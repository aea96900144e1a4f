// The per-rank memory limit of the tracked allocator: allocations up to it succeed, one
// past it is refused with a message naming the request, the limit and the use, and a
// refusal leaves current and peak bytes as they were.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include <vector>

#include "decomp/error.hpp"
#include "kernels/attention.hpp"
#include "kernels/device/device.hpp"
#include "kernels/device/memory.hpp"

using namespace tessera;

namespace {
// Restores the limit a test case found, so cases do not leak theirs into each other.
struct LimitGuard {
  std::size_t saved = memory_limit();
  ~LimitGuard() { set_memory_limit(saved); }
};
constexpr std::size_t kMiB = std::size_t{1} << 20;
}  // namespace

TEST_CASE("Memory limit: allocations up to it succeed, past it are refused", "[memory]") {
  LimitGuard guard;
  const std::size_t base = memory_stats(MemSpace::Host).current;
  set_memory_limit(base + 3 * kMiB);
  void* a = mem_alloc(MemSpace::Host, 2 * kMiB);
  void* b = mem_alloc(MemSpace::Host, kMiB);  // exactly at the limit
  CHECK(memory_stats(MemSpace::Host).current == base + 3 * kMiB);
  reset_peak_memory(MemSpace::Host);

  std::string msg;
  try {
    mem_alloc(MemSpace::Host, 1536);
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("memory limit") != std::string::npos);
  CHECK(msg.find("1536 bytes") != std::string::npos);               // the request
  CHECK(msg.find("TESSERA_MEMORY_LIMIT_MB") != std::string::npos);  // the limit, by name
  CHECK(msg.find("in use") != std::string::npos);
  CHECK(msg.find("host") != std::string::npos);
  // Nothing was counted for the refused request.
  CHECK(memory_stats(MemSpace::Host).current == base + 3 * kMiB);
  CHECK(memory_stats(MemSpace::Host).peak == base + 3 * kMiB);

  mem_free(MemSpace::Host, b, kMiB);
  void* c = mem_alloc(MemSpace::Host, kMiB / 2);  // room again after a free
  mem_free(MemSpace::Host, c, kMiB / 2);
  mem_free(MemSpace::Host, a, 2 * kMiB);
  CHECK(memory_stats(MemSpace::Host).current == base);
}

TEST_CASE("Memory limit: the message gives the limit and the use in MiB", "[memory]") {
  LimitGuard guard;
  const std::size_t base = memory_stats(MemSpace::Host).current;
  REQUIRE(base == 0);  // this binary holds no tensors between cases
  set_memory_limit(4 * kMiB);
  void* a = mem_alloc(MemSpace::Host, 3 * kMiB);
  CHECK_THROWS_WITH(mem_alloc(MemSpace::Host, 2 * kMiB),
                    "memory limit: allocating 2 MiB (2097152 bytes) of host memory would pass "
                    "TESSERA_MEMORY_LIMIT_MB = 4 MiB per rank (3 MiB in use)");
  mem_free(MemSpace::Host, a, 3 * kMiB);
}

TEST_CASE("Memory limit: 0 means none", "[memory]") {
  LimitGuard guard;
  set_memory_limit(0);
  void* a = mem_alloc(MemSpace::Host, 64 * kMiB);
  CHECK(memory_stats(MemSpace::Host).current >= 64 * kMiB);
  mem_free(MemSpace::Host, a, 64 * kMiB);
}

TEST_CASE("Memory limit: kernels' host scratch is tracked like a tensor", "[memory]") {
  LimitGuard guard;
  set_memory_limit(0);
  // One query against 200000 keys: float32 attention holds one tile of scores per thread
  // (128 rows x 512 keys, whatever the key count: 256 KiB) in tracked scratch
  // (kernels/device/scratch.hpp).
  kernels::AttentionDesc a;
  a.sq = 1;
  a.sk = 200000;
  a.d = 4;
  const std::vector<float> q(4, 0.5f), k(static_cast<std::size_t>(a.sk * 4), 0.25f),
      v(static_cast<std::size_t>(a.sk * 4), 1.0f);
  std::vector<float> out(4, 0.0f);
  std::vector<double> lse(1, 0.0);
  const std::size_t base = memory_stats(MemSpace::Host).current;
  reset_peak_memory(MemSpace::Host);
  kernels::attention_forward(Device::host(), a, q.data(), k.data(), v.data(), out.data(),
                             lse.data());
  const std::size_t scratch = std::size_t{128} * 512 * sizeof(float);
  CHECK(memory_stats(MemSpace::Host).peak >= base + scratch);  // counted
  CHECK(memory_stats(MemSpace::Host).current == base);         // and given back
  CHECK(out[0] == Approx(1.0f).epsilon(1e-2));  // every value is 1 (float32 sums of 2e5)
  // Past the limit: the allocator's error, before any thread starts.
  set_memory_limit(base + scratch / 2);
  CHECK_THROWS_WITH(kernels::attention_forward(Device::host(), a, q.data(), k.data(), v.data(),
                                               out.data(), lse.data()),
                    Catch::Contains("would pass TESSERA_MEMORY_LIMIT_MB"));
  CHECK(memory_stats(MemSpace::Host).current == base);
}

// Run by the test memory_limit_env with TESSERA_MEMORY_LIMIT_MB=2.5 in the environment.
TEST_CASE("Memory limit: read from TESSERA_MEMORY_LIMIT_MB", "[.env]") {
  const char* v = std::getenv("TESSERA_MEMORY_LIMIT_MB");
  REQUIRE(v != nullptr);
  CHECK(memory_limit() == static_cast<std::size_t>(std::atof(v) * kMiB));
  CHECK_THROWS_WITH(mem_alloc(MemSpace::Host, memory_limit() + 1),
                    Catch::Contains("would pass TESSERA_MEMORY_LIMIT_MB"));
}
