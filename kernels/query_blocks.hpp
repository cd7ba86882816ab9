// The outer loops that the tiled rungs (blocked, simd, flash) share. The work of a forward is
// cut into blocks of kQueryBlock query rows of one head; a block reads its queries and every key
// and value it can see, and writes only its own output rows, so threads take whole blocks and
// the result is bit-identical on any thread count. Plain C++: what is specific to an instruction
// set is the BlockFn a rung passes in (attention_tiles-inl.h). Internal to sdpa_kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>

#include "sdpa/aligned.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa::detail {

// Query rows per block. In S^T = K Q^T the queries run along vector lanes, in O += P V down the
// register tile's rows, so the block is a multiple of every tile width (16 lanes x 3, 8 x 2,
// 4 x 2, 1 x 3) and of every tile height for O (3 or 6 rows): no query tails inside a block.
// Small enough that the block's queries, one key tile of scores and its outputs stay in L1/L2.
inline constexpr std::int64_t kQueryBlock = 48;

inline std::int64_t round_up(std::int64_t x, std::int64_t multiple) {
  return (x + multiple - 1) / multiple * multiple;
}

// A prefetch into L2 rather than L1 (x86's prefetcht1, Arm's PLDL2KEEP): for data requested far
// enough ahead that, brought into L1, it would evict what is being read there, or whose request
// would hold an L1 miss buffer the loads need (the decode's streams over K and V, int8 dots
// included: docs/perf-log/2026-11-30-decode-prefetch-l2.md). Always inlined: GCC found a plain
// inline one free of side effects and deleted its calls from the Highway targets' code
// (docs/perf-log/2026-11-30-prefetch-calls-deleted.md).
[[gnu::always_inline]] inline void prefetch_to_l2(const void* p) { __builtin_prefetch(p, 0, 2); }

struct QueryBlock {
  std::int64_t head = 0;       // index in batch_heads
  std::int64_t first_row = 0;  // first query row (within the head)
  std::int64_t rows = 0;       // rows in the block, <= kQueryBlock
  // The first row's index among all heads' rows (of Q, O, dO, lse).
  std::int64_t row0(const Shape& s) const { return head * s.n_q + first_row; }
};

// Blocks per head, and block `index` of all batch_heads x blocks_per_head (head-major): how
// forward and backward cut the queries.
inline std::int64_t query_blocks_per_head(const Shape& s) {
  return (s.n_q + kQueryBlock - 1) / kQueryBlock;
}
inline QueryBlock query_block(const Shape& s, std::int64_t index) {
  const std::int64_t per_head = query_blocks_per_head(s);
  const std::int64_t first_row = (index % per_head) * kQueryBlock;
  return {.head = index / per_head,
          .first_row = first_row,
          .rows = std::min(kQueryBlock, s.n_q - first_row)};
}

// The online softmax of a block's query rows (kQueryBlock entries each, a block uses its first
// rows): forward blocks of every shape (prefill and decode) carry one.
struct RowStats {
  float* max;      // running max m of each row
  float* sum;      // running l = sum e^{s - m}
  float* rescale;  // alpha = e^{m_old - m_new} of the last key tile
  // Probes only: the previous m and l, and this tile's sums over visible scores.
  float *prev_max, *prev_sum, *tile_s, *tile_s2, *tile_t, *tile_nonfinite, *tile_p2, *tile_p3;
  // Running, in double; p2, p3 are sum e^{2(s-m)} and sum e^{3(s-m)} at the current max m.
  double *score_sum, *score_sumsq, *shifted_t, *nonfinite, *p2, *p3;
};

// One thread's scratch for one block, carved from a single aligned allocation. Every array
// starts on a 64-byte boundary. Rows of `acc` and `v_pack` have `ld_acc` floats: d_v rounded up
// to whole vectors of the target.
struct BlockScratch : RowStats {
  float* q_t;       // [d_k][kQueryBlock]: scale * Q^T of the block, zero in rows past the block
  float* q_scale;   // [kQueryBlock]: each row's scale, the call's times the row's temperature
  float* position;  // [kQueryBlock]: each row's key position p (ALiBi's bias), as a float
  float* scores;    // [key_tile][kQueryBlock]: S^T of one key tile, overwritten by P^T
  float* acc;       // [kQueryBlock][ld_acc]: unnormalised output rows
  float* v_pack;    // [kDepthChunk][ld_acc]: values padded to whole vectors, when d_v needs it
};

inline constexpr std::int64_t kAlignFloats = kCacheLine / sizeof(float);  // 16

// Hands out consecutive 64-byte-aligned arrays from one block of floats (or only counts them
// when base is null, which is how a size is computed: one layout, written once).
class Carver {
 public:
  explicit Carver(float* base) : base_(base) {}
  float* floats(std::int64_t n) {
    float* p = base_ ? base_ + used_ : nullptr;
    used_ += round_up(std::max<std::int64_t>(n, 1), kAlignFloats);
    return p;
  }
  double* doubles(std::int64_t n) { return reinterpret_cast<double*>(floats(2 * n)); }
  std::int64_t used() const { return used_; }

