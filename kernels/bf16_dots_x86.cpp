// The native bf16 products (bf16.hpp): register-tile micro-kernels on vdpbf16ps, the only code
// of the suite written for one instruction set by hand (Highway 1.0.3 has no target that emits
// it). Each function carries its target attribute, so this file builds with the baseline flags
// and nothing in it runs unless bf16_native_available() says the CPU has AVX512_BF16. On other
// architectures the functions are never called (the registry leaves the native entry out).
#include <cstdint>

#include "bf16.hpp"
#include "sdpa/peak.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

#define SDPA_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace sdpa::detail {
namespace {

constexpr std::int64_t kLanes = 16;  // fp32 lanes of a zmm register
constexpr std::int64_t kBlockVecs = kBf16Block / kLanes;
static_assert(kBf16Block % kLanes == 0);

SDPA_BF16_TARGET inline __m512 dot(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

// MR keys x the block's 3 query vectors: 24 accumulators at MR = 8, plus 3 query vectors and
// a broadcast of 32 zmm registers. Each step is one depth pair; the sums are scaled as they are
// stored, rather than in a pass of their own over the tile. Here and in rows_tile every loop over
// the register tile is unrolled (the pragmas' counts are the largest tile's), so that the sums
// stay in registers: GCC otherwise zeroed them on the stack, and stored and reloaded them around
// the depth loop (docs/perf-log/2026-11-30-bf16-tiles-in-registers.md).
template <int MR>
SDPA_BF16_TARGET void scores_tile(const std::uint32_t* k, std::int64_t ldk, const std::uint32_t* q,
                                  std::int64_t pairs, const float* scale, float* scores) {
  static_assert(MR <= 8 && kBlockVecs == 3);
  __m512 acc[MR][kBlockVecs];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < kBlockVecs; ++v) acc[r][v] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < pairs; ++p) {
    __m512i b[kBlockVecs];
#pragma GCC unroll 3
    for (int v = 0; v < kBlockVecs; ++v) b[v] = _mm512_loadu_si512(q + p * kBf16Block + v * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512i a = _mm512_set1_epi32(static_cast<int>(k[r * ldk + p]));
#pragma GCC unroll 3
      for (int v = 0; v < kBlockVecs; ++v) acc[r][v] = dot(acc[r][v], a, b[v]);
    }
  }
#pragma GCC unroll 3
  for (int v = 0; v < kBlockVecs; ++v) {
    const __m512 s = _mm512_loadu_ps(scale + v * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
      _mm512_storeu_ps(scores + r * kBf16Block + v * kLanes, _mm512_mul_ps(s, acc[r][v]));
  }
}

// MR rows x NV vectors of C: 24 accumulators at MR = 6, NV = 4, plus NV vectors of B and a
// broadcast of 32 zmm registers.
constexpr int kMrO = 6;

template <int MR, int NV>
SDPA_BF16_TARGET void rows_tile(const Bf16Product& g, const std::uint32_t* a,
                                const std::uint32_t* b, float* c, const float* row_scale) {
  static_assert(MR <= kMrO && NV <= 4);
  using enum Bf16Product::Init;
  __m512 acc[MR][NV];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      acc[r][v] =
          g.init == kZero ? _mm512_setzero_ps() : _mm512_loadu_ps(c + r * g.ldc + v * kLanes);
      if (g.init == kScaled) acc[r][v] = _mm512_mul_ps(_mm512_set1_ps(row_scale[r]), acc[r][v]);
    }
  for (std::int64_t p = 0; p < g.pairs; ++p) {
    __m512i bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_si512(b + p * g.ldb + v * kLanes);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m512i x = _mm512_set1_epi32(static_cast<int>(a[r * g.a_row + p * g.a_pair]));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = dot(acc[r][v], x, bv[v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + r * g.ldc + v * kLanes, acc[r][v]);
}

bool cpu_has_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // CPUID.(EAX=7, ECX=1):EAX bit 5 is AVX512_BF16; __builtin_cpu_supports checks that the OS
  // saves the zmm state for the AVX-512 foundation it needs.
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) || !(eax & (1u << 5))) return false;
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

}  // namespace

bool bf16_native_available() {
  static const bool available = cpu_has_bf16();
  return available;
}

void bf16_dot_scores(const std::uint32_t* k, std::int64_t ldk, std::int64_t nk,
                     const std::uint32_t* q, std::int64_t pairs, const float* scale,
                     float* scores) {
  using Tile = void (*)(const std::uint32_t*, std::int64_t, const std::uint32_t*, std::int64_t,
                        const float*, float*);
  static constexpr Tile kTiles[] = {scores_tile<1>, scores_tile<2>, scores_tile<3>, scores_tile<4>,
                                    scores_tile<5>, scores_tile<6>, scores_tile<7>, scores_tile<8>};
  constexpr std::int64_t kMr = 8;
  for (std::int64_t j = 0; j < nk; j += kMr) {
    const std::int64_t mr = nk - j < kMr ? nk - j : kMr;
    kTiles[mr - 1](k + j * ldk, ldk, q, pairs, scale, scores + j * kBf16Block);
  }
}

