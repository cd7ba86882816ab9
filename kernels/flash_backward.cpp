// Rung 4's backward: the fused backward of flash. Probabilities are recomputed from the
// forward's row log-sum-exp, p_ij = e^{x_ij - lse_i}, one tile at a time, so nothing of size
// n_q x n_kv is ever stored. For a tile of kKeyBlock keys and a block of kQueryBlock queries,
// in the forward's layout (keys down the rows, queries along the lanes, so every step on P is
// lane-wise):
//   S^T  = K_tile (scale Q)^T            X^T = cap(S^T) + bias, P^T = e^{X^T - lse}
//   dP^T = V_tile dO^T                   dS^T = P^T o (dP^T - D) o cap',  D_i = dO_i . O_i
// with the score modifiers of sdpa/mask.hpp (each row's scale times its temperature, the
// soft-cap and its derivative cap' = 1 - tanh^2, ALiBi's constant bias; lse holds the sink), and
// three products use the tile: dV += P^T dO and dK += scale dS^T (t Q) for its keys,
// dQ += scale (t dS) K for its queries, t the rows' temperatures. A sink's gradient is
// -sum_i p_sink,i D_i. The five products are a policy's: Fp32Gradients runs the forward's Gemm
// (attention_tiles-inl.h), compiled per Highway target like the forward, so flash@avx2's
// backward runs AVX2; Bf16Gradients, flash-bf16's native backward, vdpbf16ps micro-kernels.
//
// One pass: five tile products per (key tile, query block), two for the probabilities and three
// for the gradients, against the forward's two (the 2.5 forwards of the FLOP convention). The
// keys of each K/V head are cut into at most kKeyRanges ranges of whole tiles, fixed by the shape
// and never by the thread count. A range owns the dK and dV rows of its keys (each tile summed
// over the group's query blocks that see it, in order) and writes its own part of dQ, the sum
// over its keys in tile order, for every query row that sees some of them. dQ is then the sum of
// the parts in range order. A (tile, block) pair that no row of the block sees is skipped, so a
// sliding window costs in proportion to the window. Every
// value is summed in an order the shape fixes, with one writer at a time, so the result is
// bit-identical on any thread count; the parts cost kKeyRanges copies of dQ (workspace). The
// work item is one key tile, the last of a range cut into smaller pieces (TileQueue): a range's
// pieces run one after another, on any thread.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "bf16.hpp"
#include "cached_scratch.hpp"
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

// Keys per tile: the rows of S^T. A tile streams every query block of its group through the
// caches (packed Q and dO, their rows, the block's rows of a dQ part), so a long tile streams
// less per FLOP (128 measured faster than 64: docs/perf-log/2026-11-24-flash-backward-one-pass.md).
// Its P^T, dS^T (2 x 128 x 48 floats) sit in L2.
constexpr std::int64_t kKeyBlock = 128;
constexpr std::int64_t kB = kQueryBlock;
// Key ranges per K/V head: more than the threads, so that each thread always finds a range
// whose next tile is free (TileQueue), and few, because each range keeps its own part of dQ.
constexpr std::int64_t kKeyRanges = 4;
// The last tile of a range runs as pieces of this many keys (TileQueue): the call ends when the
// last pieces end, so a thread that finishes first waits for at most one piece of its partner.
// Smaller pieces stream the query blocks more often per FLOP, so only the last tile is cut.
constexpr std::int64_t kTailKeys = kKeyBlock / 2;
// Bf16Gradients' words per thread: a tile's P^T and dS^T as words of column pairs, dS^T as words
// of row pairs.
constexpr std::int64_t kBf16TileWords = 3 * kKeyBlock * kB / 2;

std::int64_t key_tiles(const Shape& s) { return (s.n_kv + kKeyBlock - 1) / kKeyBlock; }
std::int64_t key_ranges(const Shape& s) { return std::min(key_tiles(s), kKeyRanges); }
// Range r of a K/V head's keys: tiles [r T / R, (r + 1) T / R) of its T tiles, first key here.
std::int64_t range_first_key(const Shape& s, std::int64_t r) {
  return std::min(s.n_kv, r * key_tiles(s) / key_ranges(s) * kKeyBlock);
}

// Every query block in the layout the tiles read, packed once per call (a key tile meets every
// query block, so packing per tile would repeat the transposes once per tile). Rows past a
// block are zero. Not zero-filled on allocation: PackQueryBlock writes all of it, in parallel.
struct PackedQueries {
  PackedQueries(const Shape& s, std::int64_t blocks)
      : d_k(s.d_k),
        d_v(s.d_v),
        q_t(aligned_floats(blocks * s.d_k * kB)),
        do_t(aligned_floats(blocks * s.d_v * kB)),
        shift(aligned_floats(blocks * kB)),
        delta(aligned_floats(blocks * kB)),
        temperature(aligned_floats(blocks * kB)),
        position(aligned_floats(blocks * kB)),
        sink_gradient(std::size_t(blocks)) {}
  std::int64_t d_k, d_v;
  AlignedFloats q_t;          // per block [d_k][kB]: the rows' scales times Q^T, B of S^T
  AlignedFloats do_t;         // per block [d_v][kB]: dO^T, B of dP^T
  AlignedFloats shift;        // per block [kB]: lse; +inf for rows that see no key or are past it
  AlignedFloats delta;        // per block [kB]: D_i = dO_i . O_i
  AlignedFloats temperature;  // per block [kB]: each row's temperature (1 without)
  AlignedFloats position;     // per block [kB]: each row's key position p (ALiBi), as a float
  // Per block: sum over its rows, in order, of p_sink D_i (the sink's gradient is minus that).
  std::vector<double> sink_gradient;
};

