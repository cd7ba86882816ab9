// The fused forward's decode path (decode_blocks.hpp cuts the work): a block of at most
// kDecodeRows query rows that share one K/V head, one split of its keys, in tiles of
// DecodeGeometry::tile keys. A decode shape is a stream over K and V, so the loops are arranged to
// read each K and V row once per block, from memory, at the cost of as little arithmetic as lets
// the stream run at memory speed:
//   S = (scale Q) K_tile^T     keys along the vector lanes: for each L keys, every row keeps L
//                              accumulators along d_k, folded by a transpose-reduce into one
//                              vector of L scores, and each load of K serves kScoreRows +
//                              kScoreRowsL1 rows.
//                              d_k / L multiply-adds per score, where the prefill layout
//                              (queries along the lanes) spends d_k per key on broadcasts
//                              whatever the number of rows, so blocks of kQueryLanesRows rows
//                              or more take that layout (ScoreRowsQueryLanes), and keep S^T;
//   online softmax of S        along each row (keys along the lanes again), or down S^T's keys
//                              (query lanes: the prefill's SoftmaxTile, no transpose);
//   O = alpha O + P V_tile     a register tile of O (ValueTile: the prefill's micro-kernel form,
//                              the block's few rows down the tile) over chunks of keys in L1,
//                              broadcasting P from S's layout or S^T's (PLayout); or, for a
//                              query-lanes block of fp32 or 16-bit values, O^T along the query
//                              lanes, broadcasting V (ValueStripOf): one read of V for all rows.
// The passes that read K or V from memory hold each loaded vector in a register for all their
// rows and prefetch ahead into L2 from inside their loops, a few lines per key, not in bursts
// between them: what lets one core stream K and V while it multiplies.
// Each split leaves its rows' max, sum and unnormalised output; the merge folds the splits in
// order. Probes ride along as in the prefill path (RowStats). K and V may be stored as fp32 or
// in 16 bits (E: flash_kv.cpp's formats), widened exactly to fp32 in registers as they are
// loaded (WideLoad), or, where a block's many rows share them, into k_pack or v_pack first, so
// the arithmetic after the widening is the fp32 path's; or as int8 with a
// scale per row (E = kv_int8-inl.h's Int8Rows, through KvRows), whose overloads of ScoreRows,
// TileValues and WidenRows do the score and widen steps.
//
// Per-target include guard (Highway's pattern): this file is compiled once per ISA target.
#if defined(SDPA_KERNELS_ATTENTION_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SDPA_KERNELS_ATTENTION_DECODE_INL_H_
#undef SDPA_KERNELS_ATTENTION_DECODE_INL_H_
#else
#define SDPA_KERNELS_ATTENTION_DECODE_INL_H_
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "attention_tiles-inl.h"
#include "decode_blocks.hpp"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kv_formats.hpp"

HWY_BEFORE_NAMESPACE();
namespace sdpa::detail::HWY_NAMESPACE {

// ---- K and V elements as fp32: E is float, hwy::float16_t or hwy::bfloat16_t (flash_kv.cpp's
// storage formats). Every widening is exact, so all targets see the same fp32 values.

inline float WideScalar(float x) { return x; }
inline float WideScalar(hwy::float16_t x) { return f16_to_f32(std::bit_cast<std::uint16_t>(x)); }
inline float WideScalar(hwy::bfloat16_t x) { return bf16_to_f32(std::bit_cast<std::uint16_t>(x)); }

// One vector of fp32 lanes from L stored elements.
HWY_INLINE HwyLanes::V WideLoad(const float* p) { return HwyLanes::Load(p); }
HWY_INLINE HwyLanes::V WideLoad(const hwy::bfloat16_t* p) {
  const hn::Rebind<std::uint16_t, HwyLanes::D> d16;
  const hn::RebindToUnsigned<HwyLanes::D> d32;
  const auto bits = hn::LoadU(d16, reinterpret_cast<const std::uint16_t*>(p));
  return hn::BitCast(HwyLanes::D(), hn::ShiftLeft<16>(hn::PromoteTo(d32, bits)));
}
HWY_INLINE HwyLanes::V WideLoad(const hwy::float16_t* p) {
#if HWY_TARGET <= HWY_AVX2 || \
    (HWY_ARCH_ARM_A64 && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR)
  // F16C's vcvtph2ps (Highway's AVX2 and AVX-512 targets require it) and aarch64's fcvtl:
  // exact, infinities and NaN included.
  return hn::PromoteTo(HwyLanes::D(), hn::LoadU(hn::Rebind<hwy::float16_t, HwyLanes::D>(), p));
#else
  // No conversion instruction (SSE4, the emulated targets): the magnitude's bits moved to fp32's
  // places and multiplied by 2^112, which rebiases the exponent exactly and makes a subnormal
  // normal (no flush to zero is ever set); exponent 31 (inf, NaN) then sets all of fp32's. As in
  // f16_to_f32, bit for bit. Highway 1.0.3's emulated PromoteTo maps exponent 31 to finite
  // values, so it is not used.
  using D = HwyLanes::D;
  const hn::Rebind<std::uint16_t, D> d16;
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto h = hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const std::uint16_t*>(p)));
  const auto magnitude = hn::And(h, hn::Set(du, 0x7fffu));
  const auto scaled =
      hn::Mul(hn::BitCast(D(), hn::ShiftLeft<13>(magnitude)), hn::Set(D(), 0x1p112f));
  // magnitude < 2^15: a signed comparison (one instruction on SSE4) is an unsigned one.
  const auto special = hn::And(
      hn::BitCast(du, hn::VecFromMask(di, hn::Gt(hn::BitCast(di, magnitude), hn::Set(di, 0x7bff)))),
      hn::Set(du, 0x7f800000u));
  const auto sign = hn::ShiftLeft<16>(hn::Xor(h, magnitude));
  return hn::BitCast(D(), hn::Or(hn::Or(hn::BitCast(du, scaled), special), sign));
#endif
}

// dst[r][c] = src[r][c] widened to fp32 for c < cols, 0 for cols <= c < ld_dst, r < rows.
template <class E>
void WidenRows(const E* src, std::int64_t rows, std::int64_t cols, std::int64_t ld_src, float* dst,
               std::int64_t ld_dst) {
  constexpr std::int64_t L = HwyLanes::kLanes;
  for (std::int64_t r = 0; r < rows; ++r, src += ld_src, dst += ld_dst) {
    std::int64_t c = 0;
    for (; c + L <= cols; c += L) HwyLanes::Store(WideLoad(src + c), dst + c);
    for (; c < cols; ++c) dst[c] = WideScalar(src[c]);
    std::fill(dst + cols, dst + ld_dst, 0.0f);
  }
}

#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SDPA_CLANG_ASAN 1
#endif
#endif
#ifndef SDPA_CLANG_ASAN
#define SDPA_CLANG_ASAN 0
#endif

// The vector x, held in a register: on x86, GCC otherwise folds a load used by several
// multiply-adds into each of them as a memory operand (one load per use rather than one).
// Clang with ASan (the fuzz build) cannot compile the constraint; that build times nothing.
template <class V>
HWY_INLINE V InRegister(V x) {
#if HWY_ARCH_X86 && !SDPA_CLANG_ASAN
  asm("" : "+v"(x.raw));
#endif
  return x;
}

// x held in a register where several multiply-adds use it (kHold); a single use keeps its
// memory operand, one load either way and one instruction fewer.
template <bool kHold, class V>
HWY_INLINE V HoldIf(V x) {
  if constexpr (kHold) return InRegister(x);
  return x;
}

// Rows of row_bytes each that kPrefetchBytes covers: how far ahead of its loads a pass over K or
// V that reads memory prefetches.
inline std::int64_t RowsAhead(std::int64_t row_bytes) {
  return std::max<std::int64_t>(1, kPrefetchBytes / row_bytes);
}

// How far ahead the pass from the block's row first_row over a group of keys or a chunk of values
// prefetches, when the rows take several passes: the first, which reads it from memory, `ahead`
// rows on; the later ones, which read it from L1 and would otherwise request nothing while they
// multiply, twice as far, so the stream keeps going through them (what the first pass then
// requests is mostly on its way already). Why twice: docs/perf-log/2026-11-26-decode-prefetch.md.
inline std::int64_t PassAhead(std::int64_t first_row, std::int64_t ahead) {
  return first_row == 0 ? ahead : 2 * ahead;
}

