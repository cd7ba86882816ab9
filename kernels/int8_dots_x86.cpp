// The native int8 scores (kv_int8.hpp), written for each instruction set by hand as
// bf16_dots_x86.cpp is (Highway 1.0.3 has no int8 dot product): vpdpbusd on AVX512_VNNI (zmm,
// 16 keys a vector) and on AVX-VNNI (ymm, VEX, int8_dots_vec-inl.h), vpmaddubsw and vpmaddwd on
// AVX512BW (zmm), on AVX2 (ymm) and on Highway's SSE4 target (pmaddubsw and pmaddwd of SSSE3, xmm).
// Every function carries its instruction set's target attribute or pragma, so this file builds with
// the baseline flags and nothing in it runs unless int8_dots_available() says the CPU has that set.
// aarch64's are int8_dots_arm.cpp; elsewhere only the portable dots exist.
//
// vpdpbusd and vpmaddubsw multiply unsigned bytes by signed bytes. vpdpbusd: keys are the
// unsigned operand, each byte flipped by 0x80 (k + 128, one xor per vector shared by every query
// row), and the query row's quad is broadcast as the signed one; then
// sum (k + 128) q = sum k q + 128 sum q, and the row's 128 sum q is subtracted once. As in
// llama.cpp's and oneDNN's x86 int8 paths (which flip or offset one operand the same way), the
// products cannot saturate. A lane may pass 2^31 (255 * 127 per product) and wraps, as the
// instruction's sums do; the bias, taken off in the same wrapping arithmetic, leaves sum k q,
// which int32 holds (kInt8MaxDepth), so the result is exact.
// vpmaddubsw adds pairs into int16, where k + 128 would saturate (2 * 255 * 127 > 32767): it
// takes |k| and q with k's sign (vpsignb), as llama.cpp's AVX2 q8_0 dot does.
#include <cstdint>

#include "decode_blocks.hpp"
#include "kv_int8.hpp"
#include "sdpa/peak.hpp"

#ifdef SDPA_INT8_DOTS_X86
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>

#define SDPA_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

namespace sdpa::detail {
namespace {

static_assert(kInt8KeyBlock == 16);  // one int32 lane per key of a block

// Most query rows per pass over a block: R accumulators, the key vector and a broadcast.
constexpr int kMaxRows = 8;

// Scores of R rows against the nb <= 16 keys of one block. Two sums per row, over the even and
// the odd depth quads, so that each row has two chains of vpdpbusd rather than one of d4 / 4
// (integer sums: the same result in any order). The loops over rows are unrolled so that the
// sums stay in registers (GCC otherwise kept the arrays on the stack and stored every sum at
// every quad).
template <int R>
SDPA_VNNI_TARGET void block_scores(const std::int8_t* q, std::int64_t ld_q, const float* q_scale,
                                   const std::int32_t* q_bias, const std::int8_t* k,
                                   const float* k_scale, std::int64_t d4, std::int64_t nb,
                                   float* scores, std::int64_t ld_s) {
  __m512i even[R], odd[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) even[r] = odd[r] = _mm512_setzero_si512();
  // Bytes of a depth quad of the block's keys: all 64 but in a head's last block.
  const __mmask64 bytes = nb == kInt8KeyBlock ? ~__mmask64(0) : (__mmask64(1) << (4 * nb)) - 1;
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  const auto quad = [&](int r, std::int64_t c) SDPA_VNNI_TARGET {
    std::int32_t x;
    std::memcpy(&x, q + r * ld_q + c, sizeof x);
    return _mm512_set1_epi32(x);
  };
  // The keys' scales are a stream of their own: those kPrefetchBytes of K on are asked for too.
  if (nb == kInt8KeyBlock) prefetch_to_l2(k_scale + kPrefetchBytes / d4);
  std::int64_t c = 0;
  for (; c + 8 <= d4; c += 8) {
    // One line of K per quad; the two lines kPrefetchBytes on are asked for (whole blocks only).
    if (nb == kInt8KeyBlock)
      for (const std::int64_t quad : {c, c + 4}) prefetch_to_l2(k + quad * nb + kPrefetchBytes);
    const __m512i k0 = _mm512_xor_si512(_mm512_maskz_loadu_epi8(bytes, k + c * nb), flip);
    const __m512i k1 = _mm512_xor_si512(_mm512_maskz_loadu_epi8(bytes, k + (c + 4) * nb), flip);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      even[r] = _mm512_dpbusd_epi32(even[r], k0, quad(r, c));
      odd[r] = _mm512_dpbusd_epi32(odd[r], k1, quad(r, c + 4));
    }
  }
  if (c < d4) {
    const __m512i k0 = _mm512_xor_si512(_mm512_maskz_loadu_epi8(bytes, k + c * nb), flip);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) even[r] = _mm512_dpbusd_epi32(even[r], k0, quad(r, c));
  }
  const __mmask16 lanes = __mmask16((1u << nb) - 1);
  const __m512 ks = _mm512_maskz_loadu_ps(lanes, k_scale);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512i dot =
        _mm512_sub_epi32(_mm512_add_epi32(even[r], odd[r]), _mm512_set1_epi32(q_bias[r]));
    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(q_scale[r]), ks);
    _mm512_mask_storeu_ps(scores + r * ld_s, lanes,
                          _mm512_mul_ps(scale, _mm512_maskz_cvtepi32_ps(lanes, dot)));
  }
}

