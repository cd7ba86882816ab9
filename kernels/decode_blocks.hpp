// How the fused forward cuts a decode shape: few query rows per K/V head (decode, speculative
// decode, or the query heads of one group sharing a K/V head). Padding such rows to a prefill
// query block (kQueryBlock = 48) multiplies the work by up to 48, and parallelism over query
// blocks leaves threads idle; here
//   - the rows of the query heads that share a K/V head are packed into blocks (they are
//     consecutive rows of Q: heads of one group are adjacent) of at most kDecodeRows rows, so a
//     block reads each K/V row once for all its rows (a group of up to kDecodeRows rows: once);
//   - the keys of a block are cut into splits (flash-decoding): each split yields its rows' max,
//     sum and unnormalised output, and the splits are merged in order. Split boundaries depend
//     on the shape only, never on the thread count, so the result is bit-identical on any.
// Plain C++: what is specific to an instruction set is attention_decode-inl.h. Internal to
// sdpa_kernels.
#pragma once

#include <cstdint>

#include "query_blocks.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa::detail {

// Most rows of a decode block, and the query rows per head up to which a shape takes the decode
// path: scores of up to 16 rows cost what a padded 48-row block costs at a third of the rows.
inline constexpr std::int64_t kDecodeRows = 16;
// Scores a block holds at once: 16 KiB, in L1 while the tile's values pass under them. A tile
// is as many keys as fit (DecodeGeometry::tile): 256 for 16 rows, 1024 for 4. Each tile
// switches the stream from K (scores) to V (P V) and back, so longer tiles switch less, as long
// as the scores stay in L1 (docs/perf-log/2026-11-25-decode-one-thread-profile.md).
inline constexpr std::int64_t kDecodeScores = 4096;
// Most keys of a tile, whatever the rows: much longer tiles of one row measured slower
// (docs/perf-log/2026-11-25-zen5-alignment-kept-inputs-splits.md).
inline constexpr std::int64_t kMaxTile = 1024;
// How far ahead of its loads a pass over K or V that reads memory prefetches (the decode path's
// RowsAhead, the int8 scores' stream in int8_dots_x86.cpp): the hardware's prefetchers alone
// kept too few lines in flight for one core once each key carried several rows' multiply-adds.
// Why 8 KiB: docs/perf-log/2026-11-25-zen5-alignment-kept-inputs-splits.md.
inline constexpr std::int64_t kPrefetchBytes = 8192;
// Keys are split and tiled in whole units of this many (a multiple of every target's lanes).
inline constexpr std::int64_t kDecodeUnit = 256;
// The keys a mask lets the splits skip are skipped in whole multiples of this many, so that every
// tile starts on a whole key block of the int8 layout (kv_int8.hpp's kInt8KeyBlock) and ends on
// one or at the cache's end.
inline constexpr std::int64_t kDecodeKeyAlign = 16;
// Items (blocks x splits) a shape is cut into, as far as kMaxSplits allows: enough for a few
// threads and no more, since a split is walked in tiles of at most its keys and every tile
// switches the stream from K to V and back
// (docs/perf-log/2026-11-25-zen5-alignment-kept-inputs-splits.md).
inline constexpr std::int64_t kSplitItems = 32;
// Most splits per block: enough items for 2-3 threads even with one K/V head, and fewer than the
// units of a long cache, so the merge (a row of d_v per split) stays far below the stream over
// K and V and the partials stay small.
inline constexpr std::int64_t kMaxSplits = 16;
// Most query rows whose scores one pass over a group of keys computes (HwyLanes::kScoreRows +
// kScoreRowsL1).
inline constexpr std::int64_t kMaxScoreRows = 4;
// Rows of a block from which its scores are computed with the queries along the lanes (the
// prefill's Gemm on K and the transposed queries, d_k multiply-adds per key for up to a vector
// of rows) rather than the keys (d_k / L per key and row, plus a transpose-reduce per row).
inline constexpr std::int64_t kQueryLanesRows = 8;
// Whether a block of `rows` rows of plain elements takes that layout: the rule DecodeSplit follows
// and the scratch is carved for (scores_t only where some block may take it).
inline constexpr bool takes_query_lanes(std::int64_t rows) { return rows >= kQueryLanesRows; }
// Partial output rows are padded to this many floats: a multiple of every target's lanes, so
// one layout (and decode_workspace_bytes) serves every target.
inline constexpr std::int64_t kPartialAlign = 16;

bool is_decode_shape(const Shape& s);

struct DecodeBlock {
  std::int64_t index = 0;      // in all blocks
  std::int64_t kv = 0;         // K/V head (index in kv_batch_heads)
  std::int64_t first_row = 0;  // first row of Q and O (index in batch_heads x n_q)
  std::int64_t rows = 0;       // heads x n_q <= kDecodeRows; row i has query position i % n_q
};

