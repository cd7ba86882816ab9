// bf16 for the low-precision kernels: the rounding they share, and the native products on CPUs
// with AVX512_BF16 (bf16_dots_x86.cpp). Internal to sdpa_kernels (and its tests).
//
// Both follow what AVX512_BF16 does, measured on this project's machine (AMD Zen 4) against a
// model over 3.2e7 random lanes with no mismatch:
//  - vcvtneps2bf16 rounds to nearest, ties to even; subnormal inputs become zero of their sign
//    (so no bf16 subnormal is ever made); values past bf16's largest round to infinity.
//  - vdpbf16ps adds each pair of products to its fp32 accumulator one at a time, the odd
//    element's first: acc = fl(acc + a1 b1), then acc = fl(acc + a0 b0), to nearest even, with
//    subnormal inputs and results flushed to zero. A product of two bf16 values (8-bit
//    significands) is exact in fp32, so each step is one fp32 multiply-add: the portable path
//    that accumulates widened bf16 values odd element first gives the same bits.
#pragma once

#include <bit>
#include <cstdint>
#include <utility>

#include "sdpa/kernels.hpp"

namespace sdpa::detail {

// x rounded to bf16, as the fp32 bit pattern of the rounded value (low 16 bits zero).
inline std::uint32_t bf16_round_bits(float x) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  if ((b & 0x7f800000u) == 0) return b & 0x80000000u;                        // subnormal: +-0
  if ((b & 0x7fffffffu) > 0x7f800000u) return (b | 0x00400000u) & ~0xffffu;  // NaN stays NaN
  return (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
}
inline float bf16_round(float x) { return std::bit_cast<float>(bf16_round_bits(x)); }

// Keys per tile of flash-bf16: flash's 128, or n_kv when fewer, rounded up to even so that a
// key pair never straddles two tiles (an odd last key pairs with zeros).
inline std::int64_t bf16_key_tile(std::int64_t n_kv) {
  const std::int64_t tile = n_kv < 128 ? n_kv : 128;
  return tile + (tile & 1);
}

// ---- native products (x86-64 CPUs with AVX512_BF16). Operands are bf16 pairs in 32-bit words,
// the lower-indexed element in the low half (little-endian order of a bf16 array).

// Whether this build has the native products and this CPU runs them.
bool bf16_native_available();

// Query rows of a block in the native products: kQueryBlock (query_blocks.hpp), 3 vectors.
inline constexpr std::int64_t kBf16Block = 48;

// scores[j][i] = scale[i] x the sum over depth pairs p of the products of k[j * ldk + p] and
// q[p][i], j < nk, i < kBf16Block: S^T of a key tile. k: the tile's keys, ldk words per key;
// q: [pairs][kBf16Block] words.
void bf16_dot_scores(const std::uint32_t* k, std::int64_t ldk, std::int64_t nk,
                     const std::uint32_t* q, std::int64_t pairs, const float* scale, float* scores);

// C (rows x ld floats, ldc apart) = init + A B over `pairs` depth pairs: c[r][x] gains the
// products of A's word of row r and pair p, a[r * a_row + p * a_pair], and b[p * ldb + x]; ld a
// multiple of 16. init: zero, C as it is (kLoad), or row_scale[r] * C (kScaled). The forward's
// O = alpha O + P V (A = P^T's row pairs, a_row 1, a_pair kBf16Block) and the backward's three
// gradient products, whose A is laid out either way.
struct Bf16Product {
  enum class Init { kZero, kLoad, kScaled };
  const std::uint32_t* a = nullptr;
  std::int64_t a_row = 1, a_pair = kBf16Block, rows = kBf16Block, pairs = 0;
  const std::uint32_t* b = nullptr;
  std::int64_t ldb = 0;
  float* c = nullptr;
  std::int64_t ldc = 0, ld = 0;
  Init init = Init::kZero;
  const float* row_scale = nullptr;  // kScaled's factors, one per row
};
void bf16_dot_rows(const Bf16Product& g);

// Rows of `cols` floats, ld_x apart, rounded to bf16 by vcvtne2ps2bf16 (bf16_round_bits'
// rounding) and packed in pairs: rows 2j and 2j + 1 become word row j of n words (n a multiple of
// 16, at least cols; zeros past cols), row 2j in the low halves, for j < ceil(count / 2); an odd
// last row pairs with zeros. In place (words at x, ld_x = n) word row j overwrites float row
// j <= 2j only after rows 2j and 2j + 1 were read.
void bf16_pack_row_pairs(const float* x, std::int64_t ld_x, std::int64_t cols, std::int64_t count,
                         std::uint32_t* words, std::int64_t n);

// The same in place, rows of n floats: returns the words.
inline std::uint32_t* bf16_pack_row_pairs(float* rows, std::int64_t count, std::int64_t n) {
  auto* words = reinterpret_cast<std::uint32_t*>(rows);
  bf16_pack_row_pairs(rows, n, n, count, words, n);
  return words;
}

// Peak of the native products: kChains (sdpa/peak.hpp) independent vdpbf16ps chains of
// `steps` steps; returns a value that depends on every chain. Each step of a chain is 32
// multiply-adds, 64 FLOPs.
float bf16_dot_chains(std::int64_t steps);

// Where flash-bf16's backward (flash_backward.cpp's Bf16Gradients) lays out its operands in one
// buffer kept per calling thread: each array's offset in floats (or 32-bit words), on a cache
// line, and the floats in all. ld_k, ld_v: the words of a row of pairs (whole vectors).
struct Bf16BackwardLayout {
  Bf16BackwardLayout(const Shape& s, std::int64_t ld_k, std::int64_t ld_v, std::int64_t blocks) {
    std::int64_t at = 0;
    const auto take = [&at](std::int64_t n) { return std::exchange(at, at + (n + 15) / 16 * 16); };
    const std::int64_t pk = (s.d_k + 1) / 2, pv = (s.d_v + 1) / 2, heads = s.kv_batch_heads();
    d_out = take(s.out_elements());
    k_words = take(heads * s.n_kv * pk), v_words = take(heads * s.n_kv * pv);
    k_pairs = take(heads * ((s.n_kv + 1) / 2) * ld_k);
    q_pairs = take(blocks * pk * kBf16Block), do_pairs = take(blocks * pv * kBf16Block);
    q_rows = take(blocks * kBf16Block / 2 * ld_k), do_rows = take(blocks * kBf16Block / 2 * ld_v);
    scale = take(blocks * kBf16Block);
    floats = at;
  }
  std::int64_t d_out;                               // the call's dO, rounded
  std::int64_t k_words, v_words, k_pairs;           // K, V as words of column pairs, K of row pairs
  std::int64_t q_pairs, do_pairs, q_rows, do_rows;  // per query block, Q and dO likewise
  std::int64_t scale;                               // per query block, its rows' scales
  std::int64_t floats;
};

// Rounds n values to bf16 with vcvtneps2bf16, in order (the native forward's K, as words of
// column pairs; the native backward's P and dS; the test that checks bf16_round against it).
void bf16_round_native(const float* x, std::uint16_t* y, std::int64_t n);

}  // namespace sdpa::detail