// Whether vector `vec` of a row of elements of element_bytes each starts a cache line: the
// vectors at which the row passes (ScoreChunkOf, ValueTileOf) prefetch, one line each.
template <class P>
constexpr bool StartsLine(std::int64_t vec, std::int64_t element_bytes) {
  return vec * P::kLanes * element_bytes % std::int64_t(kCacheLine) == 0;
}

// The I-th vector of a pack: packs stand in for arrays of vectors, which SVE's sizeless vector
// types cannot form. Inlined, so it costs nothing.
template <std::size_t I, class V, class... Vs>
HWY_INLINE V Pick(V v, Vs... vs) {
  if constexpr (I == 0) {
    return v;
  } else {
    return Pick<I - 1>(vs...);
  }
}

// The I-th pair sum of a level of a transpose-reduce: vectors 2I and 2I + 1 of v folded.
template <class P, std::size_t I, class... Vs>
HWY_INLINE typename P::V PairAt(Vs... v) {
  return P::PairSums(Pick<2 * I + 1>(v...), Pick<2 * I>(v...));
}

// The levels of a transpose-reduce: the vectors v folded pairwise until one is left.
template <class P, std::size_t... I, class... Vs>
HWY_INLINE typename P::V FoldPairs(std::index_sequence<I...>, Vs... v) {
  if constexpr (sizeof...(Vs) == 1) {
    return Pick<0>(v...);
  } else {
    return FoldPairs<P>(std::make_index_sequence<sizeof...(I) / 2>(), PairAt<P, I>(v...)...);
  }
}

// The L vectors of dots (L floats each) folded pairwise into one whose lane t holds the sum of
// the lanes of vector t: L - 1 pair sums, in registers (a pack of vectors, as SVE needs) rather
// than stored and reloaded level by level, which measured slower
// (docs/perf-log/2026-11-26-decode-streams-on-one-core.md).
template <class P, std::size_t... T>
HWY_INLINE typename P::V TransposeSumOf(const float* dots, std::index_sequence<T...>) {
  return FoldPairs<P>(std::make_index_sequence<sizeof...(T) / 2>(),
                      P::Load(dots + std::int64_t(T) * P::kLanes)...);
}
template <class P>
HWY_INLINE typename P::V TransposeSum(const float* dots) {
  return TransposeSumOf<P>(dots, std::make_index_sequence<P::kLanes>());
}

// Vector U of query row R: from the pack qv (C vectors of each of its rows) for the rows it holds
// (in registers), from L1 for the rows after them (a multiply-add's memory operand).
template <class P, std::size_t R, std::size_t C, std::size_t U, class... Q>
HWY_INLINE typename P::V QueryVector(const float* q, std::int64_t ld_q, Q... qv) {
  if constexpr (R < sizeof...(Q) / C)
    return Pick<R * C + U>(qv...);
  else
    return P::Load(q + std::int64_t(R) * ld_q + std::int64_t(U) * P::kLanes);
}

// dots_r[t] (+)= q_r . k_t for the R rows r of q (ld_q apart) and the L keys k_t = k + t ld_k,
// over C vectors of d: one vector of partial sums per row and key (dots_r = dots + r L^2),
// reduced later. Each vector of a key is loaded once, into a register (InRegister), for all R
// rows. Left to itself GCC folds the load into every row's multiply-add, so each vector of K
// read from memory was R loads waiting on one missing line, which bounded how many lines one
// core had in flight (docs/perf-log/2026-11-26-decode-streams-on-one-core.md). Each key row is
// read front to back by a plain loop over keys; unrolling over keys instead, to keep all L sums
// in registers, made GCC hoist the L x C key addresses into stack slots and reload one per
// multiply-add (two keys a step do not: ScoreChunkPairsOf). `ahead` > 0: each vector that starts a
// cache line prefetches the same line of the key `ahead` rows on, so the prefetches are spread
// among the multiply-adds rather than issued together before each key
// (docs/perf-log/2026-11-26-row-pass-prefetch.md); into L2, so they hold none of the L1 miss
// buffers the loads need (docs/perf-log/2026-11-30-decode-prefetch-l2.md).
template <class P, std::size_t C, class E, std::size_t... R, std::size_t... U, std::size_t... I>
HWY_INLINE void ScoreChunkOf(const float* q, std::int64_t ld_q, const E* k, std::int64_t ld_k,
                             bool first, std::int64_t ahead, float* dots, std::index_sequence<R...>,
                             std::index_sequence<U...>, std::index_sequence<I...>) {
  constexpr std::int64_t L = P::kLanes;
  // Inlined, or the pack would be passed on the stack.
  [&](auto... qv) HWY_ATTR __attribute__((always_inline)) {
    for (std::int64_t t = 0; t < L; ++t, k += ld_k) {
      [&](auto... acc) HWY_ATTR __attribute__((always_inline)) {
        const auto column = [&](auto u) HWY_ATTR __attribute__((always_inline)) {
          constexpr std::size_t kU = decltype(u)::value;
          if constexpr (StartsLine<P>(kU, sizeof(E)))
            if (ahead > 0) prefetch_to_l2(k + ahead * ld_k + std::int64_t(kU) * L);
          const auto x = HoldIf<(sizeof...(R) > 1)>(WideLoad(k + std::int64_t(kU) * L));
          ((acc = P::MulAdd(QueryVector<P, R, C, kU>(q, ld_q, qv...), x, acc)), ...);
        };
        (column(std::integral_constant<std::size_t, U>()), ...);
        (P::Store(acc, dots + std::int64_t(R) * L * L + t * L), ...);
      }
      ((first ? P::Zero() : P::Load(dots + std::int64_t(R) * L * L + t * L))...);
    }
  }
  (P::Load(q + std::int64_t(I / C) * ld_q + std::int64_t(I % C) * L)...);
}

// ScoreChunkOf for rows all read from L1, two keys a step (P::kScorePairs): each query vector
// serves keys t and t + 1, so 2 R sums run at once. Each key's sums in their order: the same bits.
template <class P, std::size_t C, class E, std::size_t... R, std::size_t... U>
HWY_INLINE void ScoreChunkPairsOf(const float* q, std::int64_t ld_q, const E* k, std::int64_t ld_k,
                                  bool first, std::int64_t ahead, float* dots,
                                  std::index_sequence<R...>, std::index_sequence<U...>) {
  constexpr std::int64_t L = P::kLanes;
  static_assert(L % 2 == 0 && 2 * sizeof...(R) + 3 <= 16);  // sums, two keys, a query vector
  for (std::int64_t t = 0; t < L; t += 2, k += 2 * ld_k) {
    [&](auto... acc) HWY_ATTR __attribute__((always_inline)) {
      [&](auto... acc2) HWY_ATTR __attribute__((always_inline)) {
        const auto column = [&](auto u) HWY_ATTR __attribute__((always_inline)) {
          constexpr std::int64_t kU = decltype(u)::value;
          if constexpr (StartsLine<P>(kU, sizeof(E)))
            if (ahead > 0) {
              prefetch_to_l2(k + ahead * ld_k + kU * L);
              prefetch_to_l2(k + (ahead + 1) * ld_k + kU * L);
            }
          const auto x = InRegister(WideLoad(k + kU * L));
          const auto x2 = InRegister(WideLoad(k + ld_k + kU * L));
          const auto both = [&](auto qr, auto& a, auto& a2) HWY_ATTR
              __attribute__((always_inline)) {
            a = P::MulAdd(qr, x, a);
            a2 = P::MulAdd(qr, x2, a2);
          };
          (both(InRegister(P::Load(q + std::int64_t(R) * ld_q + kU * L)), acc, acc2), ...);
        };
        (column(std::integral_constant<std::int64_t, std::int64_t(U)>()), ...);
        (P::Store(acc, dots + std::int64_t(R) * L * L + t * L), ...);
        (P::Store(acc2, dots + std::int64_t(R) * L * L + (t + 1) * L), ...);
      }
      ((first ? P::Zero() : P::Load(dots + std::int64_t(R) * L * L + (t + 1) * L))...);
    }
    ((first ? P::Zero() : P::Load(dots + std::int64_t(R) * L * L + t * L))...);
  }
}

// ScoreChunkOf with the first InRegisters of the R rows held in registers (P::kScoreRows); with
// none and several rows, ScoreChunkPairsOf where P::kScorePairs (one row keeps one key a step).
template <class P, std::int64_t R, std::int64_t C,
          std::int64_t InRegisters = std::min<std::int64_t>(R, P::kScoreRows), class E>
