// The int8 K/V format of flash-kv-int8 (flash_kv_int8.cpp; precision "kv-int8"): K and V held as
// int8 with one fp32 scale per token and K/V head, as OpenVINO's and llama.cpp's CPU caches keep
// them, and the integer dot products of its scores, native (int8_dots_x86.cpp: SSSE3, AVX2,
// AVX-VNNI, AVX512_VNNI; int8_dots_arm.cpp: sdot) or portable (kv_int8.cpp). Internal to
// sdpa_kernels (and its tests).
//
// Quantisation, per row x of n values (a token's keys or values in one head, a row of Q):
// symmetric, scale = max|x| / 127, x_c = scale * round(x_c / scale), so each element moves by at
// most scale / 2 (the tests' tolerances derive from it) and the ints stay within [-127, 127]
// (never -128: the unsigned-times-signed products of vpdpbusd and vpmaddubsw need no saturation).
// A zero row has scale 0 (max|x| / 127 with no special case in the formula; its ints are 0, so
// it dequantises to exact zeros either way, and 0 keeps "scale x int" the one rule). A row with
// a non-finite element has scale NaN: it dequantises, and scores, to NaN, as fp32 attention of
// such a row is not finite either.
//
// Layout. V: [kv head][n_kv][d_v] int8 (row-major, as fp32 V). K: d_k rounded up to a multiple
// of 4 (zeros after d_k), keys in blocks of kInt8KeyBlock: block b of a head holds keys
// [16 b, 16 b + nb) (nb = 16 but for the head's last block) as [d4 / 4][nb][4]: the 4 bytes of
// depth 4g..4g+3 of key t at (g nb + t) 4, i.e. one 64-byte vector per depth quad holds the
// quad of every key of the block. vpdpbusd then yields the 16 keys' sums in its 16 lanes, with
// no horizontal reduction (oneDNN's and OpenVINO's "VNNI layout" of a repacked operand). Whole
// blocks are 16 d4 bytes, so key j (a multiple of 16) of head h starts at (h n_kv + j) d4, as if
// the rows were row-major: readers advance by rows of d4 bytes.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sdpa/aligned.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa::detail {

inline constexpr std::int64_t kInt8KeyBlock = 16;  // keys per block of the K layout
inline constexpr std::int64_t kInt8Max = 127;

// Depth of a K (or Q) row in the int8 layout: d rounded up to a whole quad.
inline std::int64_t int8_depth(std::int64_t d) { return (d + 3) / 4 * 4; }

// y[c] = round(x[c] / scale) for c < n (ties to even), returns scale = max|x| / 127 (above).
// Inline and free of library calls: the decode path rounds its query rows with it per key tile.
inline float quantise_row(const float* x, std::int64_t n, std::int8_t* y) {
  float m = 0;
  bool finite = true;
  for (std::int64_t c = 0; c < n; ++c) {
    const float a = std::fabs(x[c]);
    finite = finite && a <= FLT_MAX;  // false for inf and NaN
    m = a > m ? a : m;
  }
  if (!finite || m == 0) {
    std::fill(y, y + n, std::int8_t{0});
    return finite ? 0.0f : NAN;
  }
  // A row whose max is below 127 / FLT_MAX (subnormals, say) would make 127 / m infinite: it is
  // scaled by 2^64 first, exactly, so its ints are still those of x / scale.
  const float up = m < 0x1p-64f ? 0x1p64f : 1.0f;
  const float scale = m / float(kInt8Max), inverse = float(kInt8Max) / (m * up);
  // x / scale is within fp32 rounding of [-127, 127]; nearbyint rounds the rounded product to
  // nearest even (an added 1.5 x 2^23 could be fused with the product where the compiler
  // contracts, as GCC does on aarch64), and the clamp only undoes the fp32 rounding.
  for (std::int64_t c = 0; c < n; ++c) {
    const float r = std::nearbyint(x[c] * up * inverse);
    y[c] = std::int8_t(r < -float(kInt8Max)  ? -float(kInt8Max)
                       : r > float(kInt8Max) ? float(kInt8Max)
                                             : r);
  }
  return scale;
}

// x [rows][d] quantised per row and dequantised: y = scale x int, in fp32 (exact: the ints have
// at most 7 bits). How flash-kv-int8 rounds Q, and what the precision kind rounds with.
void int8_round_rows(const float* x, std::int64_t rows, std::int64_t d, float* y, int threads = 1);