 private:
  float* base_;
  std::int64_t used_ = 0;
};

void carve_row_stats(Carver& c, RowStats& w);

// Depth of one GEMM pass (BLIS's k_c): keys in O += P V, d_k in S^T = K Q^T. The B rows of a
// pass (values, or the block's queries) stay in L1/L2 while every register tile reuses them.
inline constexpr std::int64_t kDepthChunk = 128;

// Keys per tile of flash's prefill (and of flash-kv's, which runs it on widened K and V): the
// tile's scores (kFlashKeys x kQueryBlock floats) and one register strip of its values stay in
// L1 while the output tile is updated.
inline constexpr std::int64_t kFlashKeys = 128;

std::int64_t scratch_floats(const Shape& s, std::int64_t key_tile, std::int64_t ld_acc);

// The key tile a forward uses: at most n_kv keys, at least one.
inline std::int64_t clamp_key_tile(const Shape& s, std::int64_t key_tile) {
  return std::max<std::int64_t>(1, std::min(key_tile, s.n_kv));
}

// The most fp32 lanes of any target (AVX-512). Workspace estimates of the Highway rungs round
// rows up to it: exact there, a few floats per row too many on narrower targets.
inline constexpr std::int64_t kMaxLanes = 16;

// Bytes for_each_query_block allocates for a forward on `threads` threads: one scratch each.
double tiled_workspace_bytes(const Shape& s, std::int64_t key_tile, std::int64_t lanes,
                             int threads);
BlockScratch carve_scratch(float* base, const Shape& s, std::int64_t key_tile, std::int64_t ld_acc);

// ---- scalar steps of a block, shared by every target

// Fills w.q_scale, w.position and w.q_t with Q^T of the block (zero past its rows), each row
// times its scale unless the products scale the scores instead (scale_q false: flash-bf16),
// and resets the running statistics. Returns the keys the block visits: the union of its rows'
// ranges, begun at an even key (the bf16 products pair keys), empty when no row sees a key.
KeyRange begin_block(const ForwardArgs& a, const QueryBlock& blk, const BlockScratch& w,
                     bool scale_q = true);

// Whether the tile of keys [key0, key_end) has keys some row of the block cannot see, and then
// sets those scores of S^T ([nk][kQueryBlock]), on either side of each row's range, to -inf.
// Forward and backward share them.
bool tile_needs_mask(const Shape& s, const Mask& mask, const QueryBlock& blk, std::int64_t key0,
                     std::int64_t key_end);
void mask_tile(const Shape& s, const Mask& mask, const QueryBlock& blk, std::int64_t key0,
               std::int64_t nk, float* scores);

// Probes: folds one key tile's sums (w.tile_*) into the running double statistics. The shifted
// sum t' = sum e^{s-m} (s - m) moves to the new max like l does:
// t'_new = alpha (t'_old + (m_old - m_new) l_old); the sums of e^{2(s-m)} and e^{3(s-m)} (for
// sum p^2 and sum p^3 at the end) move by alpha^2 and alpha^3. Rows [0, rows).
void fold_tile_probes(const RowStats& w, std::int64_t rows = kQueryBlock);

// Everything the end of a row needs: its max m, sum l, unnormalised output and probe sums.
struct RowResult {
  float max = 0, sum = 0;
  const float* acc = nullptr;  // d_v floats
  double score_sum = 0, score_sumsq = 0, shifted_t = 0, p2 = 0, p3 = 0;
  std::int64_t nonfinite = 0;  // non-finite visible scores (masked keys not counted)
};

// Writes output row r (acc / l), lse = m + ln l and probes; H = ln l - t'/l, which is
// m + ln l - (sum e^{s-m} s)/l (docs/design.md, "Probes") with m taken out of the sum (no
// cancellation when |m| is large), and max weight = e^{m-m}/l = 1/l. A row that sees no key (l = 0)
// gets 0, -inf and zero probes.
void finish_row(const ForwardArgs& a, std::int64_t r, const RowResult& row);

// finish_row for every row of a block that visited the keys `visited` (masked keys of which
// were set to -inf and counted as non-finite: not the row's), each row's sink (ScoreMod::sinks)
// first joining its sums as one more key without a value: lse = logaddexp(m + ln l, sink).
void finish_block(const ForwardArgs& a, const QueryBlock& blk, KeyRange visited,
                  std::int64_t ld_acc, const BlockScratch& w);

using BlockFn = void (*)(const ForwardArgs&, const QueryBlock&, std::int64_t key_tile,
                         std::int64_t ld_acc, const BlockScratch&);

// Runs fn on every (head, query block) on a.threads OpenMP threads, each with its own scratch.
// key_tile: keys per tile of the block's key loop (n_kv materialises a whole row block of
// scores); ld_acc: d_v rounded up to whole vectors of the caller's target.
void for_each_query_block(const ForwardArgs& a, std::int64_t key_tile, std::int64_t ld_acc,
                          BlockFn fn);

}  // namespace sdpa::detail