HWY_INLINE void ScoreChunk(const float* q, std::int64_t ld_q, const E* k, std::int64_t ld_k,
                           bool first, std::int64_t ahead, float* dots) {
  if constexpr (InRegisters == 0 && R > 1 && P::kScorePairs)
    ScoreChunkPairsOf<P, C>(q, ld_q, k, ld_k, first, ahead, dots, std::make_index_sequence<R>(),
                            std::make_index_sequence<C>());
  else
    ScoreChunkOf<P, C>(q, ld_q, k, ld_k, first, ahead, dots, std::make_index_sequence<R>(),
                       std::make_index_sequence<C>(), std::make_index_sequence<InRegisters * C>());
}

// The last d_vecs % kScoreChunk vectors of d: one instantiation per count.
template <class P, std::int64_t R, std::int64_t C = P::kScoreChunk - 1, class E>
HWY_INLINE void ScoreRemainder(std::int64_t n, const float* q, std::int64_t ld_q, const E* k,
                               std::int64_t ld_k, bool first, std::int64_t ahead, float* dots) {
  if constexpr (C > 0) {
    if (n == C) return ScoreChunk<P, R, C>(q, ld_q, k, ld_k, first, ahead, dots);
    ScoreRemainder<P, R, C - 1>(n, q, ld_q, k, ld_k, first, ahead, dots);
  }
}

// Scores of R query rows (ld_q apart) against L keys (rows of k, ld_k apart), d_vecs whole
// vectors deep: kScoreChunk vectors of each row at a time in registers, a vector of partial
// sums per row and key in `dots` (R x L x L floats, in L1), then per row a transpose-reduce
// folds its L vectors into one vector of L scores, stored at scores + r ld_s. Keys exactly two
// chunks deep (d = 256 on AVX-512, 64 on AVX2) are read whole in one chunk instead, front to back,
// with one query row in registers and the others from L1, rather than in two halves, a pass over
// the group's keys each (docs/perf-log/2026-11-26-decode-prefetch.md); so are keys
// P::kScoreWholeVecs deep (d = 128 on AVX2), every query row from L1. The same products in the
// same order.
template <class P, std::int64_t R, class E>
HWY_INLINE void GroupScores(const float* q, std::int64_t ld_q, const E* k, std::int64_t ld_k,
                            std::int64_t d_vecs, std::int64_t ahead, float* dots, float* scores,
                            std::int64_t ld_s) {
  constexpr std::int64_t L = P::kLanes, C = P::kScoreChunk;
  std::int64_t c = 0;
  if (d_vecs == 2 * C) {
    ScoreChunk<P, R, 2 * C, 1>(q, ld_q, k, ld_k, true, ahead, dots);
    c = d_vecs;
  } else if constexpr (P::kScoreWholeVecs > 0) {
    if (d_vecs == P::kScoreWholeVecs) {
      ScoreChunk<P, R, P::kScoreWholeVecs, 0>(q, ld_q, k, ld_k, true, ahead, dots);
      c = d_vecs;
    }
  }
  for (; c + C <= d_vecs; c += C)
    ScoreChunk<P, R, C>(q + c * L, ld_q, k + c * L, ld_k, c == 0, ahead, dots);
  ScoreRemainder<P, R>(d_vecs - c, q + c * L, ld_q, k + c * L, ld_k, c == 0, ahead, dots);
  for (std::int64_t r = 0; r < R; ++r)
    P::Store(TransposeSum<P>(dots + r * L * L), scores + r * ld_s);
}

// Query rows one pass over a group of keys serves: those in registers and those read from L1.
template <class P>
inline constexpr std::int64_t kPassRows = P::kScoreRows + P::kScoreRowsL1;

// The last rows % kPassRows rows of the block: one instantiation per count.
template <class P, std::int64_t R = kPassRows<P> - 1, class E>
HWY_INLINE void GroupScoresRemainder(std::int64_t n, const float* q, std::int64_t ld_q, const E* k,
                                     std::int64_t ld_k, std::int64_t d_vecs, std::int64_t ahead,
                                     float* dots, float* scores, std::int64_t ld_s) {
  if constexpr (R > 0) {
    if (n == R) return GroupScores<P, R>(q, ld_q, k, ld_k, d_vecs, ahead, dots, scores, ld_s);
    GroupScoresRemainder<P, R - 1>(n, q, ld_q, k, ld_k, d_vecs, ahead, dots, scores, ld_s);
  }
}

// Scores of the block's rows against the L keys of `group` (rows ld_k apart, whole vectors
// deep), at scores + j0: kPassRows rows per pass over the keys, the first pass reading the keys
// from memory, the later ones from L1, each prefetching PassAhead rows on.
template <class P, class E>
HWY_INLINE void ScoreGroup(const DecodeScratch& w, std::int64_t rows, const E* group,
                           std::int64_t ld_k, std::int64_t d_vecs, std::int64_t ahead,
                           std::int64_t j0) {
  constexpr std::int64_t R = kPassRows<P>;
  static_assert(R <= kMaxScoreRows);
  std::int64_t i = 0;
  for (; i + R <= rows; i += R)
    GroupScores<P, R>(w.q + i * w.ld_q, w.ld_q, group, ld_k, d_vecs, PassAhead(i, ahead), w.dots,
                      w.scores + i * w.tile + j0, w.tile);
  GroupScoresRemainder<P>(rows - i, w.q + i * w.ld_q, w.ld_q, group, ld_k, d_vecs,
                          PassAhead(i, ahead), w.dots, w.scores + i * w.tile + j0, w.tile);
}

// S [rows][w.tile] = q [rows][w.ld_q] K^T for keys [0, nk) of k, in whole vectors of keys:
// lanes past nk hold scores of a repeated key (MaskRows sets them to -inf). K is read in place,
// L keys at a time, each key once for kScoreRows query rows (GroupScores), keys stored in 16 bits
// widened as they are loaded (vcvtph2ps from memory with F16C: no widened copy to store and
// reload); a group that is short of L keys or of whole vectors of d_k is first widened and
// zero-padded into k_pack so that no load runs past K.
template <class P, class E>
void ScoreRows(const DecodeScratch& w, std::int64_t rows, const E* k, std::int64_t d_k,
               std::int64_t nk) {
  constexpr std::int64_t L = P::kLanes;
  const std::int64_t d_vecs = (d_k + L - 1) / L;
  const std::int64_t ahead = RowsAhead(d_k * std::int64_t(sizeof(E)));
  for (std::int64_t j0 = 0; j0 < nk; j0 += L) {
    if (j0 + L <= nk && d_k % L == 0) {
      ScoreGroup<P>(w, rows, k + j0 * d_k, d_k, d_vecs, ahead, j0);
      continue;
    }
    for (std::int64_t t = 0; t < L; ++t)
      WidenRows(k + std::min(j0 + t, nk - 1) * d_k, 1, d_k, d_k, w.k_pack + t * w.ld_q, d_vecs * L);
    ScoreGroup<P>(w, rows, static_cast<const float*>(w.k_pack), w.ld_q, d_vecs, 0, j0);
  }
}

// The same S for a block of at least kQueryLanesRows rows, queries along the lanes: S^T = K q_t
// by the prefill's Gemm (w.q_t holds the block's queries transposed), left in w.scores_t for
// the softmax and P V to read in place. d_k multiply-adds per key for up to L rows, with no
// transpose-reduce: at 16 rows and d = 128 the keys-along-lanes loop spends as many multiply-adds
// and a reduction per row and L keys on top (docs/perf-log/2026-11-26-query-lanes-keep-st.md).
// The micro-kernel walks MR key rows an element at a time, and each of its steps prefetches the
// next MR elements of the keys kPrefetchBytes on (Gemm::prefetch), so the stream's lines are
// requested a few steps apart while it multiplies.
// fp32 keys are multiplied in place; 16-bit ones are first widened kPartialAlign at a time into
// k_pack. Requesting a slice's keys in one burst before its product instead left the reads of K
// and the multiply-adds one after the other (docs/perf-log/2026-11-26-query-lanes-prefetch.md).
// The same products, summed in the same order.
template <class P, class E>
void ScoreRowsQueryLanes(const DecodeScratch& w, std::int64_t rows, const E* k, std::int64_t d_k,
                         std::int64_t nk) {
  const std::int64_t ahead = RowsAhead(d_k * std::int64_t(sizeof(E)));
  Gemm g{.n_vec = (rows + P::kLanes - 1) / P::kLanes,
         .k = d_k,
         .a_col = 1,
         .b = w.q_t,
         .ldb = kDecodeRows,
         .b_cols = kDecodeRows,
         .ldc = kDecodeRows,
         .prefetch_element_bytes = sizeof(E)};
  if constexpr (std::is_same_v<E, float>) {
    g.m = nk;
    g.a = k;
    g.a_row = d_k;
    g.c = w.scores_t;
    g.prefetch = reinterpret_cast<const char*>(k + ahead * d_k);
    RunGemm<P, P::kMrS, P::kNvS, true>(g);
    return;
  }
  g.a = w.k_pack;
  g.a_row = w.ld_q;
  for (std::int64_t j0 = 0; j0 < nk; j0 += kPartialAlign) {
    g.m = std::min(kPartialAlign, nk - j0);
    g.c = w.scores_t + j0 * kDecodeRows;
    g.prefetch = reinterpret_cast<const char*>(k + (j0 + ahead) * d_k);
    WidenRows(k + j0 * d_k, g.m, d_k, d_k, w.k_pack, w.ld_q);
    RunGemm<P, P::kMrS, P::kNvS, true>(g);
  }
}