void avx512_vnni_scores(const std::int8_t* q, std::int64_t ld_q, const float* q_scale,
                        std::int64_t rows, const std::int8_t* k, const float* k_scale,
                        std::int64_t d4, std::int64_t nk, float* scores, std::int64_t ld_s) {
  using Block =
      void (*)(const std::int8_t*, std::int64_t, const float*, const std::int32_t*,
               const std::int8_t*, const float*, std::int64_t, std::int64_t, float*, std::int64_t);
  static constexpr Block kBlocks[] = {block_scores<1>, block_scores<2>, block_scores<3>,
                                      block_scores<4>, block_scores<5>, block_scores<6>,
                                      block_scores<7>, block_scores<8>};
  for (std::int64_t i0 = 0; i0 < rows; i0 += kMaxRows) {
    const std::int64_t r = rows - i0 < kMaxRows ? rows - i0 : kMaxRows;
    std::int32_t bias[kMaxRows];
    for (std::int64_t i = 0; i < r; ++i) {
      std::int32_t sum = 0;
      for (std::int64_t c = 0; c < d4; ++c) sum += q[(i0 + i) * ld_q + c];
      bias[i] = 128 * sum;
    }
    for (std::int64_t j0 = 0; j0 < nk; j0 += kInt8KeyBlock)
      kBlocks[r - 1](q + i0 * ld_q, ld_q, q_scale + i0, bias, k + j0 * d4, k_scale + j0, d4,
                     nk - j0 < kInt8KeyBlock ? nk - j0 : kInt8KeyBlock, scores + i0 * ld_s + j0,
                     ld_s);
  }
}

SDPA_VNNI_TARGET float avx512_vnni_chains(std::int64_t steps) {
  static_assert(peak::kChains == 12);
  // Each step adds 4 per lane; long runs wrap around in int32, harmlessly (only the
  // dependence of the result on every chain matters).
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i c[peak::kChains];
  for (int i = 0; i < peak::kChains; ++i) c[i] = _mm512_set1_epi32(i);
  for (std::int64_t s = 0; s < steps; ++s)
    for (auto& x : c) x = _mm512_dpbusd_epi32(x, ones, ones);
  __m512i sum = c[0];
  for (int i = 1; i < peak::kChains; ++i) sum = _mm512_add_epi32(sum, c[i]);
  std::int32_t lanes[16];
  _mm512_storeu_si512(lanes, sum);
  std::uint32_t total = 0;  // wraps like the lanes
  for (const std::int32_t x : lanes) total += std::uint32_t(x);
  return float(total);
}

}  // namespace
}  // namespace sdpa::detail

