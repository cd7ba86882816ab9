// The tiling of blocked, simd and flash, written once (BLIS's idea): loops that block for caches
// around a register-tile micro-kernel, generic over a "lanes" policy P that supplies the vector
// type and its handful of operations (ScalarLanes in blocked.cpp, HwyLanes in hwy_lanes-inl.h).
//
// For one block of kQueryBlock query rows (query_blocks.hpp) and each tile of keys:
//   S^T = K_tile (scale Q)^T     keys down the rows, queries along the vector lanes, so the
//                                softmax over keys is lane-wise (vertical) work, no shuffles;
//   online softmax of S^T        running max m, sum l, rescale alpha (probes ride along);
//   O = alpha O + P V_tile       query rows down the tile, d_v along the lanes.
// A key tile of all n_kv keys materialises the block's scores (blocked, simd); a small one keeps
// everything in O(tile) scratch (flash). Both run the same code.
//
// Per-target include guard (Highway's pattern): this file is compiled once per ISA target.
#if defined(SDPA_KERNELS_ATTENTION_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SDPA_KERNELS_ATTENTION_TILES_INL_H_
#undef SDPA_KERNELS_ATTENTION_TILES_INL_H_
#else
#define SDPA_KERNELS_ATTENTION_TILES_INL_H_
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>

#include "hwy/highway.h"
#include "query_blocks.hpp"
#include "sdpa/aligned.hpp"