// Keys [key0, key0 + nk) that row i of the block (query position i % n_q) sees, as offsets
// [begin, end) from key0 (empty: begin = end).
inline KeyRange VisibleInTile(const ForwardArgs& a, std::int64_t i, std::int64_t key0,
                              std::int64_t nk) {
  const KeyRange r = a.mask.visible(a.shape, i % a.shape.n_q);
  const std::int64_t end = std::clamp<std::int64_t>(r.end - key0, 0, nk);
  return {std::clamp<std::int64_t>(r.begin - key0, 0, end), end};
}

// The score modifiers of sdpa/mask.hpp on a tile of scaled scores, before the mask: the soft-cap
// c tanh(s / c) (Highway's vector tanh) and ALiBi's bias -slope |p - j| (row i at key position
// p, key j = key0 + its lane). The temperature is in the rows' scale (DecodeSplit packs the
// queries with it); the sink joins at the merge. Off the hot path: called only with a modifier.
template <class P>
HWY_INLINE typename P::V ModifiedScores(typename P::V x, float softcap, bool alibi,
                                        typename P::V neg_slope, typename P::V distance) {
  const typename P::D d;
  if (softcap > 0) {
    const auto c = hn::Set(d, softcap);
    x = hn::Mul(c, hn::Tanh(d, hn::Div(x, c)));
  }
  return alibi ? P::MulAdd(neg_slope, hn::Abs(distance), x) : x;
}

// The block's rows in S's layout (keys along the lanes), n_lanes lanes each.
template <class P>
void ModifyRows(const ForwardArgs& a, const DecodeBlock& blk, std::int64_t key0,
                std::int64_t n_lanes, const DecodeScratch& w) {
  for (std::int64_t i = 0; i < blk.rows; ++i) {
    const std::int64_t r = blk.first_row + i;
    const RowLogits row = row_logits(a.shape, a.score_mod, 1.0f, r / a.shape.n_q, r % a.shape.n_q);
    float* x = w.scores + i * w.tile;
    for (std::int64_t j = 0; j < n_lanes; j += P::kLanes)
      P::Store(ModifiedScores<P>(P::Load(x + j), row.softcap, row.slope != 0, P::Set(-row.slope),
                                 hn::Iota(typename P::D(), float(key0 + j - row.position))),
               x + j);
  }
}

// The same on S^T (queries along the lanes): per key, whole vectors of the block's rows, each
// lane with its row's slope and key position.
template <class P>
void ModifyRowsQueryLanes(const ForwardArgs& a, const DecodeBlock& blk, std::int64_t key0,
                          std::int64_t nk, const DecodeScratch& w) {
  float neg_slopes[kDecodeRows] = {}, positions[kDecodeRows] = {};
  for (std::int64_t i = 0; i < blk.rows; ++i) {
    const std::int64_t r = blk.first_row + i;
    const RowLogits row = row_logits(a.shape, a.score_mod, 1.0f, r / a.shape.n_q, r % a.shape.n_q);
    neg_slopes[i] = -row.slope;
    positions[i] = float(row.position - key0);
  }
  const bool alibi = !a.score_mod.alibi_slopes.empty();
  for (std::int64_t j = 0; j < nk; ++j)
    for (std::int64_t g = 0; g < round_up(blk.rows, P::kLanes); g += P::kLanes) {
      float* x = w.scores_t + j * kDecodeRows + g;
      P::Store(ModifiedScores<P>(P::Load(x), a.score_mod.softcap, alibi, P::Load(neg_slopes + g),
                                 P::Sub(P::Set(float(j)), P::Load(positions + g))),
               x);
    }
}

// The online softmax of each row of S, in place (scores become p = e^{s - m_new}), masked keys
// and the lanes past the tile set to -inf first; m, l and alpha of w are updated per row. With
// kProbe the same pass sums the finite scores, their squares, p (s - m_new), p^2, p^3 and the
// non-finite visible scores (the masked lanes are counted and then taken off).
template <class P, bool kProbe>
void SoftmaxRows(const ForwardArgs& a, std::int64_t rows, std::int64_t key0, std::int64_t nk,
                 const DecodeScratch& w) {
  using V = typename P::V;
  constexpr std::int64_t L = P::kLanes;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::int64_t n_lanes = round_up(nk, L);
  for (std::int64_t i = 0; i < rows; ++i) {
    float* s = w.scores + i * w.tile;
    const KeyRange seen = VisibleInTile(a, i, key0, nk);
    std::fill(s, s + seen.begin, kNegInf);
    std::fill(s + seen.end, s + n_lanes, kNegInf);
    V m0 = P::Set(kNegInf), m1 = m0;  // two chains hide the latency of Max
    std::int64_t j = 0;
    for (; j + 2 * L <= n_lanes; j += 2 * L) {
      m0 = P::Max(m0, P::Load(s + j));
      m1 = P::Max(m1, P::Load(s + j + L));
    }
    if (j < n_lanes) m0 = P::Max(m0, P::Load(s + j));
    const float m_old = w.max[i];
    const float m_new = std::max(m_old, P::ReduceMax(P::Max(m0, m1)));
    const float shift = std::isfinite(m_new) ? m_new : 0.0f;  // nothing visible yet: p = 0
    const V vshift = P::Set(shift);
    V l = P::Zero(), s1 = P::Zero(), s2 = P::Zero(), t = P::Zero(), bad = P::Zero();
    V p2 = P::Zero(), p3 = P::Zero();
    for (j = 0; j < n_lanes; j += L) {
      const V x = P::Load(s + j);
      const V p = P::Exp(P::Sub(x, vshift));
      P::Store(p, s + j);
      l = P::Add(l, p);
      if constexpr (kProbe) AddProbeSums<P>(x, p, vshift, s1, s2, t, bad, p2, p3);
    }
    const float alpha = std::exp(m_old - shift);
    if constexpr (kProbe) {
      w.prev_max[i] = m_old;
      w.prev_sum[i] = w.sum[i];
      w.tile_s[i] = P::ReduceSum(s1);
      w.tile_s2[i] = P::ReduceSum(s2);
      w.tile_t[i] = P::ReduceSum(t);
      w.tile_nonfinite[i] = P::ReduceSum(bad) - float(n_lanes - seen.size());
      w.tile_p2[i] = P::ReduceSum(p2);
      w.tile_p3[i] = P::ReduceSum(p3);
    }
    w.sum[i] = w.sum[i] * alpha + P::ReduceSum(l);
    w.max[i] = m_new;
    w.rescale[i] = alpha;
  }
}

// The online softmax of a query-lanes block, on S^T in place (SoftmaxTile, the prefill's: rows
// along the lanes, so max and sum run down the keys, with no reduction across lanes and no
// transpose into S; the scalar transpose it replaces was about a tenth of the step at 16 rows
// per K/V head): keys a row does not see are set to -inf first, and taken off its non-finite
// count after. Lanes past the block's rows hold scores of zero queries, never read.
template <class P, bool kProbe>
void SoftmaxQueryLanes(const ForwardArgs& a, std::int64_t rows, std::int64_t key0, std::int64_t nk,
                       const DecodeScratch& w) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < rows; ++i) {
    const KeyRange seen = VisibleInTile(a, i, key0, nk);
    for (std::int64_t j = 0; j < seen.begin; ++j) w.scores_t[j * kDecodeRows + i] = kNegInf;
    for (std::int64_t j = seen.end; j < nk; ++j) w.scores_t[j * kDecodeRows + i] = kNegInf;
  }
  SoftmaxTile<P, kProbe, kDecodeRows>(nk, w.scores_t, round_up(rows, P::kLanes), w);
  if constexpr (kProbe)
    for (std::int64_t i = 0; i < rows; ++i)
      w.tile_nonfinite[i] -= float(nk - VisibleInTile(a, i, key0, nk).size());
}