// The vector operations of int8_dots_vec-inl.h at each width: `part` says which of a vector's
// int32 lanes (keys) a part of a block fills. Zmm inside AVX512BW's region, Ymm inside AVX2's
// (AVX-VNNI's inlines it), Xmm inside SSSE3's.
#ifdef __clang__  // clang ignores GCC's target pragma
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw")
#endif
namespace sdpa::detail {
namespace {
struct Zmm {
  using I = __m512i;
  using F = __m512;
  static constexpr std::int64_t kKeys = 16;  // a whole block
  static I zero() { return _mm512_setzero_si512(); }
  static I bytes(char x) { return _mm512_set1_epi8(x); }
  static I broadcast(std::int32_t x) { return _mm512_set1_epi32(x); }
  static I sum(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I abs8(I x) { return _mm512_abs_epi8(x); }
  // AVX-512 has no vpsignb: x negated where s is negative. Where s is 0, x is kept rather than
  // zeroed, which the pairs' product with |s| = 0 makes the same.
  static I sign8(I x, I s) { return _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(s), zero(), x); }
  static I pairs(I u8, I s8) { return _mm512_maddubs_epi16(u8, s8); }
  static I quads(I s16) { return _mm512_madd_epi16(s16, _mm512_set1_epi16(1)); }
  static __mmask16 part(std::int64_t n) { return __mmask16((1u << n) - 1); }
  static I load(const std::int8_t* p) { return _mm512_loadu_si512(p); }
  static I load(const std::int8_t* p, __mmask16 part) { return _mm512_maskz_loadu_epi32(part, p); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F load(const float* p, __mmask16 part) { return _mm512_maskz_loadu_ps(part, p); }
  // The zero-masked conversion of every lane: GCC 12 warns that the unmasked one's source, left
  // undefined in its header, may be used uninitialized.
  static F scores(I dot, float q_scale, F k_scale) {
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(q_scale), k_scale),
                         _mm512_maskz_cvtepi32_ps(__mmask16(0xffff), dot));
  }
  static void store(float* p, F x) { _mm512_storeu_ps(p, x); }
  static void store(float* p, F x, __mmask16 part) { _mm512_mask_storeu_ps(p, part, x); }
  static void store(std::int32_t* p, I x) { _mm512_storeu_si512(p, x); }
};

// AVX2's dots (int8_dots_pairs-inl.h) in zmm: AVX-512 CPUs without VNNI (Skylake-SP and -X).
namespace avx512 {
using Vec = Zmm;
#include "int8_dots_pairs-inl.h"
#include "int8_dots_vec-inl.h"
}  // namespace avx512
}  // namespace
}  // namespace sdpa::detail
#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#ifdef __clang__  // clang ignores GCC's target pragma
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif
namespace sdpa::detail {
namespace {
struct Ymm {
  using I = __m256i;
  using F = __m256;
  static constexpr std::int64_t kKeys = 8;
  static I zero() { return _mm256_setzero_si256(); }
  static I bytes(char x) { return _mm256_set1_epi8(x); }
  static I broadcast(std::int32_t x) { return _mm256_set1_epi32(x); }
  static I sum(I a, I b) { return _mm256_add_epi32(a, b); }
  static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I abs8(I x) { return _mm256_abs_epi8(x); }
  static I sign8(I x, I s) { return _mm256_sign_epi8(x, s); }
  static I pairs(I u8, I s8) { return _mm256_maddubs_epi16(u8, s8); }  // int16 sums of pairs
  static I quads(I s16) { return _mm256_madd_epi16(s16, _mm256_set1_epi16(1)); }  // int32 sums
  // A key's quad is one int32 lane, so vpmaskmovd loads a part without reading past it.
  static I part(std::int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static I load(const std::int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const I*>(p)); }
  static I load(const std::int8_t* p, I part) {
    return _mm256_maskload_epi32(reinterpret_cast<const int*>(p), part);
  }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F load(const float* p, I part) { return _mm256_maskload_ps(p, part); }
  // (q_scale k_scale) float(dot), in kv_int8.hpp's order.
  static F scores(I dot, float q_scale, F k_scale) {
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(q_scale), k_scale), _mm256_cvtepi32_ps(dot));
  }
  static void store(float* p, F x) { _mm256_storeu_ps(p, x); }
  static void store(float* p, F x, I part) { _mm256_maskstore_ps(p, part, x); }
  static void store(std::int32_t* p, I x) { _mm256_storeu_si256(reinterpret_cast<I*>(p), x); }
};

// AVX2's dots (int8_dots_pairs-inl.h) in ymm.
namespace avx2 {
using Vec = Ymm;
#include "int8_dots_pairs-inl.h"
#include "int8_dots_vec-inl.h"
}  // namespace avx2
}  // namespace
}  // namespace sdpa::detail
#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// SSSE3 (what Highway's SSE4 target has of it): AVX2's dots in xmm, 4 keys a vector. No masked
// loads or stores: a part of fewer keys goes through a zeroed copy.
#ifdef __clang__  // clang ignores GCC's target pragma
#pragma clang attribute push(__attribute__((target("ssse3"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("ssse3")
#endif
namespace sdpa::detail {
namespace {
struct Xmm {
  using I = __m128i;
  using F = __m128;
  static constexpr std::int64_t kKeys = 4;
  static I zero() { return _mm_setzero_si128(); }
  static I bytes(char x) { return _mm_set1_epi8(x); }
  static I broadcast(std::int32_t x) { return _mm_set1_epi32(x); }
  static I sum(I a, I b) { return _mm_add_epi32(a, b); }
  static I sub(I a, I b) { return _mm_sub_epi32(a, b); }
  static I abs8(I x) { return _mm_abs_epi8(x); }
  static I sign8(I x, I s) { return _mm_sign_epi8(x, s); }
  static I pairs(I u8, I s8) { return _mm_maddubs_epi16(u8, s8); }
  static I quads(I s16) { return _mm_madd_epi16(s16, _mm_set1_epi16(1)); }
  static std::int64_t part(std::int64_t n) { return n; }
  static I load(const std::int8_t* p) { return _mm_loadu_si128(reinterpret_cast<const I*>(p)); }
  static I load(const std::int8_t* p, std::int64_t n) {
    std::int32_t lanes[kKeys] = {};
    std::memcpy(lanes, p, std::size_t(n) * sizeof lanes[0]);
    return _mm_loadu_si128(reinterpret_cast<const I*>(lanes));
  }
  static F load(const float* p) { return _mm_loadu_ps(p); }
  static F load(const float* p, std::int64_t n) {
    float lanes[kKeys] = {};
    std::memcpy(lanes, p, std::size_t(n) * sizeof lanes[0]);
    return _mm_loadu_ps(lanes);
  }
  static F scores(I dot, float q_scale, F k_scale) {
    return _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(q_scale), k_scale), _mm_cvtepi32_ps(dot));
  }
  static void store(float* p, F x) { _mm_storeu_ps(p, x); }
  static void store(float* p, F x, std::int64_t n) {
    float lanes[kKeys];
    _mm_storeu_ps(lanes, x);
    std::memcpy(p, lanes, std::size_t(n) * sizeof lanes[0]);
  }
  static void store(std::int32_t* p, I x) { _mm_storeu_si128(reinterpret_cast<I*>(p), x); }
};

