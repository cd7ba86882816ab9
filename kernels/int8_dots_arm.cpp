// The native int8 scores (kv_int8.hpp) on aarch64, written by hand as int8_dots_x86.cpp's are
// (Highway 1.0.3 has no int8 dot product): sdot (vdotq_s32), the Armv8.2 dot-product
// extension (FEAT_DotProd: Neoverse N1 and later, Cortex-A76 and later), 4 keys a 128-bit
// vector. Every function carries the extension's target attribute, so this file builds with the
// baseline flags (armv8-a) and nothing in it runs unless int8_dots_available() says the CPU has
// it (Linux's HWCAP_ASIMDDP).
//
// sdot multiplies signed bytes by signed bytes, four products into each int32 lane: keys and
// queries go in as they are, with none of the 0x80 flip and bias that vpdpbusd's unsigned
// operand needs. The sums are exact: |k|, |q| <= 127, so a lane never holds more than
// 127^2 d4 in magnitude, below 2^31 for every d4 the format takes (kv_int8.hpp); an exact integer
// sum is the same in any order, so the scores have the portable dots' bits.
#include <cstdint>

#include "decode_blocks.hpp"
#include "kv_int8.hpp"
#include "sdpa/peak.hpp"

#ifdef SDPA_INT8_DOTS_ARM
#include <arm_neon.h>
#include <sys/auxv.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>

#define SDPA_DOTPROD_TARGET __attribute__((target("arch=armv8.2-a+dotprod")))
#define SDPA_DOTPROD_INLINE SDPA_DOTPROD_TARGET inline __attribute__((always_inline))

namespace sdpa::detail {
namespace {

// A block's depth quad is 64 bytes: 4 vectors, each 4 keys' quads, one int32 lane a key.
constexpr int kKeyVectors = 4;
static_assert(kInt8KeyBlock == 4 * kKeyVectors);
// Most query rows per pass over a block: 4 sums a row (the block's 16 keys), the row's quad
// broadcast, and the 4 key vectors: 4 rows hold 24 of the 32 registers.
constexpr int kMaxRows = 4;

// Key vector v of the depth quad at p of a block of nb keys. Whole blocks (nb = 16) are loaded
// as they are; a head's last block through a zeroed copy, never reading past its last key.
template <bool Whole>
SDPA_DOTPROD_INLINE int8x16_t key_vector(const std::int8_t* p, std::int64_t nb, int v) {
  if constexpr (Whole) {
    return vld1q_s8(p + 16 * v);
  } else {
    std::int8_t part[16] = {};
    const std::int64_t bytes = std::clamp<std::int64_t>(4 * nb - 16 * v, 0, 16);
    if (bytes > 0) std::memcpy(part, p + 16 * v, std::size_t(bytes));
    return vld1q_s8(part);
  }
}

// Scores of R rows against the nb keys of one block (nb = 16 where Whole): per depth quad, the
// block's 4 key vectors times each row's quad, broadcast (as the x86 paths do). One quad a step
// rather than four (a row's 16 bytes in one vector, sdot's lane form picking each quad): GCC's
// scheduler hoisted the 16 key loads of the longer step and spilled three sums to the stack.
template <int R, bool Whole>
SDPA_DOTPROD_TARGET void block_scores(const std::int8_t* q, std::int64_t ld_q, const float* q_scale,
                                      const std::int8_t* k, const float* k_scale, std::int64_t d4,
                                      std::int64_t nb, float* scores, std::int64_t ld_s) {
  int32x4_t sum[R][kKeyVectors];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kKeyVectors; ++v) sum[r][v] = vdupq_n_s32(0);
  // The keys' scales are a stream of their own: those kPrefetchBytes of K on are asked for too.
  if (Whole) prefetch_to_l2(k_scale + kPrefetchBytes / d4);
  for (std::int64_t c = 0; c < d4; c += 4) {
    // Depth quad c / 4 of the block's keys starts at k + c nb: one line (64 bytes) of a whole
    // block, and the line kPrefetchBytes on is asked for.
    const std::int8_t* quad = k + c * nb;
    if (Whole) prefetch_to_l2(quad + kPrefetchBytes);
    int8x16_t keys[kKeyVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kKeyVectors; ++v) keys[v] = key_vector<Whole>(quad, nb, v);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      std::int32_t x;
      std::memcpy(&x, q + r * ld_q + c, sizeof x);
      const int8x16_t row = vreinterpretq_s8_s32(vdupq_n_s32(x));
#pragma GCC unroll 4
      for (int v = 0; v < kKeyVectors; ++v) sum[r][v] = vdotq_s32(sum[r][v], keys[v], row);
    }
  }
  // (q_scale k_scale) float(sum), the portable dots' order: the same bits.
#pragma GCC unroll 4
  for (int v = 0; v < kKeyVectors; ++v) {
    const std::int64_t n = Whole ? 4 : std::min<std::int64_t>(4, nb - 4 * v);
    if (n <= 0) break;
    float ks[4] = {};
    if (n < 4) std::memcpy(ks, k_scale + 4 * v, sizeof(float) * std::size_t(n));
    const float32x4_t kv = vld1q_f32(n == 4 ? k_scale + 4 * v : ks);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float32x4_t s =
          vmulq_f32(vmulq_f32(vdupq_n_f32(q_scale[r]), kv), vcvtq_f32_s32(sum[r][v]));
      float* out = scores + r * ld_s + 4 * v;
      if (n == 4) {
        vst1q_f32(out, s);
      } else {
        float lanes[4];
        vst1q_f32(lanes, s);
        std::memcpy(out, lanes, sizeof(float) * std::size_t(n));
      }
    }
  }
}