// Whether E is a format of plain elements (fp32, 16 bits) rather than of rows that carry a scale
// (E::kScaledRows: kv_int8-inl.h's Int8Rows).
template <class E>
inline constexpr bool kElementRows = !requires {
  E::kScaledRows;
};

// O = alpha O + P V over the tile's nk keys. Rows of V that are whole vectors (d_v a multiple
// of L) go through ValueTile: a tile of MR rows x NV vectors of O in registers, and per key the
// NV vectors of V loaded, widened as they are loaded (vcvtph2ps from memory for fp16; int8 x
// scale for Int8Rows), once for the MR rows (fp32 values of the row group that reads them from
// memory are left to GCC, which loads them per row: see kHold). This replaces widening kWidenKeys
// value rows into v_pack and multiplying from there (a store and a reload per vector of V, which
// made the widening most of the int8 decode) by nothing
// (docs/perf-log/2026-11-24-decode-widen-in-registers.md). Otherwise (d_v not a multiple of L),
// the prefill's Gemm on rows widened and padded into v_pack. Either way every element of O is
// alpha O + sum_j p_j v_j by multiply-adds in key order, so the two give the same bits.
inline constexpr std::int64_t kWidenKeys = 32;
static_assert(kWidenKeys <= kDepthChunk && kDecodeUnit % kWidenKeys == 0);

// One vector of fp32 values: vector c of value row j, widened exactly.
template <class P, class E>
HWY_INLINE typename P::V ValueVector(const E* v, std::int64_t ld_v, std::int64_t j,
                                     std::int64_t c) {
  return WideLoad(v + j * ld_v + c * P::kLanes);
}

// The values ValueTile reads for a tile of nk keys: elements as stored (here), or for the int8
// format, the rows without their scales, each row's scale multiplied into its column of P
// (kv_int8-inl.h's overload).
template <class P, class E>
HWY_INLINE const E* TileValues(const E* v, std::int64_t, std::int64_t, const DecodeScratch&) {
  return v;
}

// Bytes of one stored element, and a prefetch of elements [c0, c0 + n) of value row j (the int8
// format's overloads are in kv_int8-inl.h).
template <class E>
constexpr std::int64_t ValueBytes(const E*) {
  return sizeof(E);
}
template <class E>
HWY_INLINE void PrefetchValues(const E* v, std::int64_t ld_v, std::int64_t j, std::int64_t c0,
                               std::int64_t n) {
  PrefetchAhead(v + j * ld_v + c0, n);
}

// Where P's element (row i, key j) is: p[i row + j key]. S's layout (w.scores: key 1, row
// w.tile), or S^T's (a query-lanes block's w.scores_t: row 1, key kDecodeRows).
struct PLayout {
  std::int64_t row, key;
};

// Rows [i0, i0 + MR) x vectors [c0, c0 + NV) of O += P V over keys [j0, j0 + nk), P laid out
// as lp says (element I of the tile is row I / NV, vector I % NV, as in the prefill's MicroTileOf;
// a parameter pack, not an array, as SVE needs). init as Gemm's: O starts from zero, from alpha O
// (alpha[row]), or as it is (a later chunk of keys). Per key, each vector of V is loaded (and
// widened) once, into a register, for the MR rows' multiply-adds. Left to itself GCC loads fp32
// values once per row, as memory operands of the multiply-adds: MR loads per vector, which
// bound the row groups that read V from L1 and multiplied the loads waiting on each missing line
// in the group that reads V from memory (docs/perf-log/2026-11-26-decode-streams-on-one-core.md).
// `ahead` > 0 (that group): each vector that starts a cache line prefetches the same line of the
// value row `ahead` keys on into L2 (spread among the multiply-adds, as in ScoreChunkOf).
template <class P, int MR, int NV, class Rows, std::size_t... I, std::size_t... C>
HWY_INLINE void ValueTileOf(const float* p, PLayout lp, Rows v, std::int64_t ld_v, std::int64_t c0,
                            std::int64_t j0, std::int64_t nk, std::int64_t ahead, float* o,
                            std::int64_t ld_o, Gemm::Init init, const float* alpha,
                            std::index_sequence<I...>, std::index_sequence<C...>) {
  constexpr std::int64_t L = P::kLanes;
  constexpr std::int64_t kRow[] = {std::int64_t(I / NV)...}, kVec[] = {std::int64_t(I % NV)...};
  [&](auto... acc) HWY_ATTR __attribute__((always_inline)) {
    if (init != Gemm::Init::kZero)
      ((acc = P::Mul(P::Set(init == Gemm::Init::kLoadScaled ? alpha[kRow[I]] : 1.0f),
                     P::Load(o + kRow[I] * ld_o + kVec[I] * L))),
       ...);
    for (std::int64_t j = j0; j < j0 + nk; ++j) {
      const auto column = [&](auto c) HWY_ATTR __attribute__((always_inline)) {
        if constexpr (StartsLine<P>(c(), ValueBytes(Rows{})))
          if (ahead > 0) PrefetchValues(v, ld_v, j + ahead, (c0 + c()) * L, 1);
        const auto x = HoldIf<(MR > 1)>(ValueVector<P>(v, ld_v, j, c0 + c()));
        ((kVec[I] == c() ? void(acc = P::MulAdd(P::Set(p[kRow[I] * lp.row + j * lp.key]), x, acc))
                         : void()),
         ...);
      };
      (column(std::integral_constant<std::int64_t, std::int64_t(C)>()), ...);
    }
    (P::Store(acc, o + kRow[I] * ld_o + kVec[I] * L), ...);
  }
  (((void)I, P::Zero())...);
}

template <class P, int MR, int NV, class Rows>
void ValueTile(const float* p, PLayout lp, Rows v, std::int64_t ld_v, std::int64_t c0,
               std::int64_t j0, std::int64_t nk, std::int64_t ahead, float* o, std::int64_t ld_o,
               Gemm::Init init, const float* alpha) {
  ValueTileOf<P, MR, NV>(p, lp, v, ld_v, c0, j0, nk, ahead, o, ld_o, init, alpha,
                         std::make_index_sequence<MR * NV>(), std::make_index_sequence<NV>());
}

template <class Rows>
using ValueTileFn = void (*)(const float*, PLayout, Rows, std::int64_t, std::int64_t, std::int64_t,
                             std::int64_t, std::int64_t, float*, std::int64_t, Gemm::Init,
                             const float*);

// Every tile shape up to MR x NV, for the edges of O.
template <class P, int MR, int NV, class Rows, std::size_t... I>
constexpr std::array<ValueTileFn<Rows>, MR * NV> ValueTiles(std::index_sequence<I...>) {
  return {&ValueTile<P, int(I) / NV + 1, int(I) % NV + 1, Rows>...};
}