struct DecodeGeometry {
  // The splits cover only keys some row sees (the union of the rows' ranges, the same for every
  // block: a block's rows are query positions 0..n_q-1 of its heads), so a window of W keys on a
  // long cache reads W keys. Without a mask, all n_kv.
  DecodeGeometry(const Shape& s, const Mask& mask);
  std::int64_t heads_per_block;  // query heads of one group per block
  std::int64_t blocks_per_kv;    // blocks of one group (the last may have fewer heads)
  std::int64_t blocks;           // all blocks, K/V head-major
  std::int64_t max_rows;         // rows of the largest block
  std::int64_t key_begin;        // the keys some row sees: [key_begin, key_end)
  std::int64_t key_end;
  std::int64_t keys_per_split;  // whole units; split c starts at key_begin + c keys_per_split
  std::int64_t tile;            // keys per tile: whole units, kDecodeScores / max_rows at most
  std::int64_t splits;          // per block; 0 when no row sees a key
  std::int64_t ld_acc;          // floats per partial output row: d_v rounded to kPartialAlign
  DecodeBlock block(std::int64_t index, const Shape& s) const;
  std::int64_t items() const { return blocks * splits; }
};

// What one split of one block leaves for the merge, per row of the block: the online softmax's
// final max and sum, the unnormalised output, and (probes) RowStats' six double sums. Carved
// from memory the caller provides (floats() of it).
class DecodePartials {
 public:
  DecodePartials(const DecodeGeometry& g, bool probes, float* base);
  static std::int64_t floats(const DecodeGeometry& g, bool probes);

  struct Split {
    float* max;  // [max_rows]
    float* sum;
    float* acc;          // [max_rows][ld_acc]
    double* probe_sums;  // [6][max_rows]: score_sum, score_sumsq, shifted_t, nonfinite, p2, p3
  };
  Split split(std::int64_t block, std::int64_t split) const;

 private:
  static std::int64_t split_floats(const DecodeGeometry& g, bool probes);
  std::int64_t rows_, ld_acc_, splits_, stride_;
  bool probes_;
  float* base_;
};

// One thread's scratch for a split: the packed query rows, one tile of scores, a group of keys
// padded to whole vectors, values padded for Gemm (when d_k or d_v needs it), and the merge's
// output row.
struct DecodeScratch : RowStats {
  float* q;         // [kDecodeRows][ld_q]: scale * Q of the block, zero past d_k
  float* scores;    // [max_rows][tile]: S of one key tile, overwritten by P
  float* k_pack;    // [kPartialAlign][ld_q]: a group of keys padded to whole vectors and lanes,
                    // a slice of keys for the query-lanes product, or int8's quantised Q
  float* v_pack;    // [kDepthChunk][ld_acc]: values widened or padded to whole vectors
  float* dots;      // [kMaxScoreRows][kPartialAlign][kPartialAlign]: partial dot products of a
                    // group of keys
  float* q_t;       // [ld_q][kDecodeRows]: scale * Q^T of the block (queries along the lanes)
  float* scores_t;  // [tile][kDecodeRows]: S^T of one key tile, overwritten by P^T (blocks of
                    // kQueryLanesRows rows or more, which leave `scores` unused)
  float* acc_t;     // [ld_acc][kDecodeRows]: O^T of a block that takes P V along the query lanes
                    // (ValuesAlongLanes), across the tiles of a split
  float* merged;    // [ld_acc]: one row's merged output
  std::int64_t ld_q;
  std::int64_t tile;  // DecodeGeometry::tile: keys per tile, and the stride of scores' rows
};
std::int64_t decode_scratch_floats(const Shape& s, const DecodeGeometry& g);
DecodeScratch carve_decode_scratch(float* base, const Shape& s, const DecodeGeometry& g);

// Bytes the decode path holds on `threads` threads: the partials of every split (kept between
// calls of one shape; counted with the probes' sums and every key visible, an upper bound under
// a mask or without probes) and each thread's scratch.
double decode_workspace_bytes(const Shape& s, int threads);

// Where the splits read K and V: a.k and a.v (fp32), the same elements in a 16-bit storage
// format (flash_kv.cpp), laid out as a.k and a.v are, or Int8Rows readers of the int8 format
// (flash_kv_int8.cpp, kv_int8-inl.h).
struct DecodeKv {
  const void* k;
  const void* v;
};

// The fused kernel's work on one split: fills partials.split(block, split).
using DecodeSplitFn = void (*)(const ForwardArgs&, const DecodeKv&, const DecodeGeometry&,
                               const DecodeBlock&, std::int64_t split, const DecodePartials&,
                               const DecodeScratch&);
// Merges a block's splits into its rows of out, lse and probes, in split order.
using DecodeMergeFn = void (*)(const ForwardArgs&, const DecodeGeometry&, const DecodeBlock&,
                               const DecodePartials&, const DecodeScratch&);

// Runs split_fn on every (block, split) on a.threads OpenMP threads, then merge_fn on every
// block. Each partial and each output row has one writer that reads inputs only.
void for_each_decode_split(const ForwardArgs& a, const DecodeKv& kv, DecodeSplitFn split_fn,
                           DecodeMergeFn merge_fn);

}  // namespace sdpa::detail
