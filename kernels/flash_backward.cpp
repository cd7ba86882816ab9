// Rung 4's backward: the fused backward of flash. Probabilities are recomputed from the
// forward's row log-sum-exp, p_ij = e^{s_ij - lse_i}, one tile at a time, so nothing of size
// n_q x n_kv is ever stored. For a tile of kKeyBlock keys and a block of kQueryBlock queries,
// in the forward's layout (keys down the rows, queries along the lanes, so every step on P is
// lane-wise):
//   S^T  = K_tile (scale Q)^T            P^T = e^{S^T - lse}
//   dP^T = V_tile dO^T                   dS^T = P^T o (dP^T - D),  D_i = dO_i . O_i
// and three products use the tile: dV += P^T dO and dK += scale dS^T Q for its keys,
// dQ += scale dS K for its queries. Every product is the forward's Gemm (attention_tiles-inl.h),
// compiled per Highway target like the forward, so flash@avx2's backward runs AVX2.
//
// Two passes keep every output written by one thread, so the result is bit-identical on any
// thread count with no atomics: key tiles own their rows of dK and dV, query blocks own their
// rows of dQ (and the probes). Each pass recomputes the tile it needs: seven tile products
// against the five of a single pass that would share dQ between threads, so the backward takes
// about 3.5 forwards where the FLOP convention counts 2.5.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "query_blocks.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the rest.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flash_backward.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy_lanes-inl.h"
#include "attention_tiles-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace sdpa::detail::HWY_NAMESPACE {

// Keys per tile: the rows of S^T. The tile's P^T and dS^T (2 x 64 x 48 floats) stay in L1.
constexpr std::int64_t kKeyBlock = 64;
constexpr std::int64_t kB = kQueryBlock;

// Every query block in the layout the tiles read, packed once per call before both passes (a
// key tile meets every query block, so packing per tile would repeat the transposes n_kv / 64
// times). Extra memory: flash_backward_workspace_bytes. Rows past a block are zero.
struct PackedQueries {
  PackedQueries(const Shape& s, std::int64_t blocks)
      : d_k(s.d_k),
        d_v(s.d_v),
        q_t(blocks * s.d_k * kB),
        do_t(blocks * s.d_v * kB),
        shift(blocks * kB),
        delta(blocks * kB) {}
  std::int64_t d_k, d_v;
  std::vector<float> q_t;    // per block [d_k][kB]: scale * Q^T, B of S^T
  std::vector<float> do_t;   // per block [d_v][kB]: dO^T, B of dP^T
  std::vector<float> shift;  // per block [kB]: lse; +inf for rows that see no key or are past it
  std::vector<float> delta;  // per block [kB]: D_i = dO_i . O_i
};

// Where block `index` lies in a PackedQueries: written by PackQueryBlock, read by the tiles.
struct QueryTiles {
  QueryTiles(PackedQueries& p, std::int64_t index)
      : q_t(p.q_t.data() + index * p.d_k * kB),
        do_t(p.do_t.data() + index * p.d_v * kB),
        shift(p.shift.data() + index * kB),
        delta(p.delta.data() + index * kB) {}
  float *q_t, *do_t, *shift, *delta;
};

void PackQueryBlock(const BackwardArgs& a, const QueryBlock& blk, const QueryTiles& out) {
  const Shape& s = a.shape;
  std::fill_n(out.shift, kB, std::numeric_limits<float>::infinity());
  for (std::int64_t i = 0; i < kB; ++i) {
    const std::int64_t r = blk.head * s.n_q + blk.first_row + i;
    const bool in_block = i < blk.rows;
    for (std::int64_t c = 0; c < s.d_k; ++c)
      out.q_t[c * kB + i] = in_block ? a.scale * a.q[r * s.d_k + c] : 0.0f;
    float dot = 0;
    for (std::int64_t c = 0; c < s.d_v; ++c) {
      const float d_out = in_block ? a.d_out[r * s.d_v + c] : 0.0f;
      out.do_t[c * kB + i] = d_out;
      if (in_block) dot += d_out * a.out[r * s.d_v + c];
    }
    out.delta[i] = dot;
    // A row that sees no key has lse = -inf; shifting by +inf makes its p = e^-inf = 0.
    if (in_block && a.lse[r] != -std::numeric_limits<float>::infinity()) out.shift[i] = a.lse[r];
  }
}