// Where block `index` lies in a PackedQueries: written by PackQueryBlock, read by the tiles.
struct QueryTiles {
  QueryTiles(PackedQueries& p, std::int64_t index)
      : index(index),
        q_t(p.q_t.get() + index * p.d_k * kB),
        do_t(p.do_t.get() + index * p.d_v * kB),
        shift(p.shift.get() + index * kB),
        delta(p.delta.get() + index * kB),
        temperature(p.temperature.get() + index * kB),
        position(p.position.get() + index * kB) {}
  std::int64_t index;  // of the block among all heads' blocks
  float *q_t, *do_t, *shift, *delta, *temperature, *position;
};

// Returns the block's sum of p_sink D_i over its rows, in row order (0 without a sink).
double PackQueryBlock(const BackwardArgs& a, const QueryBlock& blk, const QueryTiles& out) {
  const Shape& s = a.shape;
  std::fill_n(out.shift, kB, std::numeric_limits<float>::infinity());
  double sink_gradient = 0;
  for (std::int64_t i = 0; i < kB; ++i) {
    const std::int64_t r = blk.row0(s) + i;
    const bool in_block = i < blk.rows;
    const RowLogits row =
        row_logits(s, a.score_mod, a.scale, blk.head, blk.first_row + std::min(i, blk.rows - 1));
    out.temperature[i] = a.score_mod.temperature.empty()
                             ? 1.0f
                             : a.score_mod.temperature[blk.first_row + std::min(i, blk.rows - 1)];
    out.position[i] = float(row.position);
    for (std::int64_t c = 0; c < s.d_k; ++c)
      out.q_t[c * kB + i] = in_block ? row.scale * a.q[r * s.d_k + c] : 0.0f;
    float dot = 0;
    for (std::int64_t c = 0; c < s.d_v; ++c) {
      const float d_out = in_block ? a.d_out[r * s.d_v + c] : 0.0f;
      out.do_t[c * kB + i] = d_out;
      if (in_block) dot += d_out * a.out[r * s.d_v + c];
    }
    out.delta[i] = dot;
    // A row that sees no key and has no sink has lse = -inf; shifting by +inf makes its p = 0.
    if (in_block && a.lse[r] != -std::numeric_limits<float>::infinity()) out.shift[i] = a.lse[r];
    if (in_block && std::isfinite(row.sink))
      sink_gradient += std::exp(double(row.sink) - double(a.lse[r])) * double(dot);
  }
  return sink_gradient;
}

// The keys a block's rows see lie in [first.begin, last.end): every mask's range begins and
// ends no earlier for a later row (sdpa/mask.hpp), so the first and last rows bound the block.
struct BlockKeys {
  BlockKeys(const Shape& s, const Mask& mask, const QueryBlock& blk)
      : first(mask.visible(s, blk.first_row)),
        last(mask.visible(s, blk.first_row + blk.rows - 1)) {}
  // Whether some row may see a key of [key0, key_end) (a row between two that see none may not).
  bool sees(std::int64_t key0, std::int64_t key_end) const {
    return first.begin < last.end && first.begin < key_end && last.end > key0;
  }
  // Whether some row cannot see a key of [key0, key_end): the tile is masked (mask_tile).
  bool masks(std::int64_t key0, std::int64_t key_end) const {
    return key0 < last.begin || key_end > first.end;
  }
  KeyRange first, last;
};

// The parts of dQ / scale, one per key range: [ranges][rows][ld_k]. Range r writes the rows of
// the blocks that see some of its keys (dS is zero for keys a row cannot see), from the first
// tile of the range they see on; the rest is never written nor read (so not zero-filled on
// allocation either).
struct QueryParts {
  QueryParts(const Shape& s, std::int64_t ld_k)
      : rows(s.rows()), ld_k(ld_k), parts(aligned_floats(key_ranges(s) * rows * ld_k)) {}
  float* part(std::int64_t r) { return parts.get() + r * rows * ld_k; }
  std::int64_t rows, ld_k;
  AlignedFloats parts;
};

// One thread's scratch: one tile, the dK and dV accumulators, and rows of B padded to whole
// vectors (Gemm's b_pack) when d_k or d_v needs it.
struct BackwardScratch {
  BackwardScratch(std::int64_t ld_k, std::int64_t ld_v, bool softcap, std::int64_t words)
      : p_t(kKeyBlock * kB),
        ds_t(kKeyBlock * kB),
        cap_slope(softcap ? kKeyBlock * kB : 0),
        d_key(kKeyBlock * ld_k),
        d_value(kKeyBlock * ld_v),
        b_pack(std::max(kKeyBlock, kB) * std::max(ld_k, ld_v)),
        ds_sumsq(kB),
        ds_max_abs(kB),
        words(std::size_t(words)) {}
  std::vector<float> p_t;        // [kKeyBlock][kB] S^T, then P^T
  std::vector<float> ds_t;       // [kKeyBlock][kB] dP^T, then dS^T
  std::vector<float> cap_slope;  // with a soft-cap, [kKeyBlock][kB]: 1 - tanh^2 of S^T / cap
  // Accumulators: dK / scale and dV of a key tile.
  std::vector<float> d_key, d_value;
  std::vector<float> b_pack;
  // Probes of a query block, in double like every probe.
  std::vector<double> ds_sumsq, ds_max_abs;
  std::vector<std::uint32_t> words;  // the products' own operands of a tile (G::kTileWords)
};

