#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
// a counter-based generator. The output is a pure function of (key, counter), so a
// value keyed by (seed, sample, global cell or mode) is the same on any rank at any
// rank count, with no state to split or skip ahead.
#include <array>
#include <cmath>
#include <cstdint>

namespace tessera::prep {

using Philox4 = std::array<std::uint32_t, 4>;

inline Philox4 philox4x32(Philox4 ctr, std::uint64_t seed) {
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t(0xD2511F53u) * ctr[0];
    const std::uint64_t p1 = std::uint64_t(0xCD9E8D57u) * ctr[2];
    ctr = {static_cast<std::uint32_t>(p1 >> 32) ^ ctr[1] ^ k0, static_cast<std::uint32_t>(p1),
           static_cast<std::uint32_t>(p0 >> 32) ^ ctr[3] ^ k1, static_cast<std::uint32_t>(p0)};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return ctr;
}

// Four uniform doubles in (0, 1) ... as two pairs of 53-bit values, and Gaussians from
// them by Box-Muller: the stream `stream` of item `item` of sample `sample`.
struct Draw {
  double u[2];
};
inline Draw uniform2(std::uint64_t seed, std::uint64_t sample, std::uint64_t item,
                     std::uint32_t stream) {
  const Philox4 r =
      philox4x32({static_cast<std::uint32_t>(item), static_cast<std::uint32_t>(item >> 32),
                  static_cast<std::uint32_t>(sample),
                  stream ^ static_cast<std::uint32_t>(sample >> 32) * 0x9E3779B9u},
                 seed);
  const std::uint64_t a = (std::uint64_t(r[0]) << 32 | r[1]) >> 11;
  const std::uint64_t b = (std::uint64_t(r[2]) << 32 | r[3]) >> 11;
  const double s = 1.0 / 9007199254740992.0;  // 2^-53
  return {{(static_cast<double>(a) + 0.5) * s, (static_cast<double>(b) + 0.5) * s}};
}
inline std::array<double, 2> gaussian2(std::uint64_t seed, std::uint64_t sample, std::uint64_t item,
                                       std::uint32_t stream) {
  const Draw d = uniform2(seed, sample, item, stream);
  const double r = std::sqrt(-2.0 * std::log(d.u[0])), t = 6.283185307179586 * d.u[1];
  return {r * std::cos(t), r * std::sin(t)};
}

}  // namespace tessera::prep