// One thread's scratch: one tile, the accumulators, and rows of B padded to whole vectors
// (Gemm's b_pack) when d_k or d_v needs it.
struct BackwardScratch {
  BackwardScratch(std::int64_t ld_k, std::int64_t ld_v)
      : p_t(kKeyBlock * kB),
        ds_t(kKeyBlock * kB),
        d_key(kKeyBlock * ld_k),
        d_value(kKeyBlock * ld_v),
        d_query(kB * ld_k),
        b_pack(std::max(kKeyBlock, kB) * std::max(ld_k, ld_v)),
        ds_sumsq(kB),
        ds_max_abs(kB) {}
  std::vector<float> p_t;   // [kKeyBlock][kB] S^T, then P^T
  std::vector<float> ds_t;  // [kKeyBlock][kB] dP^T, then dS^T
  // Accumulators: dK / scale and dV of a key tile, dQ / scale of a query block.
  std::vector<float> d_key, d_value, d_query;
  std::vector<float> b_pack;
  // Probes of a query block, in double like every probe.
  std::vector<double> ds_sumsq, ds_max_abs;
};

// P^T and dS^T of the key tile [key0, key0 + nk) against one query block.
template <class P>
void ScoreGradientTile(const BackwardArgs& a, const QueryBlock& blk, const QueryTiles& qt,
                       std::int64_t key0, std::int64_t nk, BackwardScratch& w) {
  using V = typename P::V;
  constexpr std::int64_t L = P::kLanes;
  const Shape& s = a.shape;
  const Gemm scores{.m = nk,
                    .n_vec = kB / L,
                    .k = s.d_k,
                    .a = a.k + (blk.head * s.n_kv + key0) * s.d_k,
                    .a_row = s.d_k,
                    .a_col = 1,
                    .b = qt.q_t,
                    .ldb = kB,
                    .b_cols = kB,
                    .c = w.p_t.data(),
                    .ldc = kB};
  RunGemm<P, P::kMrS, P::kNvS>(scores);
  if (tile_needs_mask(s, a.causal, blk, key0 + nk)) mask_tile(s, blk, key0, nk, w.p_t.data());
  Gemm d_probs = scores;
  d_probs.k = s.d_v;
  d_probs.a = a.v + (blk.head * s.n_kv + key0) * s.d_v;
  d_probs.a_row = s.d_v;
  d_probs.b = qt.do_t;
  d_probs.c = w.ds_t.data();
  RunGemm<P, P::kMrS, P::kNvS>(d_probs);
  for (std::int64_t g = 0; g < kB; g += L) {
    const V shift = P::Load(qt.shift + g), delta = P::Load(qt.delta + g);
    for (std::int64_t j = 0; j < nk; ++j) {
      float* p_out = w.p_t.data() + j * kB + g;
      float* ds_out = w.ds_t.data() + j * kB + g;
      const V p = P::Exp(P::Sub(P::Load(p_out), shift));
      P::Store(p, p_out);
      P::Store(P::Mul(p, P::Sub(P::Load(ds_out), delta)), ds_out);
    }
  }
}

// C (m x ld) += A B through the forward's register tiles, for the three accumulations.
template <class P>
void Accumulate(std::int64_t m, std::int64_t depth, const float* a, std::int64_t a_row,
                std::int64_t a_col, const float* b, std::int64_t ldb, std::int64_t b_cols,
                float* b_pack, float* c, std::int64_t ld) {
  const Gemm g{.m = m,
               .n_vec = ld / P::kLanes,
               .k = depth,
               .a = a,
               .a_row = a_row,
               .a_col = a_col,
               .b = b,
               .ldb = ldb,
               .b_cols = b_cols,
               .b_pack = b_pack,
               .c = c,
               .ldc = ld,
               .init = Gemm::Init::kLoad};
  RunGemm<P, P::kMrO, P::kNvO>(g);
}

void StoreRows(const float* acc, std::int64_t ld, std::int64_t rows, std::int64_t cols,
               float factor, float* out) {
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t c = 0; c < cols; ++c) out[i * cols + c] = factor * acc[i * ld + c];
}