void neon_dotprod_scores(const std::int8_t* q, std::int64_t ld_q, const float* q_scale,
                         std::int64_t rows, const std::int8_t* k, const float* k_scale,
                         std::int64_t d4, std::int64_t nk, float* scores, std::int64_t ld_s) {
  using Block = void (*)(const std::int8_t*, std::int64_t, const float*, const std::int8_t*,
                         const float*, std::int64_t, std::int64_t, float*, std::int64_t);
  static constexpr Block kWhole[] = {block_scores<1, true>, block_scores<2, true>,
                                     block_scores<3, true>, block_scores<4, true>};
  static constexpr Block kPart[] = {block_scores<1, false>, block_scores<2, false>,
                                    block_scores<3, false>, block_scores<4, false>};
  static_assert(std::size(kWhole) == kMaxRows && std::size(kPart) == kMaxRows);
  for (std::int64_t i0 = 0; i0 < rows; i0 += kMaxRows) {
    const std::int64_t r = std::min<std::int64_t>(rows - i0, kMaxRows);
    for (std::int64_t j0 = 0; j0 < nk; j0 += kInt8KeyBlock) {
      const std::int64_t nb = std::min(kInt8KeyBlock, nk - j0);
      (nb == kInt8KeyBlock ? kWhole : kPart)[r - 1](q + i0 * ld_q, ld_q, q_scale + i0, k + j0 * d4,
                                                    k_scale + j0, d4, nb, scores + i0 * ld_s + j0,
                                                    ld_s);
    }
  }
}

// The peak: kChains chains, each step one sdot of constant bytes into the chain (the value only
// has to depend on every chain; int32 sums wrap, harmlessly). Written out, as peak.cpp's are.
SDPA_DOTPROD_TARGET float neon_dotprod_chains(std::int64_t steps) {
  static_assert(peak::kChains == 12);
  const int8x16_t ones = vdupq_n_s8(1);
  int32x4_t c0 = vdupq_n_s32(0), c1 = vdupq_n_s32(1), c2 = vdupq_n_s32(2);
  int32x4_t c3 = vdupq_n_s32(3), c4 = vdupq_n_s32(4), c5 = vdupq_n_s32(5);
  int32x4_t c6 = vdupq_n_s32(6), c7 = vdupq_n_s32(7), c8 = vdupq_n_s32(8);
  int32x4_t c9 = vdupq_n_s32(9), c10 = vdupq_n_s32(10), c11 = vdupq_n_s32(11);
  for (std::int64_t s = 0; s < steps; ++s) {
    c0 = vdotq_s32(c0, ones, ones), c1 = vdotq_s32(c1, ones, ones);
    c2 = vdotq_s32(c2, ones, ones), c3 = vdotq_s32(c3, ones, ones);
    c4 = vdotq_s32(c4, ones, ones), c5 = vdotq_s32(c5, ones, ones);
    c6 = vdotq_s32(c6, ones, ones), c7 = vdotq_s32(c7, ones, ones);
    c8 = vdotq_s32(c8, ones, ones), c9 = vdotq_s32(c9, ones, ones);
    c10 = vdotq_s32(c10, ones, ones), c11 = vdotq_s32(c11, ones, ones);
  }
  uint32x4_t sum = vreinterpretq_u32_s32(c0);  // unsigned: the sums wrap like the lanes
  for (const int32x4_t x : {c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11})
    sum = vaddq_u32(sum, vreinterpretq_u32_s32(x));
  return float(vaddvq_u32(sum));
}

}  // namespace

bool int8_dots_available(Int8Dots dots) {
  // The kernel's word for ID_AA64ISAR0_EL1.DP (sdot and udot), which it sets only where the
  // whole system has it.
  static const bool dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  switch (dots) {
    case Int8Dots::portable:
      return true;
    case Int8Dots::neon_dotprod:
      return dotprod;
    case Int8Dots::sse4:
    case Int8Dots::avx2:
    case Int8Dots::avx512:
    case Int8Dots::avx_vnni:
    case Int8Dots::avx512_vnni:
      return false;
  }
  return false;
}

Int8ScoresFn int8_scores(Int8Dots dots) {
  return dots == Int8Dots::neon_dotprod ? &neon_dotprod_scores : &int8_scores_portable;
}

int int8_dot_lanes(Int8Dots dots) { return dots == Int8Dots::neon_dotprod ? 16 : 0; }

float int8_dot_chains(Int8Dots dots, std::int64_t steps) {
  if (dots == Int8Dots::neon_dotprod) return neon_dotprod_chains(steps);
  std::abort();
}

}  // namespace sdpa::detail

#endif  // SDPA_INT8_DOTS_ARM