// The logits of a tile of scaled scores S^T (in place): the soft-cap c tanh(s / c), whose
// derivative 1 - tanh^2 goes to w.cap_slope, and ALiBi's bias -slope |p - j| (sdpa/mask.hpp).
template <class P>
void ModifyScores(const BackwardArgs& a, const QueryBlock& blk, const QueryTiles& qt,
                  std::int64_t key0, std::int64_t nk, BackwardScratch& w) {
  using V = typename P::V;
  const typename P::D d;
  constexpr std::int64_t L = P::kLanes;
  const float softcap = a.score_mod.softcap;
  const float slope = row_logits(a.shape, a.score_mod, a.scale, blk.head, blk.first_row).slope;
  const V cap = P::Set(softcap), one = P::Set(1.0f), neg_slope = P::Set(-slope);
  for (std::int64_t g = 0; g < kB; g += L) {
    const V position = P::Load(qt.position + g);
    for (std::int64_t j = 0; j < nk; ++j) {
      float* x_out = w.p_t.data() + j * kB + g;
      V x = P::Load(x_out);
      if (softcap > 0) {
        const V t = hn::Tanh(d, hn::Div(x, cap));
        P::Store(hn::NegMulAdd(t, t, one), w.cap_slope.data() + j * kB + g);
        x = P::Mul(cap, t);
      }
      if (slope != 0)
        x = P::MulAdd(neg_slope, hn::Abs(P::Sub(position, P::Set(float(key0 + j)))), x);
      P::Store(x, x_out);
    }
  }
}

// P^T and dS^T of the key tile [key0, key0 + nk) against one query block; `masked`: the tile
// has keys some row of the block cannot see. With `by_temperature`, dS^T's rows are multiplied
// by their temperatures for the products (the gradient probes take dS at the scaled scores).
// G computes the two products (S^T into w.p_t, dP^T into w.ds_t).
template <class P, class G>
void ScoreGradientTile(const G& products, const BackwardArgs& a, const QueryBlock& blk,
                       const QueryTiles& qt, std::int64_t key0, std::int64_t nk, bool masked,
                       bool by_temperature, BackwardScratch& w) {
  using V = typename P::V;
  constexpr std::int64_t L = P::kLanes;
  const Shape& s = a.shape;
  products.Scores(a, blk, qt, key0, nk, w);
  const bool capped = a.score_mod.softcap > 0;
  if (capped || !a.score_mod.alibi_slopes.empty()) ModifyScores<P>(a, blk, qt, key0, nk, w);
  if (masked) mask_tile(s, a.mask, blk, key0, nk, w.p_t.data());
  products.DProbs(a, blk, qt, key0, nk, w);
  const bool scaled = by_temperature && !a.score_mod.temperature.empty();
  for (std::int64_t g = 0; g < kB; g += L) {
    const V shift = P::Load(qt.shift + g), delta = P::Load(qt.delta + g);
    if (!capped && !scaled) {  // the plain scores
      for (std::int64_t j = 0; j < nk; ++j) {
        float* p_out = w.p_t.data() + j * kB + g;
        float* ds_out = w.ds_t.data() + j * kB + g;
        const V p = P::Exp(P::Sub(P::Load(p_out), shift));
        P::Store(p, p_out);
        P::Store(P::Mul(p, P::Sub(P::Load(ds_out), delta)), ds_out);
      }
      continue;
    }
    const V temperature = scaled ? P::Load(qt.temperature + g) : P::Set(1.0f);
    for (std::int64_t j = 0; j < nk; ++j) {
      float* p_out = w.p_t.data() + j * kB + g;
      float* ds_out = w.ds_t.data() + j * kB + g;
      const V p = P::Exp(P::Sub(P::Load(p_out), shift));
      P::Store(p, p_out);
      V ds = P::Mul(p, P::Sub(P::Load(ds_out), delta));
      if (capped) ds = P::Mul(ds, P::Load(w.cap_slope.data() + j * kB + g));
      if (scaled) ds = P::Mul(ds, temperature);
      P::Store(ds, ds_out);
    }
  }
}

// C (m x ld) = init(C) + A B through the forward's register tiles, for the three products;
// `next` (what the next product reads) requested toward L2 as it runs.
template <class P>
void Accumulate(std::int64_t m, std::int64_t depth, const float* a, std::int64_t a_row,
                std::int64_t a_col, const float* b, std::int64_t ldb, std::int64_t b_cols,
                float* b_pack, float* c, std::int64_t ld, std::span<const float> next,
                Gemm::Init init = Gemm::Init::kLoad) {
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
               .init = init,
               .next = next};
  RunGemm<P, P::kMrO, P::kNvO>(g);
}

void StoreRows(const float* acc, std::int64_t ld, std::int64_t rows, std::int64_t cols,
               float factor, float* out) {
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t c = 0; c < cols; ++c) out[i * cols + c] = factor * acc[i * ld + c];
}