// Scores of `rows` int8 rows of Q against nk keys of a K block run (layout above), starting at a
// block boundary: scores[i ld_s + j] = (q_scale[i] k_scale[j]) float(sum_c q[i ld_q + c] k_j[c])
// for i < rows, j < nk; q rows hold d4 ints (zeros past d), ld_q >= d4. The sums are exact in
// int32 for d4 <= kInt8MaxDepth (|sum| <= 127^2 d4; the vpdpbusd paths' bias 128 sum q, |.| <=
// 128 * 127 d4, too), and an exact sum is the same integer in any order of its terms, so every
// implementation gives the same bits.
inline constexpr std::int64_t kInt8MaxDepth = 132'104;
static_assert(128 * 127 * kInt8MaxDepth <= INT32_MAX &&
              128 * 127 * (kInt8MaxDepth + 4) > INT32_MAX);
using Int8ScoresFn = void (*)(const std::int8_t* q, std::int64_t ld_q, const float* q_scale,
                              std::int64_t rows, const std::int8_t* k, const float* k_scale,
                              std::int64_t d4, std::int64_t nk, float* scores, std::int64_t ld_s);

// Plain C++ (every CPU).
void int8_scores_portable(const std::int8_t* q, std::int64_t ld_q, const float* q_scale,
                          std::int64_t rows, const std::int8_t* k, const float* k_scale,
                          std::int64_t d4, std::int64_t nk, float* scores, std::int64_t ld_s);

// The instructions for int8 dot products: x86's (int8_dots_x86.cpp), aarch64's
// (int8_dots_arm.cpp), and the portable C++ above. The sums are exact in every one, so all give
// the same bits.
enum class Int8Dots {
  portable,
  sse4,          // pmaddubsw, pmaddwd (xmm, SSSE3): Highway's SSE4 target
  avx2,          // vpmaddubsw, vpmaddwd (ymm): AVX2 without VNNI
  avx512,        // vpmaddubsw, vpmaddwd (zmm): AVX512BW without VNNI
  avx_vnni,      // vpdpbusd (ymm, VEX): AVX-VNNI
  avx512_vnni,   // vpdpbusd (zmm): AVX512_VNNI with AVX512BW
  neon_dotprod,  // sdot (128-bit NEON): the Armv8.2 dot-product extension (FEAT_DotProd)
};
// Which file compiles the native dots' functions below: int8_dots_x86.cpp on x86-64,
// int8_dots_arm.cpp on aarch64 Linux (where getauxval says whether the CPU has sdot) with GCC;
// on any other build kv_int8.cpp's, the portable dots alone. Not with clang on aarch64: clang
// 14's arm_neon.h declares sdot only where the whole file targets the extension, which a
// function's target attribute cannot do.
#if defined(__GNUC__) && defined(__x86_64__)
#define SDPA_INT8_DOTS_X86 1
#elif defined(__GNUC__) && !defined(__clang__) && defined(__aarch64__) && defined(__linux__)
#define SDPA_INT8_DOTS_ARM 1
#endif
// Whether this build has `dots` and this CPU runs them (portable: always).
bool int8_dots_available(Int8Dots dots);
// The scores by `dots`. Precondition: int8_dots_available(dots).
Int8ScoresFn int8_scores(Int8Dots dots);
// int8 products of one step of int8_dot_chains: 16 an xmm or NEON vector, 32 a ymm, 64 a zmm.
int int8_dot_lanes(Int8Dots dots);
// Peak of `dots` (not portable): kChains (sdpa/peak.hpp) independent chains of `steps` steps,
// each step the instructions the scores issue for int8_dot_lanes(dots) products. Returns a
// value that depends on every chain. Precondition: int8_dots_available(dots).
float int8_dot_chains(Int8Dots dots, std::int64_t steps);

// Why flash-kv-int8 cannot run shape s (Kernel::refuses), "" when it can: a decode shape whose K
// rows are deeper than kInt8MaxDepth bytes, where the scores' int32 sums could overflow.
std::string int8_refusal(const Shape& s, const Mask&, const ScoreMod&);

// K and V of one shape in the layout above, with their scales ([kv head][n_kv] each).
struct StoredKvInt8 : StoredKv {
  Shape shape;
  AlignedVector<std::int8_t> k, v;
  AlignedVector<float> k_scale, v_scale;
  std::int64_t d4 = 0;  // int8_depth(d_k): bytes per K row
};

// a.k and a.v quantised (on a.threads threads).
std::unique_ptr<StoredKv> store_kv_int8(const ForwardArgs& a);

// The call's stored K and V: a.stored_kv, which must be a StoredKvInt8 of this shape
// (std::invalid_argument if not), or, without one, a.k and a.v stored into `own`.
const StoredKvInt8& stored_kv_int8(const ForwardArgs& a, std::unique_ptr<StoredKv>& own);

// Row r of K (r < kv_batch_heads n_kv) dequantised: out[c] = k_scale[r] float(k_r[c]), c < d_k.
void dequantise_k_row(const StoredKvInt8& kv, std::int64_t r, float* out);

}  // namespace sdpa::detail
