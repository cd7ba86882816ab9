// HwyLanes: the lanes policy of attention_tiles-inl.h for one Highway target (whole vectors of
// fp32), with the target's register-tile shapes. Also the vectorised exp every SIMD rung uses.
//
// Per-target include guard (Highway's pattern): this file is compiled once per ISA target.
#if defined(SDPA_KERNELS_HWY_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SDPA_KERNELS_HWY_LANES_INL_H_
#undef SDPA_KERNELS_HWY_LANES_INL_H_
#else
#define SDPA_KERNELS_HWY_LANES_INL_H_
#endif

#include <cstdint>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sdpa::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct HwyLanes {
  using D = hn::ScalableTag<float>;
  using V = hn::Vec<D>;
  // Tile shapes and strides are compile-time, so only targets whose vector length is known
  // when compiling qualify: SVE_256 and SVE2_128 are SVE at one length, checked at run time by
  // Highway before it picks them; generic SVE is disabled (CMake).
  static_assert(!HWY_HAVE_SCALABLE || HWY_TARGET == HWY_SVE_256 || HWY_TARGET == HWY_SVE2_128);
#if HWY_HAVE_SCALABLE
  static constexpr std::int64_t kLanes = hn::Lanes(D());  // constexpr on these two targets
#else
  static constexpr std::int64_t kLanes = hn::MaxLanes(D());
#endif
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_ARCH_ARM_A64
  // 32 vector registers (AVX-512; NEON and SVE on aarch64): tiles of 8x3 (S^T) and 6x4 (O) use
  // 24 accumulators, plus the B row and one broadcast.
  static constexpr int kMrS = 8, kNvS = 3, kMrO = 6, kNvO = 4;
  // Steps of a register tile's depth loop per iteration (attention_tiles-inl.h, MicroTileOf).
  static constexpr int kDepthUnroll = 1;
  static constexpr bool kPrefetchNext = false;  // Gemm's `next` (below: AVX2)
  // Decode scores: 8 vectors of each of 3 query rows in registers (24), and a fourth row read
  // from L1, one accumulator per row and the key vector. A whole key row of d = 128 per pass:
  // 4 rows x 4 vectors in registers, which reads each key in two halves, measured slower
  // (docs/perf-log/2026-11-26-decode-streams-on-one-core.md).
  static constexpr int kScoreRows = 3, kScoreRowsL1 = 1, kScoreChunk = 8;
  // Key rows this many vectors deep are read whole with every query row from L1 (0: none; keys
  // two chunks deep are read whole anyway, with one query row in registers).
  static constexpr int kScoreWholeVecs = 0;
  // Whether the whole key rows' pass takes two keys a step (below: AVX2).
  static constexpr bool kScorePairs = false;
  // Decode O += P V: rows of 128 values in one strip (3 x 8 accumulators), so each value row is
  // read front to back rather than in strips (int8 values take kMrO x kNvO: AccumulateValues).
  static constexpr int kMrD = 3, kNvD = 8;
  // A one-row block's int8 values keep the 1 x 4 strips of kMrO x kNvO: 1 x 8 measured slower
  // on AVX-512 (docs/perf-log/2026-11-30-decode-prefetch-l2.md); the Arm targets alike, untimed.
  static constexpr bool kInt8RowWhole = false;
  // Decode O^T += V^T P^T along the query lanes (ValueStripOf): accumulators of a strip, beside
  // up to 4 vectors of weights and a broadcast value.
  static constexpr int kStripAccumulators = 16;