template <class P, class Rows>
void AccumulateValues(const DecodeGeometry& g, std::int64_t rows, Rows v, std::int64_t d_v,
                      std::int64_t nk, bool first, const DecodeScratch& w, const float* p,
                      PLayout lp, float* acc) {
  // Tiles of kMrD x kNvD read each value row front to back in one strip (fp32 and 16 bits; a
  // strip of half rows measured slower). int8 values cost two instructions to widen (a sign
  // extension and a conversion, once TileValues has moved the rows' scales into P), once per row
  // group, so they take the prefill's taller tile (kMrO x kNvO: 6 x 4, in two strips of
  // d_v = 128), which widens them once for up to 6 rows; the same products in the same order
  // (docs/perf-log/2026-11-25-decode-one-thread-profile.md).
  constexpr bool kScaled = !kElementRows<Rows>;
  constexpr int MR = kScaled ? P::kMrO : P::kMrD, NV = kScaled ? P::kNvO : P::kNvD;
  constexpr std::int64_t L = P::kLanes;
  const Gemm::Init init = first ? Gemm::Init::kZero : Gemm::Init::kLoadScaled;
  if (d_v % L == 0) {
    // The reader the tiles widen values through (for int8, with the rows' scales moved into P).
    const auto values = TileValues<P>(v, rows, nk, w);
    using Values = decltype(values);
    static constexpr auto kTiles =
        ValueTiles<P, MR, NV, Values>(std::make_index_sequence<MR * NV>());
    // A block of fewer than kQueryLanesRows rows takes fp32 and 16-bit tiles one row taller than
    // the registers hold (kMrD + 1: 4 x 8 on 32 registers, where GCC keeps 5 of the 32
    // accumulators in L1, a load and a store each per key). Its first row group, the one that
    // reads V from memory, then takes one row more, and a later pass over the chunk in L1 one
    // fewer: 4 rows per K/V head are one group rather than 3 + 1, and 7 rows are 4 + 3 rather
    // than 3 + 3 + 1 (docs/perf-log/2026-11-26-pv-memory-row-group.md). The Arm targets take the
    // same rule, untimed (qemu). Larger blocks spend most of their time in the groups that read
    // L1, where the spills cost. The same products in the same order: the same bits.
    static constexpr auto kTallTiles = [] {
      if constexpr (kScaled)
        return kTiles;
      else
        return ValueTiles<P, MR + 1, NV, Values>(std::make_index_sequence<(MR + 1) * NV>());
    }();
    // Values two tiles wide (d_v = 256 on AVX-512) in such a block: the tall tile's accumulators
    // as whole rows of V, (MR + 1) / 2 x 2 NV (2 x 16 for 4 x 8), so each value row is read front
    // to back in one pass rather than in two halves (with the scores' whole rows, GroupScores).
    // On 16 registers the wide tile would be one row (1 x 16 for 2 x 8), which measured slower,
    // so those targets keep the tall tiles (docs/perf-log/2026-11-26-decode-prefetch.md).
    constexpr bool kWide = !kScaled && (MR + 1) / 2 >= 2;
    static constexpr auto kWideTiles = [] {
      if constexpr (!kWide)
        return kTiles;
      else
        return ValueTiles<P, (MR + 1) / 2, 2 * NV, Values>(
            std::make_index_sequence<(MR + 1) / 2 * 2 * NV>());
    }();
    // int8 values of a one-row block (multi-head attention) where P::kInt8RowWhole: the one-row
    // tile of fp32 values, so each value row is read whole rather than in narrow strips.
    constexpr bool kRowWhole = kScaled && P::kInt8RowWhole;
    static constexpr auto kRowTiles = [] {
      if constexpr (!kRowWhole)
        return kTiles;
      else
        return ValueTiles<P, 1, P::kNvD, Values>(std::make_index_sequence<P::kNvD>());
    }();
    const bool tall = !kScaled && rows < kQueryLanesRows;
    const bool row_whole = kRowWhole && rows == 1;
    const std::int64_t n_vec = d_v / L;
    const bool wide = kWide && tall && n_vec == 2 * NV;
    const ValueTileFn<Values>* tiles = wide        ? kWideTiles.data()
                                       : tall      ? kTallTiles.data()
                                       : row_whole ? kRowTiles.data()
                                                   : kTiles.data();
    const std::int64_t tile_rows = wide ? (MR + 1) / 2 : tall ? MR + 1 : row_whole ? 1 : MR;
    const std::int64_t tile_vecs = wide ? 2 * NV : row_whole ? P::kNvD : NV;
    // Per strip of NV vectors, the first row group reads the chunk's values from memory, the
    // others from L1. A block of few row groups has each prefetch as it reads (PassAhead). A block
    // of many (kQueryLanesRows rows or more) spends most of a chunk's time in the groups that read
    // L1, when the stream would stand still: there each group first prefetches its share of the
    // next chunk's values (for 4 rows per K/V head sharing measured slower than the first group's
    // prefetch: docs/perf-log/2026-11-26-query-lanes-prefetch.md).
    const std::int64_t groups = (rows + tile_rows - 1) / tile_rows;
    const bool share_prefetch = rows >= kQueryLanesRows;
    const std::int64_t ahead = share_prefetch ? 0 : RowsAhead(d_v * ValueBytes(values));
    const std::int64_t share = (kWidenKeys + groups - 1) / groups;
    // Keys in chunks of kWidenKeys: a chunk's values (16 KiB of fp32 at d_v = 128) stay in L1
    // while every row group passes over them, so only the first reads them from memory.
    for (std::int64_t j0 = 0; j0 < nk; j0 += kWidenKeys) {
      const std::int64_t kc = std::min(kWidenKeys, nk - j0);
      for (std::int64_t c0 = 0; c0 < n_vec; c0 += tile_vecs) {
        const std::int64_t nv = std::min<std::int64_t>(tile_vecs, n_vec - c0);
        for (std::int64_t i0 = 0; i0 < rows; i0 += tile_rows) {
          const std::int64_t mr = std::min(tile_rows, rows - i0);
          if (share_prefetch) {
            const std::int64_t from = j0 + kWidenKeys + i0 / tile_rows * share;
            for (std::int64_t j = from; j < std::min(from + share, j0 + 2 * kWidenKeys); ++j)
              PrefetchValues(values, d_v, j, c0 * L, nv * L);
          }
          tiles[(mr - 1) * tile_vecs + (nv - 1)](p + i0 * lp.row, lp, values, d_v, c0, j0, kc,
                                                 PassAhead(i0, ahead), acc + i0 * g.ld_acc + c0 * L,
                                                 g.ld_acc, j0 == 0 ? init : Gemm::Init::kLoad,
                                                 w.rescale + i0);
        }
      }
    }
    return;
  }
  for (std::int64_t j0 = 0; j0 < nk; j0 += kWidenKeys) {
    Gemm chunk{.m = rows,
               .n_vec = g.ld_acc / L,
               .k = std::min(kWidenKeys, nk - j0),
               .a = p + j0 * lp.key,
               .a_row = lp.row,
               .a_col = lp.key,
               .b = w.v_pack,
               .ldb = g.ld_acc,
               .b_cols = g.ld_acc,
               .c = acc,
               .ldc = g.ld_acc,
               .init = j0 == 0 ? init : Gemm::Init::kLoad,
               .row_scale = w.rescale};
    WidenRows(v + j0 * d_v, chunk.k, d_v, d_v, w.v_pack, g.ld_acc);
    RunGemm<P, P::kMrD, P::kNvD>(chunk);
  }
}

// O^T for SV values of V (from v, a column of V's rows ld_v apart) and the block's rows in NQ
// vectors: SV x NQ accumulators (element I: value I / NQ, vector of rows I % NQ), = init +
// V^T P^T over kc keys, P^T in w.scores_t's layout. Per key the NQ vectors of P^T (the key's
// weight in every row) are loaded and each of the SV values of V is broadcast, once, into NQ
// multiply-adds, so every row is served by one read of V, no row group reading V from L1 after
// the first. Key j prefetches the line at pf + j pf_step, into L2 with kToL2: ValueStrips lays
// these out so that the chunk's strips request the next chunk in memory order (see there). init
// as ValueTileOf's, with alpha along the lanes.
template <class P, int SV, int NQ, bool kToL2, std::size_t... I, std::size_t... Q, std::size_t... C>
HWY_INLINE void ValueStripOf(const float* p_t, const float* v, std::int64_t ld_v, std::int64_t kc,
                             const char* pf, std::int64_t pf_step, float* o_t, Gemm::Init init,
                             const float* alpha, std::index_sequence<I...>,
                             std::index_sequence<Q...>, std::index_sequence<C...>) {
  constexpr std::int64_t L = P::kLanes;
  constexpr std::int64_t kValue[] = {std::int64_t(I / NQ)...};
  constexpr std::size_t kRows[] = {I % NQ...};
  [&](auto... acc) HWY_ATTR __attribute__((always_inline)) {
    if (init != Gemm::Init::kZero)
      ((acc = P::Mul(init == Gemm::Init::kLoadScaled ? P::Load(alpha + kRows[I] * L) : P::Set(1.0f),
                     P::Load(o_t + kValue[I] * kDecodeRows + kRows[I] * L))),
       ...);
    for (std::int64_t j = 0; j < kc; ++j) {
      if constexpr (kToL2)
        prefetch_to_l2(pf + j * pf_step);
      else
        hwy::Prefetch(pf + j * pf_step);
      [&](auto... weights) HWY_ATTR __attribute__((always_inline)) {
        const auto value = [&](auto c) HWY_ATTR __attribute__((always_inline)) {
          const auto x = HoldIf<(NQ > 1)>(P::Set(v[j * ld_v + c()]));
          ((kValue[I] == c() ? void(acc = P::MulAdd(x, Pick<kRows[I]>(weights...), acc)) : void()),
           ...);
        };
        (value(std::integral_constant<std::int64_t, std::int64_t(C)>()), ...);
      }
      (P::Load(p_t + j * kDecodeRows + std::int64_t(Q) * L)...);
    }
    (P::Store(acc, o_t + kValue[I] * kDecodeRows + kRows[I] * L), ...);
  }
  (((void)I, P::Zero())...);
}