// The backward's products in fp32 through the forward's register tiles: B of S^T is the block's
// scaled Q^T, so nothing is scaled after. Each requests what the next one reads toward L2 (Gemm's
// next, on AVX2): the block's packed dO^T, its rows of dO, of Q and of the dQ part, then the
// next block's packed Q^T. The tile's K and V stay in L2 while the blocks stream from L3
// (docs/perf-log/2026-11-29-backward-next-operand.md).
template <class P>
struct Fp32Gradients {
  static constexpr std::int64_t kTileWords = 0;
  void PackBlock(const BackwardArgs&, const QueryBlock&, std::int64_t) const {}
  // w.p_t = S^T = K_tile q_t of the tile's keys.
  void Scores(const BackwardArgs& a, const QueryBlock& blk, const QueryTiles& qt, std::int64_t key0,
              std::int64_t nk, BackwardScratch& w) const {
    const Shape& s = a.shape;
    RunGemm<P, P::kMrS, P::kNvS>(TileGemm(a.k + (s.kv_head(blk.head) * s.n_kv + key0) * s.d_k,
                                          s.d_k, nk, qt.q_t, w.p_t.data(),
                                          {qt.do_t, std::size_t(s.d_v * kB)}));
  }
  // w.ds_t = dP^T = V_tile dO^T.
  void DProbs(const BackwardArgs& a, const QueryBlock& blk, const QueryTiles& qt, std::int64_t key0,
              std::int64_t nk, BackwardScratch& w) const {
    const Shape& s = a.shape;
    RunGemm<P, P::kMrS, P::kNvS>(
        TileGemm(a.v + (s.kv_head(blk.head) * s.n_kv + key0) * s.d_v, s.d_v, nk, qt.do_t,
                 w.ds_t.data(), {a.d_out + blk.row0(s) * s.d_v, std::size_t(blk.rows * s.d_v)}));
  }
  // dV += P^T dO and dK / scale += dS^T Q for the tile's keys, and the block's rows of the dQ
  // part (/ scale) gain dS K: zeroed first where `starts`. `next_block`: the next block's Q^T.
  void Gradients(const BackwardArgs& a, const QueryBlock& blk, const QueryTiles& /*qt*/,
                 std::int64_t key0, std::int64_t nk, float* part, bool starts,
                 std::span<const float> next_block, std::int64_t ld_k, std::int64_t ld_v,
                 BackwardScratch& w) const {
    const Shape& s = a.shape;
    const std::int64_t r0 = blk.row0(s);
    const float* q = a.q + r0 * s.d_k;
    const float* k = a.k + s.kv_head(blk.head) * s.n_kv * s.d_k;
    Accumulate<P>(nk, blk.rows, w.p_t.data(), kB, 1, a.d_out + r0 * s.d_v, s.d_v, s.d_v,
                  w.b_pack.data(), w.d_value.data(), ld_v, {q, std::size_t(blk.rows * s.d_k)});
    Accumulate<P>(nk, blk.rows, w.ds_t.data(), kB, 1, q, s.d_k, s.d_k, w.b_pack.data(),
                  w.d_key.data(), ld_k, {part, std::size_t(blk.rows * ld_k)});
    Accumulate<P>(blk.rows, nk, w.ds_t.data(), 1, kB, k + key0 * s.d_k, s.d_k, s.d_k,
                  w.b_pack.data(), part, ld_k, next_block,
                  starts ? Gemm::Init::kZero : Gemm::Init::kLoad);
  }

 private:
  // C = A_tile B for the nk rows of A (d floats each) against a packed block B ([d][kB]).
  static Gemm TileGemm(const float* a, std::int64_t d, std::int64_t nk, const float* b, float* c,
                       std::span<const float> next) {
    return {.m = nk,
            .n_vec = kB / P::kLanes,
            .k = d,
            .a = a,
            .a_row = d,
            .a_col = 1,
            .b = b,
            .ldb = kB,
            .b_cols = kB,
            .c = c,
            .ldc = kB,
            .next = next};
  }
};

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// The backward of flash-bf16's native entry (flash_bf16.cpp): Q, K, V and dO rounded to bf16,
// the five products vdpbf16ps micro-kernels (bf16.hpp) on bf16 pairs summed in fp32, and P and
// dS rounded to bf16 before the products that take them, as FlashAttention-2's bf16 backward
// does; the probabilities, dS and the rest in fp32, as flash's. S^T is the forward's to the bit
// (the same pairs in the same order, each row's scale applied as the sums are stored), so P
// agrees with the forward's lse. Each operand is laid out once per call (K, V) or per block
// (Q, dO) as its product reads it: words of two bf16 values, the lower index in the low half.
class Bf16Gradients {
  // Its blocks are the micro-kernels' (bf16.hpp), its rows of pairs whole zmm registers, as
  // TiledBackward's accumulators (ld_k_, ld_v_ are its ld_k, ld_v).
  static_assert(kB == kBf16Block && HwyLanes::kLanes == 16);

 public:
  static constexpr std::int64_t kTileWords = kBf16TileWords;

  explicit Bf16Gradients(const BackwardArgs& a)
      : pk_(round_up(a.shape.d_k, 2) / 2),
        pv_(round_up(a.shape.d_v, 2) / 2),
        ld_k_(round_up(a.shape.d_k, HwyLanes::kLanes)),
        ld_v_(round_up(a.shape.d_v, HwyLanes::kLanes)),
        at_(a.shape, ld_k_, ld_v_, a.shape.batch_heads * query_blocks_per_head(a.shape)),
        kept_(Kept(at_.floats)),
        args_(a) {
    const Shape& s = a.shape;
    args_.d_out = Rounded(a.d_out, s.out_elements(), at_.d_out, a.threads);
    const std::int64_t pairs_per_head = round_up(s.n_kv, 2) / 2;
#pragma omp parallel for num_threads(a.threads) schedule(static)
    for (std::int64_t r = 0; r < s.kv_batch_heads() * s.n_kv; ++r) {
      ColumnPairs(a.k + r * s.d_k, s.d_k, 1, words(at_.k_words) + r * pk_);
      ColumnPairs(a.v + r * s.d_v, s.d_v, 1, words(at_.v_words) + r * pv_);
      if (r % s.n_kv % 2 == 0)  // keys 2j and 2j + 1 of a head: word row j of its K pairs
        RowPairs(a.k + r * s.d_k, s.d_k, std::min<std::int64_t>(2, s.n_kv - r % s.n_kv), ld_k_,
                 words(at_.k_pairs) + (r / s.n_kv * pairs_per_head + r % s.n_kv / 2) * ld_k_);
    }
  }
  // The call's arguments with dO rounded: D = dO . O (PackQueryBlock) and PackBlock read it.
  const BackwardArgs& args() const { return args_; }