#else
  // 16 registers: 6x2 tiles, 12 accumulators + 2 B vectors + 1 broadcast. AVX2 unrolls the
  // depth loop by 4, so a step's 12 FMAs carry a quarter of the loop's counter and pointer
  // updates: faster at d = 128 (docs/perf-log/2026-11-27-avx2-tiles.md); 4x3 and 3x4 tiles
  // measured no faster, nor B packed into strips (docs/perf-log/2026-11-27-avx2-prefill-limit.md).
  static constexpr int kMrS = 6, kNvS = 2, kMrO = 6, kNvO = 2;
  static constexpr int kDepthUnroll = HWY_TARGET == HWY_AVX2 ? 4 : 1;
  // AVX2's prefill products request the next product's operand toward L2 as they run (Gemm's
  // `next`): Zen 3's 512 KiB L2 otherwise takes a tile of K or V from L3 as each product starts
  // (docs/perf-log/2026-11-29-prefill-next-operand.md).
  static constexpr bool kPrefetchNext = HWY_TARGET == HWY_AVX2;
  // Decode scores: 4 vectors of each of 2 query rows in registers, one accumulator per row, and
  // rows read from L1: AVX2 and SSE4 take two, so a grouped head's 4 rows pass over K once rather
  // than 3 + 1 (13 registers; docs/perf-log/2026-11-27-avx2-decode.md,
  // docs/perf-log/2026-11-29-sse4-int8-f16.md).
  static constexpr int kScoreRows = 2,
                       kScoreRowsL1 = HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 ? 2 : 1,
                       kScoreChunk = 4;
  // AVX2 reads a key row of d = 128 whole, every query row from L1 (6 loads per 8 FMAs at 4
  // rows, two keys a step), rather than in four passes of 128 bytes over each group of keys, which
  // Zen 3's prefetchers stream slower (docs/perf-log/2026-11-29-zen3-decode-whole-key-rows.md).
  static constexpr int kScoreWholeVecs = HWY_TARGET == HWY_AVX2 ? 4 * kScoreChunk : 0;
  // Two keys a step at 2 rows or more: 8 independent sums at 4 rows, where one key's 4 held
  // 16-bit K/V's scores to half the FMA rate (docs/perf-log/2026-12-01-avx2-decode-16-bit.md).
  static constexpr bool kScorePairs = HWY_TARGET == HWY_AVX2;
  // Decode O += P V: one row of 8 vectors per strip.
  static constexpr int kMrD = 1, kNvD = 8;
  // A one-row block's int8 values take the 1 x kNvD tile: each value row in one strip rather than
  // in the 1 x 2 strips of kMrO x kNvO (docs/perf-log/2026-11-30-decode-prefetch-l2.md).
  static constexpr bool kInt8RowWhole = HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4;
  // Decode O^T += V^T P^T: the accumulators beside up to 4 vectors of weights and a broadcast
  // value. AVX2's blocks take at most 2 vectors of weights, so 12 fit: 8 kept Zen 3's two FMA
  // pipes no more than just busy (docs/perf-log/2026-11-29-avx2-strips.md).
  static constexpr int kStripAccumulators = HWY_TARGET == HWY_AVX2 ? 12 : 8;