namespace sse4 {
using Vec = Xmm;
#include "int8_dots_pairs-inl.h"
#include "int8_dots_vec-inl.h"
}  // namespace sse4
}  // namespace
}  // namespace sdpa::detail
#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// AVX-VNNI: vpdpbusd in ymm (VEX), keys flipped by 0x80 as on AVX512_VNNI.
#ifdef __clang__  // clang ignores GCC's target pragma
#pragma clang attribute push(__attribute__((target("avx2,avxvnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,avxvnni")
#endif
namespace sdpa::detail {
namespace {
namespace avx_vnni {
struct Dot : Ymm {
  static constexpr std::int32_t kOffset = 128;
  static constexpr bool kTwoChains = true;  // a chain step is a vpdpbusd
  using Keys = __m256i;
  static Keys keys(__m256i k) { return _mm256_xor_si256(k, _mm256_set1_epi8(char(0x80))); }
  static __m256i add(__m256i acc, Keys k, __m256i q) { return _mm256_dpbusd_avx_epi32(acc, k, q); }
};
#include "int8_dots_vec-inl.h"
}  // namespace avx_vnni
}  // namespace
}  // namespace sdpa::detail
#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace sdpa::detail {

bool int8_dots_available(Int8Dots dots) {
  // __builtin_cpu_supports also checks that the OS saves the ymm and zmm state. AVX-VNNI is
  // CPUID.(EAX=7, ECX=1):EAX bit 4, read directly: clang 14's builtin does not know it.
  static const bool ssse3 = __builtin_cpu_supports("ssse3");
  static const bool avx2 = __builtin_cpu_supports("avx2");
  static const bool avx_vnni = avx2 && [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 4));
  }();
  static const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  static const bool avx512_vnni =
      avx512 && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  switch (dots) {
    case Int8Dots::portable:
      return true;
    case Int8Dots::sse4:
      return ssse3;
    case Int8Dots::avx2:
      return avx2;
    case Int8Dots::avx512:
      return avx512;
    case Int8Dots::avx_vnni:
      return avx_vnni;
    case Int8Dots::avx512_vnni:
      return avx512_vnni;
    case Int8Dots::neon_dotprod:
      return false;
  }
  return false;
}

Int8ScoresFn int8_scores(Int8Dots dots) {
  switch (dots) {
    case Int8Dots::sse4:
      return &sse4::scores;
    case Int8Dots::avx2:
      return &avx2::scores;
    case Int8Dots::avx512:
      return &avx512::scores;
    case Int8Dots::avx_vnni:
      return &avx_vnni::scores;
    case Int8Dots::avx512_vnni:
      return &avx512_vnni_scores;
    case Int8Dots::portable:
    case Int8Dots::neon_dotprod:
      break;
  }
  return &int8_scores_portable;
}

int int8_dot_lanes(Int8Dots dots) {
  switch (dots) {
    case Int8Dots::sse4:
      return 16;
    case Int8Dots::avx512:
    case Int8Dots::avx512_vnni:
      return 64;
    case Int8Dots::avx2:
    case Int8Dots::avx_vnni:
    case Int8Dots::portable:
    case Int8Dots::neon_dotprod:
      break;
  }
  return 32;
}

float int8_dot_chains(Int8Dots dots, std::int64_t steps) {
  switch (dots) {
    case Int8Dots::sse4:
      return sse4::dot_chains(steps);
    case Int8Dots::avx2:
      return avx2::dot_chains(steps);
    case Int8Dots::avx512:
      return avx512::dot_chains(steps);
    case Int8Dots::avx_vnni:
      return avx_vnni::dot_chains(steps);
    case Int8Dots::avx512_vnni:
      return avx512_vnni_chains(steps);
    case Int8Dots::portable:
    case Int8Dots::neon_dotprod:
      break;
  }
  std::abort();
}

}  // namespace sdpa::detail

#endif  // SDPA_INT8_DOTS_X86