  // Block b's Q^T and dO^T as words of depth pairs ([pairs][kB], S^T's and dP^T's B), its rows
  // of Q and dO as words of row pairs ([kB / 2][ld], dK's and dV's B), and its rows' scales.
  void PackBlock(const BackwardArgs& a, const QueryBlock& blk, std::int64_t b) const {
    const Shape& s = a.shape;
    const std::int64_t r0 = blk.row0(s);
    std::uint32_t* q_pairs = words(at_.q_pairs) + b * pk_ * kB;
    std::uint32_t* do_pairs = words(at_.do_pairs) + b * pv_ * kB;
    float* scale = kept_ + at_.scale + b * kB;
    std::fill_n(q_pairs, pk_ * kB, 0u), std::fill_n(do_pairs, pv_ * kB, 0u);  // rows past the block
    std::fill_n(scale, kB, 0.0f);
    for (std::int64_t i = 0; i < blk.rows; ++i) {
      scale[i] = row_logits(s, a.score_mod, a.scale, blk.head, blk.first_row + i).scale;
      ColumnPairs(a.q + (r0 + i) * s.d_k, s.d_k, kB, q_pairs + i);
      ColumnPairs(a.d_out + (r0 + i) * s.d_v, s.d_v, kB, do_pairs + i);
    }
    for (std::int64_t i = 0; i < blk.rows; i += 2) {
      const std::int64_t rows = std::min<std::int64_t>(2, blk.rows - i);
      RowPairs(a.q + (r0 + i) * s.d_k, s.d_k, rows, ld_k_,
               words(at_.q_rows) + (b * kB + i) / 2 * ld_k_);
      RowPairs(a.d_out + (r0 + i) * s.d_v, s.d_v, rows, ld_v_,
               words(at_.do_rows) + (b * kB + i) / 2 * ld_v_);
    }
  }
  void Scores(const BackwardArgs& a, const QueryBlock& blk, const QueryTiles& qt, std::int64_t key0,
              std::int64_t nk, BackwardScratch& w) const {
    const std::int64_t first = a.shape.kv_head(blk.head) * a.shape.n_kv + key0;
    bf16_dot_scores(words(at_.k_words) + first * pk_, pk_, nk,
                    words(at_.q_pairs) + qt.index * pk_ * kB, pk_,
                    kept_ + at_.scale + qt.index * kB, w.p_t.data());
  }
  void DProbs(const BackwardArgs& a, const QueryBlock& blk, const QueryTiles& qt, std::int64_t key0,
              std::int64_t nk, BackwardScratch& w) const {
    static constexpr auto kOnes = [] {
      std::array<float, kB> x{};
      x.fill(1.0f);
      return x;
    }();
    const std::int64_t first = a.shape.kv_head(blk.head) * a.shape.n_kv + key0;
    bf16_dot_scores(words(at_.v_words) + first * pv_, pv_, nk,
                    words(at_.do_pairs) + qt.index * pv_ * kB, pv_, kOnes.data(), w.ds_t.data());
  }
  // Fp32Gradients::Gradients' three products, P^T and dS^T rounded first.
  void Gradients(const BackwardArgs& a, const QueryBlock& blk, const QueryTiles& qt,
                 std::int64_t key0, std::int64_t nk, float* part, bool starts,
                 std::span<const float> /*next_block*/, std::int64_t /*ld_k*/,
                 std::int64_t /*ld_v*/, BackwardScratch& w) const {
    std::uint32_t* p_words = w.words.data();  // [nk][kB / 2]
    std::uint32_t* ds_words = p_words + kKeyBlock * kB / 2;
    std::uint32_t* ds_pairs = ds_words + kKeyBlock * kB / 2;  // [nk / 2][kB]
    bf16_round_native(w.p_t.data(), reinterpret_cast<std::uint16_t*>(p_words), nk * kB);
    bf16_round_native(w.ds_t.data(), reinterpret_cast<std::uint16_t*>(ds_words), nk * kB);
    bf16_pack_row_pairs(w.ds_t.data(), kB, kB, nk, ds_pairs, kB);
    // dV += P^T dO and dK += dS^T Q: A's rows are the tile's keys, its pairs the block's rows.
    const auto by_key = [&](const std::uint32_t* a_words, const std::uint32_t* b, std::int64_t ld,
                            float* c) {
      bf16_dot_rows({.a = a_words,
                     .a_row = kB / 2,
                     .a_pair = 1,
                     .rows = nk,
                     .pairs = round_up(blk.rows, 2) / 2,
                     .b = b,
                     .ldb = ld,
                     .c = c,
                     .ldc = ld,
                     .ld = ld,
                     .init = Bf16Product::Init::kLoad});
    };
    by_key(p_words, words(at_.do_rows) + qt.index * kB / 2 * ld_v_, ld_v_, w.d_value.data());
    by_key(ds_words, words(at_.q_rows) + qt.index * kB / 2 * ld_k_, ld_k_, w.d_key.data());
    // The part += dS K: A's rows are the block's, its pairs the tile's keys.
    const std::int64_t kv = a.shape.kv_head(blk.head), per_head = round_up(a.shape.n_kv, 2) / 2;
    bf16_dot_rows({.a = ds_pairs,
                   .rows = blk.rows,
                   .pairs = round_up(nk, 2) / 2,
                   .b = words(at_.k_pairs) + (kv * per_head + key0 / 2) * ld_k_,
                   .ldb = ld_k_,
                   .c = part,
                   .ldc = ld_k_,
                   .ld = ld_k_,
                   .init = starts ? Bf16Product::Init::kZero : Bf16Product::Init::kLoad});
  }