void bf16_dot_rows(const Bf16Product& g) {
  using Tile = void (*)(const Bf16Product&, const std::uint32_t*, const std::uint32_t*, float*,
                        const float*);
  constexpr int kNv = 4;
  static constexpr Tile kTiles[kMrO][kNv] = {
      {rows_tile<1, 1>, rows_tile<1, 2>, rows_tile<1, 3>, rows_tile<1, 4>},
      {rows_tile<2, 1>, rows_tile<2, 2>, rows_tile<2, 3>, rows_tile<2, 4>},
      {rows_tile<3, 1>, rows_tile<3, 2>, rows_tile<3, 3>, rows_tile<3, 4>},
      {rows_tile<4, 1>, rows_tile<4, 2>, rows_tile<4, 3>, rows_tile<4, 4>},
      {rows_tile<5, 1>, rows_tile<5, 2>, rows_tile<5, 3>, rows_tile<5, 4>},
      {rows_tile<6, 1>, rows_tile<6, 2>, rows_tile<6, 3>, rows_tile<6, 4>}};
  const std::int64_t vecs = g.ld / kLanes;
  // A strip of kNv vectors of B (pairs x 64 words) stays in L1 while every row tile passes.
  for (std::int64_t v = 0; v < vecs; v += kNv) {
    const std::int64_t nv = vecs - v < kNv ? vecs - v : kNv;
    for (std::int64_t r = 0; r < g.rows; r += kMrO) {
      const std::int64_t mr = g.rows - r < kMrO ? g.rows - r : kMrO;
      kTiles[mr - 1][nv - 1](g, g.a + r * g.a_row, g.b + v * kLanes, g.c + r * g.ldc + v * kLanes,
                             g.row_scale ? g.row_scale + r : nullptr);
    }
  }
}

SDPA_BF16_TARGET void bf16_pack_row_pairs(const float* x, std::int64_t ld_x, std::int64_t cols,
                                          std::int64_t count, std::uint32_t* words,
                                          std::int64_t n) {
  // vcvtne2ps2bf16 puts one row's 16 values after the other's; word c takes value c of each.
  alignas(64) static constexpr std::int16_t kInterleave[2 * kLanes] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i order = _mm512_load_si512(kInterleave);
  for (std::int64_t j = 0; 2 * j < count; ++j) {
    const float* r0 = x + 2 * j * ld_x;
    const bool partner = 2 * j + 1 < count;
    for (std::int64_t c = 0; c < n; c += kLanes) {
      // The columns of the row at c (masked loads read nothing past cols).
      const __mmask16 in = c + kLanes <= cols ? __mmask16(0xffff)
                           : c < cols         ? __mmask16((1u << (cols - c)) - 1)
                                              : __mmask16(0);
      const __m512 high =
          _mm512_maskz_loadu_ps(partner ? in : __mmask16(0), partner ? r0 + ld_x + c : r0);
      const __m512bh both = _mm512_cvtne2ps_pbh(high, _mm512_maskz_loadu_ps(in, r0 + c));
      _mm512_storeu_si512(words + j * n + c,
                          _mm512_permutexvar_epi16(order, reinterpret_cast<const __m512i&>(both)));
    }
  }
}

SDPA_BF16_TARGET float bf16_dot_chains(std::int64_t steps) {
  static_assert(peak::kChains == 12);
  // Pairs of 2^-10 (bf16 0x3a80): each step adds 2^-19 per lane, so the chains stay normal.
  const __m512i a = _mm512_set1_epi32(0x3a803a80);
  __m512 c[peak::kChains];
  for (int i = 0; i < peak::kChains; ++i) c[i] = _mm512_set1_ps(1.0f + 0.01f * float(i));
  for (std::int64_t s = 0; s < steps; ++s)
    for (auto& x : c) x = dot(x, a, a);
  __m512 sum = c[0];
  for (int i = 1; i < peak::kChains; ++i) sum = _mm512_add_ps(sum, c[i]);
  float lanes[kLanes];
  _mm512_storeu_ps(lanes, sum);
  float total = 0;
  for (float x : lanes) total += x;
  return total;
}

SDPA_BF16_TARGET void bf16_round_native(const float* x, std::uint16_t* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256bh r = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), reinterpret_cast<const __m256i&>(r));
  }
  for (; i < n; ++i) {
    float tail[kLanes] = {x[i]};
    std::uint16_t out[kLanes];
    bf16_round_native(tail, out, kLanes);
    y[i] = out[0];
  }
}

}  // namespace sdpa::detail

#else  // no native products in this build

#include <cstdlib>

// Unreachable while bf16_native_available() is false; loud if a caller forgets to ask.
namespace sdpa::detail {
bool bf16_native_available() { return false; }
void bf16_dot_scores(const std::uint32_t*, std::int64_t, std::int64_t, const std::uint32_t*,
                     std::int64_t, const float*, float*) {
  std::abort();
}
void bf16_dot_rows(const Bf16Product&) { std::abort(); }
void bf16_pack_row_pairs(const float*, std::int64_t, std::int64_t, std::int64_t, std::uint32_t*,
                         std::int64_t) {
  std::abort();
}
float bf16_dot_chains(std::int64_t) { std::abort(); }
void bf16_round_native(const float*, std::uint16_t*, std::int64_t) { std::abort(); }
}  // namespace sdpa::detail

#endif