#endif

  static V Zero() { return hn::Zero(D()); }
  static V Set(float x) { return hn::Set(D(), x); }
  static V Load(const float* p) { return hn::LoadU(D(), p); }
  static void Store(V x, float* p) { hn::StoreU(x, D(), p); }
  static V Add(V x, V y) { return hn::Add(x, y); }
  static V Sub(V x, V y) { return hn::Sub(x, y); }
  static V Mul(V x, V y) { return hn::Mul(x, y); }
  static V MulAdd(V x, V y, V z) { return hn::MulAdd(x, y, z); }
  static V Max(V x, V y) { return hn::Max(x, y); }
  static V Abs(V x) { return hn::Abs(x); }
  static V ZeroIfNotFinite(V x) { return hn::IfThenElseZero(hn::IsFinite(x), x); }
  static V OneIfNotFinite(V x) { return hn::IfThenZeroElse(hn::IsFinite(x), Set(1.0f)); }
  static float ReduceSum(V x) { return hn::GetLane(hn::SumOfLanes(D(), x)); }
  static float ReduceMax(V x) { return hn::GetLane(hn::MaxOfLanes(D(), x)); }
  // One step of a transpose-reduce: lanes [0, L/2) hold the sums of adjacent pairs of lo's
  // lanes, lanes [L/2, L) those of hi's. log2(L) steps fold L vectors into one vector of their
  // L sums with L - 1 adds and 2 (L - 1) shuffles, against L log2(L) of each for L reductions.
  static V PairSums(V hi, V lo) {
#if HWY_TARGET == HWY_SCALAR
    return hn::Add(hi, lo);  // never called: one lane has no pairs
#else
    return hn::Add(hn::ConcatEven(D(), hi, lo), hn::ConcatOdd(D(), hi, lo));
#endif
  }
  // e^x over the range softmax needs, [-87.6, 88.3] (x = s - max <= 0, and +inf for a score
  // that overflowed): max error 1 ULP on [-87.3, 0] (test_kernels); 0 below -87.6 (where e^x is
  // subnormal), for -inf and for NaN (as Highway's hn::Exp), +inf above about 88.4.
  // Highway's hn::Exp covers [-FLT_MAX, +104] with ~30 vector instructions per call: a
  // saturating float-to-int conversion (4 fix-up instructions on x86), a conversion back and two
  // power-of-two scales, which only arguments above +88 and subnormal results need. Here n =
  // round(x / ln 2) comes from the 1.5 * 2^23 rounding trick, whose sum also holds n + 127 in
  // its low mantissa bits, so 2^n is one shift of it: 15 instructions
  // (docs/perf-log/2026-11-24-flash-softmax-exp.md).
  // The reduction (ln 2 in two parts) and the polynomial are Highway's (contrib/math's impl).
  static V Exp(V x) {
    const D d;
    const hn::RebindToSigned<D> di;
    constexpr float kRound = 1.5f * 8388608.0f;  // 1.5 * 2^23: ulp 1, so a sum rounds to integers
    const V clamped = hn::Min(x, hn::Set(d, 88.72f));  // ln(FLT_MAX): larger x give n + 127 > 255
    const V biased =
        hn::MulAdd(clamped, hn::Set(d, 1.44269504088896341f), hn::Set(d, kRound + 127));
    const V n = hn::Sub(biased, hn::Set(d, kRound + 127));          // round(x / ln 2), exactly
    V r = hn::MulAdd(n, hn::Set(d, -0.693145751953125f), clamped);  // x - n ln 2, |r| <= ln(2)/2
    r = hn::MulAdd(n, hn::Set(d, -1.428606765330187045e-6f), r);
    const V e_r = hn::Add(hn::impl::ExpImpl<float>().ExpPoly(d, r), hn::Set(d, 1.0f));
    // n + 127 sits in the low 9 bits of biased's bit pattern: shifted into the exponent field it
    // is 2^n (n >= -126 above the cut-off; n = 128 gives the pattern of +inf).
    const V two_n = hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, biased)));
    return hn::IfThenElseZero(hn::Ge(x, hn::Set(d, -87.6f)), hn::Mul(e_r, two_n));
  }
  // tanh x = sign(x) y / (y + 2) with y = e^{2|x|} - 1, for the soft-cap: Exp's reduction with
  // 2^n (e^r - 1) + (2^n - 1), which keeps y's relative accuracy for small |x|, and the quotient
  // by a refined reciprocal estimate. Highway's hn::Tanh (a general expm1 and a division) made
  // the soft-cap cost about twice as much (docs/perf-log/2026-11-27-tiles-masks.md). 2|x| is cut
  // at 18, past which tanh rounds to 1; NaN stays NaN. Accuracy: test_kernels, on every target.
  static V Tanh(V x) {
    const D d;
    const hn::RebindToSigned<D> di;
    constexpr float kRound = 1.5f * 8388608.0f;
    const V sign = hn::And(hn::SignBit(d), x);
    const V u = hn::Min(hn::Set(d, 18.0f), hn::Add(hn::Xor(x, sign), hn::Xor(x, sign)));
    const V biased = hn::MulAdd(u, hn::Set(d, 1.44269504088896341f), hn::Set(d, kRound + 127));
    const V n = hn::Sub(biased, hn::Set(d, kRound + 127));
    V r = hn::MulAdd(n, hn::Set(d, -0.693145751953125f), u);
    r = hn::MulAdd(n, hn::Set(d, -1.428606765330187045e-6f), r);
    const V two_n = hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, biased)));
    const V y = hn::MulAdd(two_n, hn::impl::ExpImpl<float>().ExpPoly(d, r),
                           hn::Sub(two_n, hn::Set(d, 1.0f)));
    const V den = hn::Add(y, hn::Set(d, 2.0f));
#if HWY_ARCH_X86
    // x86's estimates hold 12 (rcp) or 14 (rcp14) bits: one Newton step reaches fp32's 24.
    V inv = hn::ApproximateReciprocal(den);
    inv = hn::Mul(inv, hn::NegMulAdd(den, inv, hn::Set(d, 2.0f)));
    return hn::Xor(hn::Mul(y, inv), sign);
#else
    return hn::Xor(hn::Div(y, den), sign);  // Arm's FRECPE holds 8 bits: one step reaches 16
#endif
  }
};

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SDPA_KERNELS_HWY_LANES_INL_H_