 private:
  // One buffer per calling thread, kept between calls (cached_scratch.hpp): fresh pages on
  // every call cost most of a small call's time.
  static float* Kept(std::int64_t n) {
    thread_local CachedScratch t_kept;
    return t_kept.floats(n);
  }
  std::uint32_t* words(std::int64_t offset) const {
    return reinterpret_cast<std::uint32_t*>(kept_ + offset);
  }
  // x rounded to bf16 into the kept buffer at `offset`.
  const float* Rounded(const float* x, std::int64_t n, std::int64_t offset, int threads) const {
    float* y = kept_ + offset;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) y[i] = bf16_round(x[i]);
    return y;
  }
  // A word of two values rounded to bf16, the first in the low half.
  static std::uint32_t Word(float low, float high) {
    return bf16_round_bits(low) >> 16 | bf16_round_bits(high);
  }
  // A row of n values as words of column pairs, `stride` words apart (an odd n's last pairs
  // with zero).
  static void ColumnPairs(const float* x, std::int64_t n, std::int64_t stride,
                          std::uint32_t* words) {
    for (std::int64_t c = 0; c < n; c += 2)
      words[c / 2 * stride] = Word(x[c], c + 1 < n ? x[c + 1] : 0.0f);
  }
  // One or two rows of n values (n apart) as one row of ld words of row pairs (zeros past n).
  static void RowPairs(const float* x, std::int64_t n, std::int64_t rows, std::int64_t ld,
                       std::uint32_t* words) {
    for (std::int64_t c = 0; c < n; ++c) words[c] = Word(x[c], rows > 1 ? x[n + c] : 0.0f);
    std::fill(words + n, words + ld, 0u);
  }

  std::int64_t pk_, pv_;      // words of a row of K and of V: d_k and d_v rounded up to even, / 2
  std::int64_t ld_k_, ld_v_;  // words of a row of pairs: d_k and d_v rounded up to whole vectors
  Bf16BackwardLayout at_;     // where each array lies in kept_
  float* kept_;
  BackwardArgs args_;
};
#endif

// The work item: the nk <= kKeyBlock keys from key0 of range r of K/V head `kv` (a tile or a
// piece of one). They meet every query block of the group's query heads that sees them, in
// order (the heads are consecutive, head-major); their dK and dV are summed over them, and each
// block's rows of the range's dQ part gain their share (the first keys of the range the block
// sees write them).
// Cutting a tile into pieces changes no bit: dK, dV and the scores are per key, and the pieces
// continue the products' sums over keys into the dQ part in the same order (Gemm adds p = 0,
// 1, ... into each element, and a float stored and loaded again is the same float).
template <class P, class G>
void KeyTileGradients(const G& products, const BackwardArgs& a, PackedQueries& packed,
                      std::int64_t kv, std::int64_t r, std::int64_t key0, std::int64_t nk,
                      float* d_query_part, std::int64_t ld_k, std::int64_t ld_v,
                      BackwardScratch& w) {
  const Shape& s = a.shape;
  const std::int64_t per_group = s.group * query_blocks_per_head(s);
  std::fill(w.d_key.begin(), w.d_key.end(), 0.0f);
  std::fill(w.d_value.begin(), w.d_value.end(), 0.0f);
  for (std::int64_t b = kv * per_group; b < (kv + 1) * per_group; ++b) {
    const QueryBlock blk = query_block(s, b);
    const BlockKeys keys(s, a.mask, blk);
    if (!keys.sees(key0, key0 + nk)) continue;  // masked
    const QueryTiles qt(packed, b);
    ScoreGradientTile<P>(products, a, blk, qt, key0, nk, keys.masks(key0, key0 + nk), true, w);
    // The first piece of the range the block sees (the range's first, or the one holding the
    // block's first key): there its rows of the part start.
    const bool starts = key0 == range_first_key(s, r) || key0 <= keys.first.begin;
    const std::span<const float> next_block =  // whether or not that block sees the tile
        b + 1 < (kv + 1) * per_group
            ? std::span<const float>(QueryTiles(packed, b + 1).q_t, std::size_t(s.d_k * kB))
            : std::span<const float>();
    products.Gradients(a, blk, qt, key0, nk, d_query_part + blk.row0(s) * ld_k, starts, next_block,
                       ld_k, ld_v, w);
  }
  const std::int64_t first = kv * s.n_kv + key0;
  StoreRows(w.d_key.data(), ld_k, nk, s.d_k, a.scale, a.d_k + first * s.d_k);
  StoreRows(w.d_value.data(), ld_v, nk, s.d_v, 1.0f, a.d_v + first * s.d_v);
}

// Query blocks of one head that see some of the keys [key0, key_end).
std::int64_t blocks_seeing(const Shape& s, const Mask& mask, std::int64_t key0,
                           std::int64_t key_end) {
  std::int64_t blocks = 0;
  for (std::int64_t b = 0; b < query_blocks_per_head(s); ++b)
    blocks += BlockKeys(s, mask, query_block(s, b)).sees(key0, key_end);
  return blocks;
}

