// Host spectral mixing. All three products have one form: per mode m,
//   C(p, q, m) (+)= sum_r A(p, r, m) B(r, q, m)
// with A or B conjugated - a complex matrix product per mode, the modes contiguous in memory.
// The modes go in chunks of kChunk: a thread packs its chunk of A and B into split real and
// imaginary planes (conjugation applied while packing), so the inner loop is plain multiply-
// adds over the chunk's lanes with no shuffles, and each operand is read from memory once
// per chunk instead of once per output row (W, Cin x Cout x modes, was streamed once per
// sample). Outputs are computed two rows by two columns at a time, so every load feeds two
// products. Each output element sums over r in order in its own lane, whatever the chunk,
// the block or the thread, and the file is built without fused multiply-adds (CMake), so the
// streamed product rounds as the packed one: the bits depend on the operands alone.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/simd_clones.hpp"
#include "kernels/device/scratch.hpp"
#include "kernels/spectral_mix.hpp"

namespace tessera::kernels {
namespace {

constexpr Index kChunk = 16;  // complex modes per chunk: one AVX-512 vector per plane (float)

// Row k of an operand: the complex row base + (k_p * sp + k_q * sq) * modes, for rows
// indexed by (p, q) of the product's A (p, r), B (r, q) or C (p, q).
template <class R>
struct Operand {
  const R* base;
  Index s0, s1;  // row strides of the first and second index
  bool conj;
  const R* row(Index a, Index b, Index modes) const { return base + 2 * (a * s0 + b * s1) * modes; }
};

// Packs rows (a, b) for a < n0, b < n1 of op, modes [m0, m0 + mc), into planes re / im laid out
// [a][b][kChunk] (lanes past mc zero).
template <class R>
void pack(const Operand<R>& op, Index n0, Index n1, Index modes, Index m0, Index mc, R* re, R* im) {
  const R sign = op.conj ? R(-1) : R(1);
  for (Index a = 0; a < n0; ++a)
    for (Index b = 0; b < n1; ++b) {
      const R* src = op.row(a, b, modes) + 2 * m0;
      R* dr = re + (a * n1 + b) * kChunk;
      R* di = im + (a * n1 + b) * kChunk;
      for (Index m = 0; m < mc; ++m) {
        dr[m] = src[2 * m];
        di[m] = sign * src[2 * m + 1];
      }
      for (Index m = mc; m < kChunk; ++m) dr[m] = di[m] = R(0);
    }
}

// Lanes of c (re, im) += a * b over r, for two rows of A and two columns of B: a planes are
// [p][r][kChunk], b planes [q][r][kChunk] (B packed transposed, so r runs contiguous).
template <class R>
TESSERA_SIMD_CLONES void block_2x2(const R* __restrict ar0, const R* __restrict ai0,
                                   const R* __restrict ar1, const R* __restrict ai1,
                                   const R* __restrict br0, const R* __restrict bi0,
                                   const R* __restrict br1, const R* __restrict bi1, Index rn,
                                   R* __restrict c) {
  // c: 4 outputs (p0q0, p0q1, p1q0, p1q1) x (re, im) x kChunk
  R acc[8][kChunk];
  std::memcpy(acc, c, sizeof(acc));
  for (Index r = 0; r < rn; ++r) {
    const Index o = r * kChunk;
#pragma omp simd
    for (Index m = 0; m < kChunk; ++m) {
      const R xr0 = ar0[o + m], xi0 = ai0[o + m], xr1 = ar1[o + m], xi1 = ai1[o + m];
      const R yr0 = br0[o + m], yi0 = bi0[o + m], yr1 = br1[o + m], yi1 = bi1[o + m];
      acc[0][m] += xr0 * yr0 - xi0 * yi0;
      acc[1][m] += xr0 * yi0 + xi0 * yr0;
      acc[2][m] += xr0 * yr1 - xi0 * yi1;
      acc[3][m] += xr0 * yi1 + xi0 * yr1;
      acc[4][m] += xr1 * yr0 - xi1 * yi0;
      acc[5][m] += xr1 * yi0 + xi1 * yr0;
      acc[6][m] += xr1 * yr1 - xi1 * yi1;
      acc[7][m] += xr1 * yi1 + xi1 * yr1;
    }
  }
  std::memcpy(c, acc, sizeof(acc));
}

// C (P x Q rows) (+)= A (P x Rn) B (Rn x Q), per mode, by packed chunks. B is packed a tile
// of columns at a time, so that a tile's planes (Rn x tile x kChunk) stay in the 1 MiB L2 at
// widths of 128 and more; the work units are (chunk, column tile) pairs, the tiles made
// narrower where there are fewer chunks than threads (16 modes a rank: one chunk), each unit
// packing its chunk of A. Tiling changes no sum: every output adds its Rn terms in order.
template <class R>
void packed_product(Index P, Index Q, Index Rn, Index modes, const Operand<R>& A,
                    const Operand<R>& B, R* c_base, Index c_s0, Index c_s1, bool accumulate) {
  const Index chunks = (modes + kChunk - 1) / kChunk;
  const Index threads = omp_get_max_threads();
  const Index l2_tile = (Index{256} << 10) / (Rn * kChunk * 2 * Index(sizeof(R)));
  const Index spread = (Q + std::max<Index>(1, threads / chunks) - 1) /
                       std::max<Index>(1, threads / chunks);  // columns per unit, for the threads
  Index q_tile = std::min({Q, l2_tile, spread});
  q_tile = std::max<Index>(2, q_tile + (q_tile & 1));
  const Index tiles = (Q + q_tile - 1) / q_tile;
  const Index Pe = P + (P & 1);  // padded to the 2 x 2 blocks
  const std::size_t z = static_cast<std::size_t>(Rn * kChunk);
  const std::size_t a_plane = static_cast<std::size_t>(Pe) * z;
  const std::size_t b_plane = static_cast<std::size_t>(q_tile) * z;
  ThreadScratch<R> scratch(2 * a_plane + 2 * b_plane + 8 * kChunk);
  // B transposed: rows (q, r) of the operand B(r, q).
  const Operand<R> Bt{B.base, B.s1, B.s0, B.conj};
#pragma omp parallel
  {
    R* const are = scratch.mine();
    R* const aim = are + a_plane;
    R* const bre = aim + a_plane;
    R* const bim = bre + b_plane;
    R* const cb = bim + b_plane;
#pragma omp for schedule(static)
    for (Index u = 0; u < chunks * tiles; ++u) {
      const Index ch = u / tiles, q0 = (u % tiles) * q_tile;
      const Index m0 = ch * kChunk, mc = std::min(kChunk, modes - m0);
      pack(A, P, Rn, modes, m0, mc, are, aim);  // [p][r]: this unit's chunk of A
      if (Pe > P)
        std::fill(are + P * z, are + Pe * z, R(0)), std::fill(aim + P * z, aim + Pe * z, R(0));
      const Index qn = std::min(q_tile, Q - q0), qe = qn + (qn & 1);
      const Operand<R> tile{Bt.row(q0, 0, modes), Bt.s0, Bt.s1, Bt.conj};
      pack(tile, qn, Rn, modes, m0, mc, bre, bim);  // [q - q0][r]
      if (qe > qn)
        std::fill(bre + qn * z, bre + qe * z, R(0)), std::fill(bim + qn * z, bim + qe * z, R(0));
      // Output (p, q)'s chunk, interleaved (re, im).
      auto c_at = [&](Index p, Index q) {
        return c_base + 2 * (p * c_s0 + q * c_s1) * modes + 2 * m0;
      };
      for (Index p = 0; p < Pe; p += 2)
        for (Index qt = 0; qt < qe; qt += 2) {
          // The block's current values (accumulate) or zeros, as planes.
          for (int k = 0; k < 4; ++k) {
            const Index pp = p + k / 2, qq = q0 + qt + k % 2;
            R* cr = cb + (2 * k) * kChunk;
            R* ci = cr + kChunk;
            std::fill(cr, cr + 2 * kChunk, R(0));
            if (!accumulate || pp >= P || qq >= Q) continue;
            const R* src = c_at(pp, qq);
            for (Index m = 0; m < mc; ++m) cr[m] = src[2 * m], ci[m] = src[2 * m + 1];
          }
          block_2x2(are + p * z, aim + p * z, are + (p + 1) * z, aim + (p + 1) * z, bre + qt * z,
                    bim + qt * z, bre + (qt + 1) * z, bim + (qt + 1) * z, Rn, cb);
          for (int k = 0; k < 4; ++k) {
            const Index pp = p + k / 2, qq = q0 + qt + k % 2;
            if (pp >= P || qq >= Q) continue;
            const R* cr = cb + (2 * k) * kChunk;
            const R* ci = cr + kChunk;
            R* dst = c_at(pp, qq);
            for (Index m = 0; m < mc; ++m) dst[2 * m] = cr[m], dst[2 * m + 1] = ci[m];
          }
        }
    }
  }
}

// acc[m] += a[m] * b[m] over interleaved (re, im) rows, conjugations as the operands say.
template <class R>
inline void cmac(R* __restrict acc, const R* __restrict a, const R* __restrict b, Index modes,
                 bool conj_a, bool conj_b) {
  const R sa = conj_a ? R(-1) : R(1), sb = conj_b ? R(-1) : R(1);
#pragma omp simd
  for (Index m = 0; m < modes; ++m) {
    const R ar = a[2 * m], ai = sa * a[2 * m + 1], br = b[2 * m], bi = sb * b[2 * m + 1];
    acc[2 * m] += ar * br - ai * bi;
    acc[2 * m + 1] += ar * bi + ai * br;
  }
}

// The same product streamed row by row: each output row sums its Rn products in L1 with no
// packing. Where A has one row, or the sums are a few terms long (dW's sum over a batch of 1 to
// 3), packing costs more than it saves: B (or C) is touched once either way.
template <class R>
void streamed_product(Index P, Index Q, Index Rn, Index modes, const Operand<R>& A,
                      const Operand<R>& B, R* c_base, Index c_s0, Index c_s1, bool accumulate) {
#pragma omp parallel for collapse(2) schedule(static)
  for (Index p = 0; p < P; ++p)
    for (Index q = 0; q < Q; ++q) {
      R* acc = c_base + 2 * (p * c_s0 + q * c_s1) * modes;
      if (!accumulate) std::fill(acc, acc + 2 * modes, R(0));
      for (Index r = 0; r < Rn; ++r)
        cmac(acc, A.row(p, r, modes), B.row(r, q, modes), modes, A.conj, B.conj);
    }
}

// Packed where the product reuses its operands, streamed otherwise (measured, complex64, one
// core of 1 MiB L2: packed 2-4x faster from four rows of A and four-term sums - batch 16,
// 64 -> 64 channels: 72 -> 18 ms forward - and from two rows while B's per-mode matrix is
// small - batch 2, 32 -> 32: 0.59 -> 0.37 ms; streamed faster for one row of A, two-term sums
// and wide B with two rows - batch 2, 128 -> 128: 22 ms against 30 for dX - where the packing
// reads rows of B in short pieces). The choice depends on P, Q and Rn only - never on the
// modes a rank holds - so a sharded run sums every element as one rank does.
template <class R>
void per_mode_product(Index P, Index Q, Index Rn, Index modes, const Operand<R>& A,
                      const Operand<R>& B, R* c_base, Index c_s0, Index c_s1, bool accumulate) {
  if (P == 0 || Q == 0 || modes == 0) return;
  const bool reuse = P >= 4 || (P >= 2 && Rn * Q <= 4096);
  if (reuse && Rn >= 4)
    packed_product(P, Q, Rn, modes, A, B, c_base, c_s0, c_s1, accumulate);
  else
    streamed_product(P, Q, Rn, modes, A, B, c_base, c_s0, c_s1, accumulate);
}

// out[n, o] = sum_i x[n, i] w[i, o]
template <class R>
void mix(const MixShape& s, const R* x, const R* w, R* out) {
  per_mode_product<R>(s.batch, s.cout, s.cin, s.modes, {x, s.cin, 1, false}, {w, s.cout, 1, false},
                      out, s.cout, 1, false);
}

// dx[n, i] = sum_o dy[n, o] conj(w[i, o])
template <class R>
void mix_dx(const MixShape& s, const R* dy, const R* w, R* dx) {
  per_mode_product<R>(s.batch, s.cin, s.cout, s.modes, {dy, s.cout, 1, false}, {w, 1, s.cout, true},
                      dx, s.cin, 1, false);
}

// dw[i, o] += sum_n conj(x[n, i]) dy[n, o]
template <class R>
void mix_dw(const MixShape& s, const R* x, const R* dy, R* dw) {
  per_mode_product<R>(s.cin, s.cout, s.batch, s.modes, {x, 1, s.cin, true}, {dy, s.cout, 1, false},
                      dw, s.cout, 1, true);
}

}  // namespace

void cpu::spectral_mix(DType t, const MixShape& s, const void* x, const void* w, void* out) {
  if (t == DType::c128)
    return mix(s, static_cast<const double*>(x), static_cast<const double*>(w),
               static_cast<double*>(out));
  mix(s, static_cast<const float*>(x), static_cast<const float*>(w), static_cast<float*>(out));
}

void cpu::spectral_mix_dx(DType t, const MixShape& s, const void* dy, const void* w, void* dx) {
  if (t == DType::c128)
    return mix_dx(s, static_cast<const double*>(dy), static_cast<const double*>(w),
                  static_cast<double*>(dx));
  mix_dx(s, static_cast<const float*>(dy), static_cast<const float*>(w), static_cast<float*>(dx));
}

void cpu::spectral_mix_dw(DType t, const MixShape& s, const void* x, const void* dy, void* dw) {
  if (t == DType::c128)
    return mix_dw(s, static_cast<const double*>(x), static_cast<const double*>(dy),
                  static_cast<double*>(dw));
  mix_dw(s, static_cast<const float*>(x), static_cast<const float*>(dy), static_cast<float*>(dw));
}

}  // namespace tessera::kernels