// Pass 1: dK and dV of one key tile, summed over every query block that sees it, in order.
template <class P>
void KeyTileGradients(const BackwardArgs& a, PackedQueries& packed, std::int64_t head,
                      std::int64_t key0, std::int64_t ld_k, std::int64_t ld_v, BackwardScratch& w) {
  const Shape& s = a.shape;
  const std::int64_t nk = std::min(kKeyBlock, s.n_kv - key0);
  const std::int64_t per_head = query_blocks_per_head(s);
  std::fill(w.d_key.begin(), w.d_key.end(), 0.0f);
  std::fill(w.d_value.begin(), w.d_value.end(), 0.0f);
  for (std::int64_t b = head * per_head; b < (head + 1) * per_head; ++b) {
    const QueryBlock blk = query_block(s, b);
    if (visible_keys(s, a.causal, blk.first_row + blk.rows - 1) <= key0) continue;  // masked
    ScoreGradientTile<P>(a, blk, QueryTiles(packed, b), key0, nk, w);
    const std::int64_t r0 = head * s.n_q + blk.first_row;
    Accumulate<P>(nk, blk.rows, w.p_t.data(), kB, 1, a.d_out + r0 * s.d_v, s.d_v, s.d_v,
                  w.b_pack.data(), w.d_value.data(), ld_v);
    Accumulate<P>(nk, blk.rows, w.ds_t.data(), kB, 1, a.q + r0 * s.d_k, s.d_k, s.d_k,
                  w.b_pack.data(), w.d_key.data(), ld_k);
  }
  const std::int64_t first = head * s.n_kv + key0;
  StoreRows(w.d_key.data(), ld_k, nk, s.d_k, a.scale, a.d_k + first * s.d_k);
  StoreRows(w.d_value.data(), ld_v, nk, s.d_v, 1.0f, a.d_v + first * s.d_v);
}

// Probes: dS sums and largest |dS| per row, in key order, over one tile.
void ProbeTileSums(const QueryBlock& blk, std::int64_t nk, BackwardScratch& w) {
  for (std::int64_t j = 0; j < nk; ++j)
    for (std::int64_t i = 0; i < blk.rows; ++i) {
      const double g = w.ds_t[j * kB + i];
      w.ds_sumsq[i] += g * g;
      w.ds_max_abs[i] = std::max(w.ds_max_abs[i], std::abs(g));
    }
}

// Participation needs the row's largest |dS| first, so a probed block walks its tiles twice
// rather than keep a row of dS per query (O(n_kv) each).
template <class P>
void ProbeParticipation(const BackwardArgs& a, const QueryBlock& blk, const QueryTiles& qt,
                        std::int64_t key_end, BackwardScratch& w) {
  GradProbes& probes = *a.probes;
  const std::int64_t r0 = blk.head * a.shape.n_q + blk.first_row;
  for (std::int64_t i = 0; i < blk.rows; ++i) {
    probes.ds_sumsq[r0 + i] = w.ds_sumsq[i];
    probes.ds_max_abs[r0 + i] = w.ds_max_abs[i];
    probes.participating[r0 + i] = 0;
    probes.visible[r0 + i] = visible_keys(a.shape, a.causal, blk.first_row + i);
  }
  for (std::int64_t key0 = 0; key0 < key_end; key0 += kKeyBlock) {
    const std::int64_t nk = std::min(kKeyBlock, key_end - key0);
    ScoreGradientTile<P>(a, blk, qt, key0, nk, w);
    for (std::int64_t j = 0; j < nk; ++j)
      for (std::int64_t i = 0; i < blk.rows; ++i)  // masked keys have dS = 0: never counted
        probes.participating[r0 + i] +=
            std::abs(double(w.ds_t[j * kB + i])) > kParticipationThreshold * w.ds_max_abs[i];
  }
}