// The schedule of the key tiles. A range's tiles must run one after another (each adds to the
// range's part of dQ, in key order), but any thread may run its next, so the work is shared out
// one tile at a time rather than one range at a time: with 4 ranges on 2 threads, a thread that
// fell behind (a preempted vCPU, a slower core) left its partner idle at the end for up to a
// range's worth when the work item was a range, and up to a tile when it was a tile. Since the
// ranges drain together (below), the tiles that run last are the ranges' last ones, so those
// are cut into pieces of kTailKeys and the wait is at most one piece. A thread takes the free range
// with the most work left (ties: the lowest index), or keeps to its own while that is within its
// next piece of it (cache locality, see next()), so the ranges drain together, also under causal
// masking, where the first ranges' tiles meet the most query blocks, and under a window, where
// each tile meets few. Which thread runs a piece
// decides nothing about its values: the order of every sum is fixed by the shape.
class TileQueue {
 public:
  struct Tile {
    std::int64_t item;  // kv * ranges + r
    std::int64_t key0, keys;
  };
  TileQueue(const Shape& s, const Mask& mask)
      : s_(s), mask_(mask), ranges_(key_ranges(s)), items_(s.kv_batch_heads() * ranges_) {
    std::vector<std::int64_t> work_left(ranges_, 0);
    for (std::int64_t r = 0; r < ranges_; ++r)
      for (std::int64_t key0 = range_first_key(s, r); key0 < range_first_key(s, r + 1);
           key0 += piece_keys(r, key0))
        work_left[r] += work(r, key0);
    for (std::int64_t t = 0; t < std::int64_t(items_.size()); ++t)
      items_[t] = {.next_key = range_first_key(s, t % ranges_),
                   .work_left = work_left[t % ranges_]};
  }
  std::int64_t ranges() const { return ranges_; }
  // What a queue allocates (workspace): a state per (K/V head, range), a count per range.
  static double bytes(const Shape& s) {
    return double(key_ranges(s) * (s.kv_batch_heads() * std::int64_t(sizeof(Item)) +
                                   std::int64_t(sizeof(std::int64_t))));
  }
  // Marks `done` (this thread's last piece, if any) finished and returns the next to run, or
  // none when every range with keys left is being run by another thread (which runs them).
  std::optional<Tile> next(const std::optional<Tile>& done) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (done) items_[done->item].busy = false;
    std::int64_t best = -1;
    for (std::int64_t t = 0; t < std::int64_t(items_.size()); ++t)
      if (!items_[t].busy && has_keys(t) &&
          (best < 0 || items_[t].work_left > items_[best].work_left))
        best = t;
    if (best < 0) return std::nullopt;
    // The range just run goes on unless another has more than its next piece's work more left:
    // its part of dQ is still in this core's cache (at N = 1024, d = 64 a part fits in L2), and
    // the ranges still drain together.
    if (done && has_keys(done->item)) {
      const Item& own = items_[done->item];
      if (own.work_left + work(done->item % ranges_, own.next_key) >= items_[best].work_left)
        best = done->item;
    }
    Item& it = items_[best];
    const std::int64_t r = best % ranges_;
    const Tile tile{.item = best, .key0 = it.next_key, .keys = piece_keys(r, it.next_key)};
    it.busy = true;
    it.next_key += tile.keys;
    it.work_left -= work(r, tile.key0);
    return tile;
  }

 private:
  struct Item {
    std::int64_t next_key = 0;   // the range's next piece
    std::int64_t work_left = 0;  // its pieces' keys times query blocks, still to run
    bool busy = false;           // a thread runs one of its pieces
  };
  bool has_keys(std::int64_t t) const {
    return items_[t].next_key < range_first_key(s_, t % ranges_ + 1);
  }
  // Keys of the piece at key0 in range r: a whole tile, but kTailKeys in the range's last tile.
  std::int64_t piece_keys(std::int64_t r, std::int64_t key0) const {
    const std::int64_t left = range_first_key(s_, r + 1) - key0;
    return std::min(left, left > kKeyBlock ? kKeyBlock : kTailKeys);
  }
  // The cost of that piece: keys times the query blocks that see them.
  std::int64_t work(std::int64_t r, std::int64_t key0) const {
    const std::int64_t keys = piece_keys(r, key0);
    return keys * blocks_seeing(s_, mask_, key0, key0 + keys);
  }
  const Shape& s_;
  Mask mask_;
  std::int64_t ranges_;
  std::vector<Item> items_;  // one per (K/V head, range)
  std::mutex mutex_;
};