// Most vectors of rows a strip holds: a block's 16 rows on 4 lanes. One-lane targets keep the
// row tiles.
inline constexpr int kMaxStripVectors = 4;

// Values per strip for a block whose rows take NQ vectors: as many as keep SV x NQ within the
// target's kStripAccumulators (16 on the 32-register targets, 12 on AVX2, 8 on SSE4). d_v need
// not be a multiple of SV: ChunkStrips.
template <class P>
constexpr int StripValues(int nq) {
  return P::kStripAccumulators / nq;
}

// Whether a block takes P V along the query lanes (AccumulateValuesAlongLanes): a query-lanes
// block of fp32 or 16-bit values whose rows take at most kMaxStripVectors vectors. The row tiles
// (AccumulateValues) read V once per group of kMrD rows, the first from memory and the others from
// L1 (16 rows on AVX-512: 3 + 3 + 3 + 3 + 3 + 1), and widen 16-bit values once per group; along the
// lanes every row is served by one read, and 16-bit values are widened once, into v_pack
// (ValueStrips). Zen 5 had measured the widened strips slower, when their next chunk still went to
// L1 at every d_v (docs/perf-log/2026-11-27-strips-next-chunk-l2.md).
template <class P, class E>
bool ValuesAlongLanes(std::int64_t rows) {
  const int nq = int((rows + P::kLanes - 1) / P::kLanes);
  return kElementRows<E> && takes_query_lanes(rows) && nq <= kMaxStripVectors;
}

// Keys per chunk of the strips: each strip's accumulators are loaded and stored once per chunk,
// and a chunk's strips prefetch the next chunk. 64 rather than 32 (kWidenKeys, the row tiles')
// or 16: docs/perf-log/2026-11-26-decode-prefetch.md.
inline constexpr std::int64_t kStripKeys = 64;

// L1 the strips' next chunk may share with the chunk being multiplied: 32 KiB, the smallest L1d
// of the CPUs we run on. At d_v = 128 the two fp32 chunks are 64 KiB, and the next one,
// prefetched into L1, evicted the lines of the one being read: there it goes to L2
// (docs/perf-log/2026-11-27-strips-next-chunk-l2.md).
inline constexpr std::int64_t kStripL1Bytes = 32768;

// One chunk of kc keys for ChunkStrips: P^T's rows, the chunk's d_v values per key (fp32, rows
// ld_v apart), where the next chunk starts in memory (elements of element_bytes), and O^T.
struct StripChunk {
  const float* p_t;
  const float* values;
  std::int64_t ld_v, d_v, kc;
  const char* next;
  std::int64_t element_bytes;
  float* acc_t;
  Gemm::Init init;
  const float* alpha;
};

// The chunk's values [c0, d_v) in strips of SV (ValueStripOf), the last d_v % SV of them in
// strips of the powers of two below SV.
template <class P, int SV, int NQ, bool kToL2>
void ChunkStrips(const StripChunk& ch, std::int64_t c0) {
  for (; c0 + SV <= ch.d_v; c0 += SV)
    ValueStripOf<P, SV, NQ, kToL2>(ch.p_t, ch.values + c0, ch.ld_v, ch.kc,
                                   ch.next + c0 * kStripKeys * ch.element_bytes,
                                   SV * ch.element_bytes, ch.acc_t + c0 * kDecodeRows, ch.init,
                                   ch.alpha, std::make_index_sequence<SV * NQ>(),
                                   std::make_index_sequence<NQ>(), std::make_index_sequence<SV>());
  if constexpr (SV > 1)
    if (c0 < ch.d_v) ChunkStrips<P, int(std::bit_floor(unsigned(SV - 1))), NQ, kToL2>(ch, c0);
}

// Floats per row of a chunk of values widened into v_pack: an odd number of 64-byte lines, so
// the chunk's rows, which a strip reads down a column, fall in different sets of L1. Rows of
// 512 bytes (d_v = 128) shared 8 of its 64 sets, which a strip's 64 rows filled.
inline std::int64_t StripPackStride(std::int64_t d_v) {
  return (round_up(d_v, kAlignFloats) / kAlignFloats | 1) * kAlignFloats;
}
static_assert(2 * kStripKeys <= kDepthChunk);  // a chunk so widened fits v_pack

// w.acc_t (O^T: d_v rows of NQ vectors of the block's rows) = alpha O^T + V^T P^T over the
// tile's nk keys, in chunks of kStripKeys keys and strips of SV values (ValueStripOf). Every
// element is alpha O + sum_j p_j v_j by multiply-adds in key order, as in AccumulateValues: the
// same bits. DecodeSplit transposes O^T into the split's partial output after its last tile.
// 16-bit values are widened a chunk at a time into v_pack (rows StripPackStride apart) and
// multiplied from there: a widening per vector rather than per broadcast value, and one read of
// V for all rows where the row tiles widened each vector once per row group.
// While a chunk is multiplied, the next one (kStripKeys rows of V, contiguous) is prefetched in
// memory order: strip c0 / SV, key j requests bytes (c0 kStripKeys + j SV) sizeof(E) of it, so
// over the chunk's strips the requests walk it front to back, a line (fp32 at SV = 16) per key.
// Each strip prefetching its own column of the next chunk instead (one line per value row, 512
// bytes apart at d_v = 128) kept one request per value row in flight: in memory order the
// hardware's prefetchers join in (docs/perf-log/2026-11-26-decode-prefetch.md); the same bits.
template <class P, int NQ, class E>
void ValueStrips(const E* v, std::int64_t d_v, std::int64_t nk, bool first,
                 const DecodeScratch& w) {
  constexpr int SV = StripValues<P>(NQ);
  constexpr std::int64_t kBytes = sizeof(E);
  const Gemm::Init init = first ? Gemm::Init::kZero : Gemm::Init::kLoadScaled;
  const bool to_l2 = kStripKeys * d_v * (std::int64_t(sizeof(float)) + kBytes) > kStripL1Bytes;
  for (std::int64_t j0 = 0; j0 < nk; j0 += kStripKeys) {
    const std::int64_t kc = std::min(kStripKeys, nk - j0);
    const char* next = reinterpret_cast<const char*>(v + (j0 + kStripKeys) * d_v);
    const float* values = w.v_pack;
    std::int64_t ld_v = d_v;
    if constexpr (std::is_same_v<E, float>) {
      values = v + j0 * d_v;
    } else {
      ld_v = StripPackStride(d_v);
      for (std::int64_t j = 0; j < kc; ++j)  // the padding is never read: not zeroed
        WidenRows(v + (j0 + j) * d_v, 1, d_v, d_v, w.v_pack + j * ld_v, d_v);
    }
    const StripChunk chunk{.p_t = w.scores_t + j0 * kDecodeRows,
                           .values = values,
                           .ld_v = ld_v,
                           .d_v = d_v,
                           .kc = kc,
                           .next = next,
                           .element_bytes = kBytes,
                           .acc_t = w.acc_t,
                           .init = j0 == 0 ? init : Gemm::Init::kLoad,
                           .alpha = w.rescale};
    to_l2 ? ChunkStrips<P, SV, NQ, true>(chunk, 0) : ChunkStrips<P, SV, NQ, false>(chunk, 0);
  }
}

template <class P, int NQ = 1, class E>
void AccumulateValuesAlongLanes(std::int64_t rows, const E* v, std::int64_t d_v, std::int64_t nk,
                                bool first, const DecodeScratch& w) {
  if constexpr (NQ < kMaxStripVectors && NQ * P::kLanes < kDecodeRows) {
    if (rows > NQ * P::kLanes)
      return AccumulateValuesAlongLanes<P, NQ + 1>(rows, v, d_v, nk, first, w);
  }
  ValueStrips<P, NQ>(v, d_v, nk, first, w);
}

// Where DecodeSplit reads K or V rows: E's elements at p, or, for a format whose rows carry a
// scale (E::kScaledRows: kv_int8-inl.h's Int8Rows), the reader at p, whose ScoreRows,
// TileValues and WidenRows overloads then do the score and widen steps.
template <class E>
auto KvRows(const void* p) {
  if constexpr (!kElementRows<E>)
    return *static_cast<const E*>(p);
  else
    return static_cast<const E*>(p);
}