// Pass 2: dQ of one query block (and its probes), summed over the key tiles it sees, in order.
template <class P, bool kProbe>
void QueryBlockGradients(const BackwardArgs& a, const QueryBlock& blk, const QueryTiles& qt,
                         std::int64_t ld_k, BackwardScratch& w) {
  const Shape& s = a.shape;
  std::fill(w.d_query.begin(), w.d_query.end(), 0.0f);
  if constexpr (kProbe) {
    std::fill(w.ds_sumsq.begin(), w.ds_sumsq.end(), 0.0);
    std::fill(w.ds_max_abs.begin(), w.ds_max_abs.end(), 0.0);
  }
  const std::int64_t key_end = visible_keys(s, a.causal, blk.first_row + blk.rows - 1);
  const float* k = a.k + blk.head * s.n_kv * s.d_k;
  for (std::int64_t key0 = 0; key0 < key_end; key0 += kKeyBlock) {
    const std::int64_t nk = std::min(kKeyBlock, key_end - key0);
    ScoreGradientTile<P>(a, blk, qt, key0, nk, w);
    Accumulate<P>(blk.rows, nk, w.ds_t.data(), 1, kB, k + key0 * s.d_k, s.d_k, s.d_k,
                  w.b_pack.data(), w.d_query.data(), ld_k);
    if constexpr (kProbe) ProbeTileSums(blk, nk, w);
  }
  StoreRows(w.d_query.data(), ld_k, blk.rows, s.d_k, a.scale,
            a.d_q + (blk.head * s.n_q + blk.first_row) * s.d_k);
  if constexpr (kProbe) ProbeParticipation<P>(a, blk, qt, key_end, w);
}

template <class P>
void TiledBackward(const BackwardArgs& a) {
  static_assert(kB % P::kLanes == 0, "a query block is whole vectors");
  const Shape& s = a.shape;
  const std::int64_t ld_k = round_up(s.d_k, P::kLanes), ld_v = round_up(s.d_v, P::kLanes);
  const std::int64_t key_tiles = (s.n_kv + kKeyBlock - 1) / kKeyBlock;
  const std::int64_t query_blocks = s.batch_heads * query_blocks_per_head(s);
  PackedQueries packed(s, query_blocks);
  // Dynamic scheduling: under causal masking tiles see different amounts of work. Each output
  // row has one writer that reads inputs only, so the schedule cannot change a bit of it.
#pragma omp parallel num_threads(a.threads)
  {
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < query_blocks; ++b)
      PackQueryBlock(a, query_block(s, b), QueryTiles(packed, b));
    BackwardScratch w(ld_k, ld_v);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t t = 0; t < s.batch_heads * key_tiles; ++t)
      KeyTileGradients<P>(a, packed, t / key_tiles, (t % key_tiles) * kKeyBlock, ld_k, ld_v, w);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < query_blocks; ++b) {
      if (a.probes)
        QueryBlockGradients<P, true>(a, query_block(s, b), QueryTiles(packed, b), ld_k, w);
      else
        QueryBlockGradients<P, false>(a, query_block(s, b), QueryTiles(packed, b), ld_k, w);
    }
  }
}

void FlashBackward(const BackwardArgs& a) { TiledBackward<HwyLanes>(a); }

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_targets.hpp"

namespace sdpa::detail {

HWY_EXPORT(FlashBackward);

BackwardFn flash_backward_fn(std::string_view isa) {
  for (const auto& t : supported_targets(HWY_DISPATCH_TABLE(FlashBackward)))
    if (t.isa == isa) return t.fn;
  return nullptr;
}

double flash_backward_workspace_bytes(const Shape& s, int threads) {
  const double blocks = double(s.batch_heads * query_blocks_per_head(s));
  const double packed = blocks * double(kQueryBlock * (s.d_k + s.d_v + 2));  // PackedQueries
  // BackwardScratch, with rows rounded up to the widest target's vectors.
  const std::int64_t ld_k = round_up(s.d_k, kMaxLanes), ld_v = round_up(s.d_v, kMaxLanes);
  constexpr std::int64_t keys = HWY_NAMESPACE::kKeyBlock, queries = kQueryBlock;
  const double scratch = double(2 * keys * queries + keys * (ld_k + ld_v) + queries * ld_k +
                                std::max(keys, queries) * std::max(ld_k, ld_v) + 4 * queries);
  return sizeof(float) * (packed + double(threads) * scratch);
}

}  // namespace sdpa::detail
#endif  // HWY_ONCE