// dQ of one query block: scale times the sum of the parts of the ranges it sees, in range order.
void SumQueryParts(const BackwardArgs& a, const QueryBlock& blk, QueryParts& parts) {
  const Shape& s = a.shape;
  const std::int64_t r0 = blk.row0(s);
  float* out = a.d_q + r0 * s.d_k;
  std::fill_n(out, blk.rows * s.d_k, 0.0f);
  const BlockKeys keys(s, a.mask, blk);
  for (std::int64_t r = 0; r < key_ranges(s); ++r) {
    if (!keys.sees(range_first_key(s, r), range_first_key(s, r + 1))) continue;
    const float* part = parts.part(r) + r0 * parts.ld_k;
    for (std::int64_t i = 0; i < blk.rows; ++i)
      for (std::int64_t c = 0; c < s.d_k; ++c) out[i * s.d_k + c] += part[i * parts.ld_k + c];
  }
  for (std::int64_t e = 0; e < blk.rows * s.d_k; ++e) out[e] *= a.scale;
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

// The probes of one query block, by query block so that each row's sums run in key order:
// one walk over its key tiles for the sums and the largest |dS|, and, since participation
// needs that largest first, a second walk that counts (rather than keep a row of dS per query,
// O(n_kv) each). Only a call with a probe sink pays for these walks.
template <class P, class G>
void ProbeBlock(const G& products, const BackwardArgs& a, const QueryBlock& blk,
                const QueryTiles& qt, BackwardScratch& w) {
  const Shape& s = a.shape;
  GradProbes& probes = *a.probes;
  std::fill(w.ds_sumsq.begin(), w.ds_sumsq.end(), 0.0);
  std::fill(w.ds_max_abs.begin(), w.ds_max_abs.end(), 0.0);
  const BlockKeys keys(s, a.mask, blk);
  const KeyRange seen{keys.first.begin, keys.sees(0, s.n_kv) ? keys.last.end : keys.first.begin};
  for (std::int64_t key0 = seen.begin; key0 < seen.end; key0 += kKeyBlock) {
    const std::int64_t nk = std::min(kKeyBlock, seen.end - key0);
    ScoreGradientTile<P>(products, a, blk, qt, key0, nk, keys.masks(key0, key0 + nk), false, w);
    ProbeTileSums(blk, nk, w);
  }
  const std::int64_t r0 = blk.row0(s);
  for (std::int64_t i = 0; i < blk.rows; ++i) {
    probes.ds_sumsq[r0 + i] = w.ds_sumsq[i];
    probes.ds_max_abs[r0 + i] = w.ds_max_abs[i];
    probes.participating[r0 + i] = 0;
    probes.visible[r0 + i] = a.mask.visible(s, blk.first_row + i).size();
  }
  for (std::int64_t key0 = seen.begin; key0 < seen.end; key0 += kKeyBlock) {
    const std::int64_t nk = std::min(kKeyBlock, seen.end - key0);
    ScoreGradientTile<P>(products, a, blk, qt, key0, nk, keys.masks(key0, key0 + nk), false, w);
    for (std::int64_t j = 0; j < nk; ++j)
      for (std::int64_t i = 0; i < blk.rows; ++i)  // masked keys have dS = 0: never counted
        probes.participating[r0 + i] +=
            std::abs(double(w.ds_t[j * kB + i])) > kParticipationThreshold * w.ds_max_abs[i];
  }
}

template <class P, class G>
void TiledBackward(const BackwardArgs& a, const G& products) {
  static_assert(kB % P::kLanes == 0, "a query block is whole vectors");
  const Shape& s = a.shape;
  const std::int64_t ld_k = round_up(s.d_k, P::kLanes), ld_v = round_up(s.d_v, P::kLanes);
  const std::int64_t query_blocks = s.batch_heads * query_blocks_per_head(s);
  TileQueue queue(s, a.mask);
  const std::int64_t ranges = queue.ranges();
  PackedQueries packed(s, query_blocks);
  QueryParts parts(s, ld_k);
  // Dynamic scheduling (packing, the sums) and the tile queue: under causal masking items see
  // different amounts of work. Each output row has one writer at a time, in an order the shape
  // fixes, so the schedule cannot change a bit of it.
#pragma omp parallel num_threads(a.threads)
  {
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < query_blocks; ++b) {
      packed.sink_gradient[std::size_t(b)] =
          PackQueryBlock(a, query_block(s, b), QueryTiles(packed, b));
      products.PackBlock(a, query_block(s, b), b);
    }
    BackwardScratch w(ld_k, ld_v, a.score_mod.softcap > 0, G::kTileWords);
    for (auto tile = queue.next(std::nullopt); tile; tile = queue.next(tile)) {
      const std::int64_t r = tile->item % ranges;
      KeyTileGradients<P>(products, a, packed, tile->item / ranges, r, tile->key0, tile->keys,
                          parts.part(r), ld_k, ld_v, w);
    }
#pragma omp barrier  // every part complete before the sums read them
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < query_blocks; ++b) {
      SumQueryParts(a, query_block(s, b), parts);
      if (a.probes) ProbeBlock<P>(products, a, query_block(s, b), QueryTiles(packed, b), w);
    }
  }
  if (a.d_sinks) {  // in block order, whatever the threads: the same bits on any count
    const std::span<const float> sinks = a.score_mod.sinks;
    std::vector<double> d_sinks(sinks.size(), 0.0);
    for (std::int64_t b = 0; b < query_blocks && !sinks.empty(); ++b)
      d_sinks[std::size_t(query_block(s, b).head) % sinks.size()] -=
          packed.sink_gradient[std::size_t(b)];
    for (std::size_t h = 0; h < sinks.size(); ++h) a.d_sinks[h] = float(d_sinks[h]);
  }
}

void FlashBackward(const BackwardArgs& a) { TiledBackward<HwyLanes>(a, Fp32Gradients<HwyLanes>()); }

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
void Bf16NativeBackward(const BackwardArgs& a) {
  const Bf16Gradients products(a);
  TiledBackward<HwyLanes>(products.args(), products);
}
#endif

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

BackwardFn flash_bf16_native_backward(std::int64_t target) {
#if HWY_TARGETS & HWY_AVX3_DL
  if (target == HWY_AVX3_DL) return &N_AVX3_DL::Bf16NativeBackward;
#endif
#if HWY_TARGETS & HWY_AVX3
  if (target == HWY_AVX3) return &N_AVX3::Bf16NativeBackward;
#endif
  (void)target;
  return nullptr;
}

double flash_backward_workspace_bytes(const Shape& s, int threads) {
  const double blocks = double(s.batch_heads * query_blocks_per_head(s));
  // PackedQueries: Q^T, dO^T and four floats per row, a double per block.
  const double packed = blocks * double(kQueryBlock * (s.d_k + s.d_v + 4) + 2);
  // QueryParts and BackwardScratch, with rows rounded up to the widest target's vectors.
  const std::int64_t ld_k = round_up(s.d_k, kMaxLanes), ld_v = round_up(s.d_v, kMaxLanes);
  const double parts = double(HWY_NAMESPACE::key_ranges(s) * s.rows() * ld_k);
  constexpr std::int64_t keys = HWY_NAMESPACE::kKeyBlock, queries = kQueryBlock;
  // The soft-cap's slopes counted whether or not a call has one.
  const double scratch = double(3 * keys * queries + keys * (ld_k + ld_v) +
                                std::max(keys, queries) * std::max(ld_k, ld_v) + 4 * queries);
  return sizeof(float) * (packed + parts + double(threads) * scratch) +
         HWY_NAMESPACE::TileQueue::bytes(s);
}

double flash_bf16_backward_workspace_bytes(const Shape& s, int threads) {
  // flash's, Bf16Gradients' kept buffer (Bf16BackwardLayout) and per thread a tile's words.
  const Bf16BackwardLayout kept(s, round_up(s.d_k, kMaxLanes), round_up(s.d_v, kMaxLanes),
                                s.batch_heads * query_blocks_per_head(s));
  const double words = double(kept.floats + threads * HWY_NAMESPACE::kBf16TileWords);
  return flash_backward_workspace_bytes(s, threads) + sizeof(float) * words;
}

}  // namespace sdpa::detail
#endif  // HWY_ONCE