HWY_BEFORE_NAMESPACE();
namespace sdpa::detail::HWY_NAMESPACE {

// C (m rows x n_vec vectors) = init(C) + A (m x k) B (k x n_vec vectors).
struct Gemm {
  enum class Init { kZero, kLoad, kLoadScaled };  // kLoadScaled: row i of C times row_scale[i]
  std::int64_t m = 0, n_vec = 0, k = 0;
  const float* a = nullptr;  // A(i, p) = a[i * a_row + p * a_col]
  std::int64_t a_row = 0, a_col = 0;
  const float* b = nullptr;  // row p of B at b + p * ldb, b_cols valid floats of n_vec vectors
  std::int64_t ldb = 0, b_cols = 0;
  float* b_pack = nullptr;  // [kDepthChunk][n_vec vectors] when b_cols is not whole vectors
  float* c = nullptr;
  std::int64_t ldc = 0;
  Init init = Init::kZero;
  const float* row_scale = nullptr;
  // RunGemm<..., kPrefetch = true>: rows of k elements, prefetch_element_bytes each, contiguous
  // from `prefetch` (the decode path's keys a distance ahead of a), which each tile of MR rows of
  // A prefetches into L2 a step at a time as it multiplies (MR elements per step).
  const char* prefetch = nullptr;
  std::int64_t prefetch_element_bytes = 0;
  // What the next product reads, requested toward L2 in equal shares before each register tile
  // (RunGemm, where P::kPrefetchNext), so it is there when that product starts rather than
  // coming from L3 then.
  std::span<const float> next = {};
};

// Prefetches the cache lines of n elements from p into L2 (the decode path's streams over K and
// V, far enough ahead for L2: docs/perf-log/2026-11-30-decode-prefetch-l2.md).
template <class E>
HWY_INLINE void PrefetchAhead(const E* p, std::int64_t n) {
  const char* bytes = reinterpret_cast<const char*>(p);
  for (std::int64_t b = 0; b < n * std::int64_t(sizeof(E)); b += std::int64_t(kCacheLine))
    prefetch_to_l2(bytes + b);
}

// The register tile: MR x NV vectors of C held in registers over kc steps of k; each step loads
// NV vectors of B once and broadcasts MR values of A, for MR * NV independent FMAs. Element I of
// the tile is row I / NV, vector I % NV. The accumulators are a parameter pack, not an array:
// SVE vectors are sizeless types, which arrays cannot hold (each still gets its own register,
// and the compiler loads each B vector and broadcasts each A value once per step). kPrefetch:
// each step also prefetches the next MR elements of the tile's rows of g.prefetch, so the rows
// arrive spread over the tile's steps rather than requested in a burst.
template <class P, int MR, int NV, bool kPrefetch, std::size_t... I>
void MicroTileOf(const Gemm& g, const float* b, std::int64_t ldb, std::int64_t i0, std::int64_t v0,
                 std::int64_t k0, std::int64_t kc, Gemm::Init init, std::index_sequence<I...>) {
  constexpr std::int64_t L = P::kLanes;
  constexpr std::int64_t kRow[] = {std::int64_t(I / NV)...}, kVec[] = {std::int64_t(I % NV)...};
  float* c = g.c + i0 * g.ldc + v0 * L;
  // Inlined, or the accumulators would be passed (and kept) on the stack.
  [&](auto... acc) HWY_ATTR __attribute__((always_inline)) {
    if (init != Gemm::Init::kZero)
      ((acc = P::Mul(P::Set(init == Gemm::Init::kLoadScaled ? g.row_scale[i0 + kRow[I]] : 1.0f),
                     P::Load(c + kRow[I] * g.ldc + kVec[I] * L))),
       ...);
    const float* a = g.a + i0 * g.a_row + k0 * g.a_col;
    const float* bp = b + v0 * L;
    const std::int64_t pf_step = MR * g.prefetch_element_bytes;
    const char* pf =
        kPrefetch ? g.prefetch + i0 * g.k * g.prefetch_element_bytes + k0 * pf_step : nullptr;
    // Unrolled where P asks (the pragma takes a literal): the same steps in the same order. The
    // other targets keep the plain loop, so their code is what it was.
    if constexpr (P::kDepthUnroll > 1) {
      static_assert(P::kDepthUnroll == 4);
      const auto step = [&](std::int64_t p) HWY_ATTR __attribute__((always_inline)) {
        if constexpr (kPrefetch) prefetch_to_l2(pf + p * pf_step);
        ((acc = P::MulAdd(P::Set(a[kRow[I] * g.a_row]), P::Load(bp + kVec[I] * L), acc)), ...);
        a += g.a_col;
        bp += ldb;
      };
#pragma GCC unroll 4
      for (std::int64_t p = 0; p < kc; ++p) step(p);
    } else {
      for (std::int64_t p = 0; p < kc; ++p) {
        if constexpr (kPrefetch) prefetch_to_l2(pf + p * pf_step);
        ((acc = P::MulAdd(P::Set(a[kRow[I] * g.a_row]), P::Load(bp + kVec[I] * L), acc)), ...);
        a += g.a_col;
        bp += ldb;
      }
    }
    (P::Store(acc, c + kRow[I] * g.ldc + kVec[I] * L), ...);
  }
  (((void)I, P::Zero())...);
}

template <class P, int MR, int NV, bool kPrefetch>
void MicroTile(const Gemm& g, const float* b, std::int64_t ldb, std::int64_t i0, std::int64_t v0,
               std::int64_t k0, std::int64_t kc, Gemm::Init init) {
  MicroTileOf<P, MR, NV, kPrefetch>(g, b, ldb, i0, v0, k0, kc, init,
                                    std::make_index_sequence<MR * NV>());
}

using MicroTileFn = void (*)(const Gemm&, const float*, std::int64_t, std::int64_t, std::int64_t,
                             std::int64_t, std::int64_t, Gemm::Init);

// Every tile shape up to MR x NV, so edges of C run the same code with fewer registers.
template <class P, int MR, int NV, bool kPrefetch, std::size_t... I>
constexpr std::array<MicroTileFn, MR * NV> MicroTiles(std::index_sequence<I...>) {
  return {&MicroTile<P, int(I) / NV + 1, int(I) % NV + 1, kPrefetch>...};
}

// The cache loops (BLIS's pc, jr, ir): a chunk of k, then a column strip of B that stays in L1
// while every row tile of A passes over it.
template <class P, int MR, int NV, bool kPrefetch = false>
void RunGemm(const Gemm& g) {
  static constexpr auto kTiles =
      MicroTiles<P, MR, NV, kPrefetch>(std::make_index_sequence<MR * NV>());
  constexpr std::int64_t L = P::kLanes;
  // g.next's lines in equal shares before the register tiles (divided here, not in the loops:
  // the backward's products run them too, with no g.next).
  constexpr std::int64_t kLine = kCacheLine;
  [[maybe_unused]] const char* next = reinterpret_cast<const char*>(g.next.data());
  [[maybe_unused]] const char* const next_end = next + g.next.size_bytes();
  [[maybe_unused]] std::int64_t next_share = 0;
  if constexpr (P::kPrefetchNext) {
    const std::int64_t calls = round_up(g.k, kDepthChunk) / kDepthChunk *
                               (round_up(g.n_vec, NV) / NV) * (round_up(g.m, MR) / MR);
    const std::int64_t lines = round_up(std::int64_t(g.next.size_bytes()), kLine) / kLine;
    next_share = round_up(lines, calls) / calls * kLine;
  }
  for (std::int64_t k0 = 0; k0 < g.k; k0 += kDepthChunk) {
    const std::int64_t kc = std::min(kDepthChunk, g.k - k0);
    const Gemm::Init init = k0 == 0 ? g.init : Gemm::Init::kLoad;
    const float* b = g.b + k0 * g.ldb;
    std::int64_t ldb = g.ldb;
    if (g.b_cols < g.n_vec * L) {  // pad rows of B to whole vectors, so no load runs past them
      ldb = g.n_vec * L;
      for (std::int64_t p = 0; p < kc; ++p) {
        std::copy_n(b + p * g.ldb, g.b_cols, g.b_pack + p * ldb);
        std::fill(g.b_pack + p * ldb + g.b_cols, g.b_pack + (p + 1) * ldb, 0.0f);
      }
      b = g.b_pack;
    }
    for (std::int64_t v0 = 0; v0 < g.n_vec; v0 += NV) {
      const std::int64_t nv = std::min<std::int64_t>(NV, g.n_vec - v0);
      for (std::int64_t i0 = 0; i0 < g.m; i0 += MR) {
        const std::int64_t mr = std::min<std::int64_t>(MR, g.m - i0);
        if constexpr (P::kPrefetchNext)
          for (const char* end = next + std::min(next_share, next_end - next); next < end;
               next += kLine)
            prefetch_to_l2(next);
        kTiles[(mr - 1) * NV + (nv - 1)](g, b, ldb, i0, v0, k0, kc, init);
      }
    }
  }
}

// Probes: one vector of scores x and their weights p = e^{x - shift} added to the tile's sums
// (fold_tile_probes' inputs): finite scores and their squares, p (x - shift), non-finite
// scores, p^2 and p^3. Separate vectors, not a struct: SVE vectors are sizeless.
template <class P, class V = typename P::V>
HWY_INLINE void AddProbeSums(V x, V p, V shift, V& s1, V& s2, V& t, V& bad, V& p2, V& p3) {
  const V xf = P::ZeroIfNotFinite(x);
  s1 = P::Add(s1, xf);
  s2 = P::MulAdd(xf, xf, s2);
  t = P::MulAdd(p, P::ZeroIfNotFinite(P::Sub(x, shift)), t);
  bad = P::Add(bad, P::OneIfNotFinite(x));
  const V pp = P::Mul(p, p);
  p2 = P::Add(p2, pp);
  p3 = P::MulAdd(pp, p, p3);
}

// Lane-wise online softmax over one tile of S^T (nk keys x `queries` queries, rows of s_t kLd
// floats apart, queries a multiple of the lanes), in place: scores become p = e^{s - m_new};
// m, l and alpha are updated per query. With kProbe the same pass sums the finite scores, their
// squares, p (s - m_new) and the non-finite count. The prefill's query blocks and the decode
// path's query-lanes blocks take it. kLd is a constant, so the prefill's loop is what it was
// (docs/perf-log/2026-11-26-query-lanes-keep-st.md).
template <class P, bool kProbe, std::int64_t kLd>
void SoftmaxTile(std::int64_t nk, float* s_t, std::int64_t queries, const RowStats& w) {
  using V = typename P::V;
  constexpr std::int64_t L = P::kLanes;
  const V neg_inf = P::Set(-std::numeric_limits<float>::infinity());
  for (std::int64_t g = 0; g < queries; g += L) {
    float* s = s_t + g;
    V m0 = neg_inf, m1 = neg_inf;  // two chains hide the latency of Max
    std::int64_t j = 0;
    for (; j + 1 < nk; j += 2) {
      m0 = P::Max(m0, P::Load(s + j * kLd));
      m1 = P::Max(m1, P::Load(s + (j + 1) * kLd));
    }
    if (j < nk) m0 = P::Max(m0, P::Load(s + j * kLd));
    const V m_old = P::Load(w.max + g);
    const V m_new = P::Max(m_old, P::Max(m0, m1));
    const V shift = P::ZeroIfNotFinite(m_new);  // a row with nothing visible yet: p = e^-inf = 0
    const V alpha = P::Exp(P::Sub(m_old, shift));
    V l = P::Zero(), s1 = P::Zero(), s2 = P::Zero(), t = P::Zero(), bad = P::Zero();
    V p2 = P::Zero(), p3 = P::Zero();
    for (j = 0; j < nk; ++j) {
      const V x = P::Load(s + j * kLd);
      const V p = P::Exp(P::Sub(x, shift));
      P::Store(p, s + j * kLd);
      l = P::Add(l, p);
      if constexpr (kProbe) AddProbeSums<P>(x, p, shift, s1, s2, t, bad, p2, p3);
    }
    if constexpr (kProbe) {
      P::Store(m_old, w.prev_max + g);
      P::Store(P::Load(w.sum + g), w.prev_sum + g);
      P::Store(s1, w.tile_s + g);
      P::Store(s2, w.tile_s2 + g);
      P::Store(t, w.tile_t + g);
      P::Store(bad, w.tile_nonfinite + g);
      P::Store(p2, w.tile_p2 + g);
      P::Store(p3, w.tile_p3 + g);
    }
    P::Store(P::MulAdd(P::Load(w.sum + g), alpha, l), w.sum + g);
    P::Store(m_new, w.max + g);
    P::Store(alpha, w.rescale + g);
  }
}

// The products of the fp32 rungs, on lanes policy P: the block's queries are stored scaled
// (q_t = scale Q^T), so S^T = K_tile q_t is already scaled, and O = alpha O + P V_tile reads the
// tile's weights P^T in place. Other precisions supply the same three steps (flash_bf16.cpp).
template <class P>
struct Fp32Products {
  // Prepares the block (begin_block) and returns the keys it visits.
  static KeyRange Begin(const ForwardArgs& a, const QueryBlock& blk, const BlockScratch& w) {
    return begin_block(a, blk, w);
  }
  // Rows [key0, key0 + nk) of a head's keys or values x (d floats a row), at most the rows
  // there are: what a product reads next, for Gemm's `next`. Empty beyond flash's tiles: the
  // simd rung's one tile of every key would not fit L2 beside what its product reads.
  static std::span<const float> NextRows(const float* x, std::int64_t rows, std::int64_t key0,
                                         std::int64_t nk, std::int64_t d) {
    if (nk > kFlashKeys || key0 >= rows) return {};
    return {x + key0 * d, std::size_t(std::min(nk, rows - key0) * d)};
  }
  // w.scores = S^T of keys [key0, key0 + nk): scaled scores, keys down, queries along lanes.
  static void Scores(const ForwardArgs& a, const QueryBlock& blk, std::int64_t key0,
                     std::int64_t nk, const BlockScratch& w) {
    const Shape& s = a.shape;
    const float* v = a.v + s.kv_head(blk.head) * s.n_kv * s.d_v;
    Scores(a, blk, key0, nk, w, NextRows(v, s.n_kv, key0, nk, s.d_v));
  }
  // The same, requesting `next` (the tile's values) toward L2 as it runs.
  static void Scores(const ForwardArgs& a, const QueryBlock& blk, std::int64_t key0,
                     std::int64_t nk, const BlockScratch& w, std::span<const float> next) {
    const Shape& s = a.shape;
    Gemm g;
    g.m = nk;
    g.n_vec = kQueryBlock / P::kLanes;
    g.k = s.d_k;
    g.a = a.k + (s.kv_head(blk.head) * s.n_kv + key0) * s.d_k;
    g.a_row = s.d_k;
    g.a_col = 1;
    g.b = w.q_t;
    g.ldb = g.b_cols = kQueryBlock;
    g.c = w.scores;
    g.ldc = kQueryBlock;
    g.next = next;
    RunGemm<P, P::kMrS, P::kNvS>(g);
  }
  // w.acc = alpha w.acc + P V of the tile (w.acc = P V for the first), P^T in w.scores.
  static void Accumulate(const ForwardArgs& a, const QueryBlock& blk, std::int64_t key0,
                         std::int64_t nk, std::int64_t ld_acc, bool first, const BlockScratch& w) {
    const Shape& s = a.shape;
    const float* k = a.k + s.kv_head(blk.head) * s.n_kv * s.d_k;
    AccumulateRows(a.v + (s.kv_head(blk.head) * s.n_kv + key0) * s.d_v, s.d_v, nk, ld_acc, first, w,
                   NextRows(k, s.n_kv, key0 + nk, nk, s.d_k));
  }
  // The same with the tile's values at v_tile (nk rows of d_v floats) and nk rows of P^T;
  // `next` (the next tile's keys) requested toward L2 as it runs.
  static void AccumulateRows(const float* v_tile, std::int64_t d_v, std::int64_t nk,
                             std::int64_t ld_acc, bool first, const BlockScratch& w,
                             std::span<const float> next = {}) {
    Gemm g;
    g.m = kQueryBlock;
    g.n_vec = ld_acc / P::kLanes;
    g.k = nk;
    g.a = w.scores;
    g.a_row = 1;
    g.a_col = kQueryBlock;
    g.b = v_tile;
    g.ldb = g.b_cols = d_v;
    g.b_pack = w.v_pack;
    g.c = w.acc;
    g.ldc = ld_acc;
    g.init = first ? Gemm::Init::kZero : Gemm::Init::kLoadScaled;
    g.row_scale = w.rescale;
    g.next = next;
    RunGemm<P, P::kMrO, P::kNvO>(g);
  }
};

// The score modifiers that touch a tile of S^T (nk keys, rows kQueryBlock floats apart), in
// ScoreMod's order: the soft-cap c tanh(s / c), then ALiBi's -slope |p - j| (the row's
// temperature is in its scale already, its sink joins at finish_row).
template <class P>
void ModifyTile(const ForwardArgs& a, const QueryBlock& blk, std::int64_t key0, std::int64_t nk,
                const BlockScratch& w) {
  using V = typename P::V;
  constexpr std::int64_t L = P::kLanes;
  const ScoreMod& mod = a.score_mod;
  float* scores = w.scores;
  if (mod.softcap > 0) {
    const V cap = P::Set(mod.softcap), inv = P::Set(1.0f / mod.softcap);
    for (std::int64_t x = 0; x < nk * kQueryBlock; x += L)
      P::Store(P::Mul(cap, P::Tanh(P::Mul(P::Load(scores + x), inv))), scores + x);
  }
  if (mod.alibi_slopes.empty()) return;
  const float slope = mod.alibi_slopes[std::size_t(blk.head) % mod.alibi_slopes.size()];
  const V neg_slope = P::Set(-slope);
  for (std::int64_t j = 0; j < nk; ++j) {
    const V key = P::Set(float(key0 + j));  // positions below 2^24 are exact in a float
    float* row = scores + j * kQueryBlock;
    for (std::int64_t g = 0; g < kQueryBlock; g += L)
      P::Store(P::MulAdd(neg_slope, P::Abs(P::Sub(P::Load(w.position + g), key)), P::Load(row + g)),
               row + g);
  }
}

// One query block: for each key tile of the keys its rows see, S^T, score modifiers (kModify:
// a soft-cap or ALiBi; out of the loop otherwise), masking, online softmax, O += P V; then the
// rows. The loop is every precision's; Products (Fp32Products above) computes the two products.
template <class P, class Products, bool kProbe, bool kModify>
void AttendBlock(const ForwardArgs& a, const QueryBlock& blk, std::int64_t key_tile,
                 std::int64_t ld_acc, const BlockScratch& w) {
  static_assert(kQueryBlock % (P::kNvS * P::kLanes) == 0 && kQueryBlock % P::kMrO == 0);
  const Shape& s = a.shape;
  const KeyRange keys = Products::Begin(a, blk, w);
  for (std::int64_t key0 = keys.begin; key0 < keys.end; key0 += key_tile) {
    const std::int64_t nk = std::min(key_tile, keys.end - key0);
    Products::Scores(a, blk, key0, nk, w);
    if constexpr (kModify) ModifyTile<P>(a, blk, key0, nk, w);
    if (tile_needs_mask(s, a.mask, blk, key0, key0 + nk))
      mask_tile(s, a.mask, blk, key0, nk, w.scores);
    SoftmaxTile<P, kProbe, kQueryBlock>(nk, w.scores, kQueryBlock, w);
    if constexpr (kProbe) fold_tile_probes(w);
    Products::Accumulate(a, blk, key0, nk, ld_acc, key0 == keys.begin, w);
  }
  finish_block(a, blk, keys, ld_acc, w);
}

// The AttendBlock a call runs: with probes or not, with the tile's modifiers or not.
template <class P, class Products>
BlockFn AttendBlockFor(const ForwardArgs& a) {
  const bool modify = a.score_mod.softcap > 0 || !a.score_mod.alibi_slopes.empty();
  if (a.probes)
    return modify ? &AttendBlock<P, Products, true, true> : &AttendBlock<P, Products, true, false>;
  return modify ? &AttendBlock<P, Products, false, true> : &AttendBlock<P, Products, false, false>;
}

// The forward of a tiled rung on target P: key_tile = n_kv materialises each block's scores.
template <class P>
void TiledForward(const ForwardArgs& a, std::int64_t key_tile) {
  const std::int64_t ld_acc = round_up(a.shape.d_v, P::kLanes);
  key_tile = clamp_key_tile(a.shape, key_tile);
  for_each_query_block(a, key_tile, ld_acc, AttendBlockFor<P, Fp32Products<P>>(a));
}

// TiledForward<HwyLanes>, compiled once per target, in simd.cpp: flash and the prefill of the K/V
// formats call it rather than instantiating the template again in their own units (each copy
// took about 40 s to compile under the sanitizers). Every foreach_target unit of sdpa_kernels has
// the same targets (CMake), so each target's copy exists.
void HwyTiledForward(const ForwardArgs& a, std::int64_t key_tile);

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SDPA_KERNELS_ATTENTION_TILES_INL_H_