// One split of one block: its queries packed, then tile by tile S, the online softmax and
// O = alpha O + P V into the split's partial output.
template <class P, class E, bool kProbe>
void DecodeSplit(const ForwardArgs& a, const DecodeKv& kv, const DecodeGeometry& g,
                 const DecodeBlock& blk, std::int64_t split, const DecodePartials& partials,
                 const DecodeScratch& w) {
  static_assert(kPartialAlign % P::kLanes == 0 && kDecodeUnit % P::kLanes == 0);
  const Shape& s = a.shape;
  // Rows of plain elements (fp32, 16-bit) may take the query-lanes layout; a format whose rows
  // carry a scale (int8) scores a block of any size with its own ScoreRows.
  const bool query_lanes = kElementRows<E> && takes_query_lanes(blk.rows);
  const bool values_along_lanes = ValuesAlongLanes<P, E>(blk.rows);
  const std::span<const float> temperature = a.score_mod.temperature;
  for (std::int64_t i = 0; i < blk.rows; ++i) {
    const float* q = a.q + (blk.first_row + i) * s.d_k;
    // The row's temperature multiplies its scale (RowLogits::scale).
    const float scale = temperature.empty() ? a.scale : a.scale * temperature[i % s.n_q];
    for (std::int64_t c = 0; c < s.d_k; ++c) w.q[i * w.ld_q + c] = scale * q[c];
    std::fill(w.q + i * w.ld_q + s.d_k, w.q + (i + 1) * w.ld_q, 0.0f);
  }
  if (query_lanes) {
    std::fill_n(w.q_t, s.d_k * kDecodeRows, 0.0f);
    for (std::int64_t c = 0; c < s.d_k; ++c)
      for (std::int64_t i = 0; i < blk.rows; ++i) w.q_t[c * kDecodeRows + i] = w.q[i * w.ld_q + c];
  }
  // Every row of kDecodeRows: the query-lanes softmax runs on whole vectors of rows.
  static_assert(kDecodeRows <= kQueryBlock);  // RowStats' arrays
  std::fill_n(w.max, kDecodeRows, -std::numeric_limits<float>::infinity());
  std::fill_n(w.sum, kDecodeRows, 0.0f);
  for (double* p : {w.score_sum, w.score_sumsq, w.shifted_t, w.nonfinite, w.p2, w.p3})
    std::fill_n(p, blk.rows, 0.0);
  const DecodePartials::Split out = partials.split(blk.index, split);
  const auto k = KvRows<E>(kv.k) + blk.kv * s.n_kv * s.d_k;
  const auto v = KvRows<E>(kv.v) + blk.kv * s.n_kv * s.d_v;
  const std::int64_t first = g.key_begin + split * g.keys_per_split;
  const std::int64_t end = std::min(g.key_end, first + g.keys_per_split);
  const bool modified = a.score_mod.softcap > 0 || !a.score_mod.alibi_slopes.empty();
  // P: S^T's layout in place (query lanes) or S's.
  const float* p = query_lanes ? w.scores_t : w.scores;
  const PLayout lp = query_lanes ? PLayout{1, kDecodeRows} : PLayout{w.tile, 1};
  for (std::int64_t key0 = first; key0 < end; key0 += g.tile) {
    const std::int64_t nk = std::min(g.tile, end - key0);
    if constexpr (kElementRows<E>) {
      if (query_lanes) {
        ScoreRowsQueryLanes<P>(w, blk.rows, k + key0 * s.d_k, s.d_k, nk);
        if (modified) ModifyRowsQueryLanes<P>(a, blk, key0, nk, w);
        SoftmaxQueryLanes<P, kProbe>(a, blk.rows, key0, nk, w);
      }
    }
    if (!query_lanes) {
      ScoreRows<P>(w, blk.rows, k + key0 * s.d_k, s.d_k, nk);
      if (modified) ModifyRows<P>(a, blk, key0, round_up(nk, P::kLanes), w);
      SoftmaxRows<P, kProbe>(a, blk.rows, key0, nk, w);
    }
    if constexpr (kProbe) fold_tile_probes(w, blk.rows);
    if constexpr (kElementRows<E>) {
      if (values_along_lanes) {
        AccumulateValuesAlongLanes<P>(blk.rows, v + key0 * s.d_v, s.d_v, nk, key0 == first, w);
        continue;
      }
    }
    AccumulateValues<P>(g, blk.rows, v + key0 * s.d_v, s.d_v, nk, key0 == first, w, p, lp, out.acc);
  }
  if (values_along_lanes)  // O^T into the split's rows of O
    for (std::int64_t i = 0; i < blk.rows; ++i)
      for (std::int64_t c = 0; c < s.d_v; ++c)
        out.acc[i * g.ld_acc + c] = w.acc_t[c * kDecodeRows + i];
  std::copy_n(w.max, blk.rows, out.max);
  std::copy_n(w.sum, blk.rows, out.sum);
  if constexpr (kProbe) {
    double* sums = out.probe_sums;
    for (const double* p : {w.score_sum, w.score_sumsq, w.shifted_t, w.nonfinite, w.p2, w.p3})
      std::copy_n(p, blk.rows, sums), sums += g.max_rows;
  }
}

// The splits of one block folded in order, per row: with M the largest split max and
// w_c = e^{m_c - M}, l = sum w_c l_c and O = sum w_c O_c; the probes' shifted sum moves like l,
// t' = sum w_c (t'_c + (m_c - M) l_c), and sum e^{k(s - M)} by w_c^k (fold_tile_probes' algebra).
// A split a row sees nothing of (l_c = 0, m_c = -inf) adds nothing. A sink (sdpa/mask.hpp) is
// one more split after the last, of max the sink, sum 1 and output 0: it joins l, so lse and
// the probes' weights count it, and a row that sees no key gets output 0 and lse the sink.
template <class P>
void DecodeMerge(const ForwardArgs& a, const DecodeGeometry& g, const DecodeBlock& blk,
                 const DecodePartials& partials, const DecodeScratch& w) {
  constexpr std::int64_t L = P::kLanes;
  const Shape& s = a.shape;
  for (std::int64_t i = 0; i < blk.rows; ++i) {
    const std::int64_t r = blk.first_row + i;
    const float sink = row_logits(s, a.score_mod, a.scale, r / s.n_q, r % s.n_q).sink;
    float m = sink;
    for (std::int64_t c = 0; c < g.splits; ++c)
      m = std::max(m, partials.split(blk.index, c).max[i]);
    RowResult row{.max = m, .sum = 0.0f, .acc = w.merged};
    std::fill_n(w.merged, g.ld_acc, 0.0f);
    for (std::int64_t c = 0; c < g.splits; ++c) {
      const DecodePartials::Split part = partials.split(blk.index, c);
      if (part.sum[i] == 0) continue;  // NaN and inf (overflowed scores) go on to the output
      // The split that holds the max weighs 1 even when that max is +inf (scores that overflow
      // fp32), so the row's output is non-finite, as in the prefill path, not e^NaN-weighted.
      const float weight = part.max[i] == m ? 1.0f : std::exp(part.max[i] - m);
      row.sum += weight * part.sum[i];
      const typename P::V vw = P::Set(weight);
      const float* acc = part.acc + i * g.ld_acc;
      for (std::int64_t x = 0; x < g.ld_acc; x += L)
        P::Store(P::MulAdd(vw, P::Load(acc + x), P::Load(w.merged + x)), w.merged + x);
      if (a.probes) {
        const std::int64_t n = g.max_rows;
        const double* sums = part.probe_sums;
        const double wd = weight;
        row.score_sum += sums[0 * n + i];
        row.score_sumsq += sums[1 * n + i];
        row.shifted_t += wd * (sums[2 * n + i] + (double(part.max[i]) - m) * part.sum[i]);
        row.nonfinite += std::int64_t(sums[3 * n + i]);
        row.p2 += wd * wd * sums[4 * n + i];
        row.p3 += wd * wd * wd * sums[5 * n + i];
      }
    }
    if (sink > -std::numeric_limits<float>::infinity()) {
      const float weight = sink == m ? 1.0f : std::exp(sink - m);
      row.sum += weight;
      const double wd = weight;
      row.shifted_t += wd * (double(sink) - m);
      row.p2 += wd * wd;
      row.p3 += wd * wd * wd;
    }
    finish_row(a, r, row);
  }
}

// The decode path of a fused forward on target P, K and V read as E from kv.
template <class P, class E = float>
void DecodeForward(const ForwardArgs& a, const DecodeKv& kv) {
  for_each_decode_split(a, kv, a.probes ? &DecodeSplit<P, E, true> : &DecodeSplit<P, E, false>,
                        &DecodeMerge<P>);
}
template <class P>
void DecodeForward(const ForwardArgs& a) {
  DecodeForward<P>(a, DecodeKv{a.k, a.v});
}

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SDPA_KERNELS_ATTENTION_DECODE_INL_H_
