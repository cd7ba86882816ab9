// The fused forward in bf16 (precision "bf16"; docs/design.md,
// "Conventions for inference shapes and precision"): Q, K and V rounded to
// bf16 on entry, S = Q K^T and O = P V as products of bf16 values accumulated in fp32, the
// scale and the online softmax in fp32, and P rounded to bf16 before P V (where PyTorch's and
// oneDNN's CPU kernels round); the row sum l adds the unrounded fp32 weights. Flash's loops
// (attention_tiles-inl.h: query blocks, key tiles, masking, online softmax, probes, rows) around
// one of two pairs of products:
//  - native (flash-bf16@avx512-bf16, where the CPU has AVX512_BF16): vdpbf16ps micro-kernels on
//    bf16 pairs (bf16_dots_x86.cpp);
//  - widened (flash-bf16@<isa>, every Highway target, aarch64 included): the bf16 values held
//    in fp32 through flash's fp32 micro-kernels. The products are exact in fp32 and each pair is
//    accumulated odd element first, as vdpbf16ps does (bf16.hpp), so both give the same bits.
// Entries take fp32 tensors like every kernel; the rounding on entry costs O(n d) of the
// O(n^2 d) work.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "bf16.hpp"
#include "cached_scratch.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the rest.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flash_bf16.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy_lanes-inl.h"
#include "attention_tiles-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace sdpa::detail::HWY_NAMESPACE {

using DU = hn::ScalableTag<std::uint32_t>;
using DI = hn::ScalableTag<std::int32_t>;

// bf16_round_bits (bf16.hpp) lane-wise: the fp32 bits of x rounded to bf16.
HWY_INLINE hn::Vec<DU> RoundBits(hn::Vec<HwyLanes::D> x) {
  const DU du;
  const DI di;
  const auto b = hn::BitCast(du, x);
  const auto magnitude = hn::And(b, hn::Set(du, 0x7fffffffu));
  const auto high = hn::Set(du, 0xffff0000u);
  const auto nearest = hn::And(
      hn::Add(hn::Add(b, hn::Set(du, 0x7fffu)), hn::And(hn::ShiftRight<16>(b), hn::Set(du, 1u))),
      high);
  const auto quiet = hn::And(hn::Or(b, hn::Set(du, 0x00400000u)), high);
  // Magnitudes compare as signed integers: both are below 2^31.
  const auto is_nan = hn::RebindMask(
      du, hn::Gt(hn::BitCast(di, magnitude), hn::BitCast(di, hn::Set(du, 0x7f800000u))));
  const auto subnormal = hn::Eq(hn::And(b, hn::Set(du, 0x7f800000u)), hn::Zero(du));
  return hn::IfThenElse(subnormal, hn::And(b, hn::Set(du, 0x80000000u)),
                        hn::IfThenElse(is_nan, quiet, nearest));
}

HWY_INLINE hn::Vec<HwyLanes::D> RoundToBf16(hn::Vec<HwyLanes::D> x) {
  return hn::BitCast(HwyLanes::D(), RoundBits(x));
}

// y[r][c] = x[r][c] rounded to bf16 for c < cols, 0 for cols <= c < ld, for r < rows.
void RoundRows(const float* x, std::int64_t rows, std::int64_t cols, float* y, std::int64_t ld,
               int threads) {
  constexpr std::int64_t L = HwyLanes::kLanes;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * ld;
    std::int64_t c = 0;
    for (; c + L <= cols; c += L) HwyLanes::Store(RoundToBf16(HwyLanes::Load(xr + c)), yr + c);
    for (; c < cols; ++c) yr[c] = bf16_round(xr[c]);
    for (; c < ld; ++c) yr[c] = 0.0f;
  }
}

// Rows of n floats rounded and swapped in pairs in place (2j <-> 2j + 1; an odd last row's
// partner, row `count`, becomes zeros), so flash's micro-kernels accumulate each pair odd row
// first, as vdpbf16ps does.
void RoundSwapRowPairs(float* rows, std::int64_t count, std::int64_t n) {
  constexpr std::int64_t L = HwyLanes::kLanes;
  for (std::int64_t j = 0; 2 * j < count; ++j) {
    float* r0 = rows + 2 * j * n;
    float* r1 = r0 + n;
    const bool partner = 2 * j + 1 < count;
    for (std::int64_t c = 0; c < n; c += L) {
      const auto x0 = RoundToBf16(HwyLanes::Load(r0 + c));
      const auto x1 = partner ? RoundToBf16(HwyLanes::Load(r1 + c)) : HwyLanes::Zero();
      HwyLanes::Store(x1, r0 + c);
      HwyLanes::Store(x0, r1 + c);
    }
  }
}

// S^T *= each row's scale (w.q_scale) over the tile's nk rows: the scale multiplies the fp32
// scores (folded into bf16 queries it would add a rounding to every one). The native scores
// multiply by it as they store, the same products.
void ScaleTile(std::int64_t nk, const BlockScratch& w) {
  constexpr std::int64_t L = HwyLanes::kLanes;
  for (std::int64_t g = 0; g < kQueryBlock; g += L) {
    const auto scale = HwyLanes::Load(w.q_scale + g);
    for (std::int64_t j = 0; j < nk; ++j) {
      float* x = w.scores + j * kQueryBlock + g;
      HwyLanes::Store(HwyLanes::Mul(scale, HwyLanes::Load(x)), x);
    }
  }
}

// The block's queries transposed as flash has them (q_t), but unscaled; masking, softmax and
// rows are flash's.
KeyRange BeginUnscaled(const ForwardArgs& a, const QueryBlock& blk, const BlockScratch& w) {
  return begin_block(a, blk, w, /*scale_q=*/false);
}

// The inputs of a call as the products read them, with the call's arguments pointing at them:
// d_k rounded up to even (zero padding adds exact zeros), n_kv padded the same way in V. The
// calling thread's kept inputs (kept_input), so that a call does not pay for fresh pages.
struct Prepared {
  std::span<float> q, k, v;
  ForwardArgs args;
};

// The kept buffers, Q rounded to bf16 in rows of d_k rounded up to even; K (rows of d_k rounded
// up to even) and V (rows of ld_v per head of n_kv rounded up to even) for the products'
// Prepare to fill, as they read them.
Prepared RoundQuery(const ForwardArgs& a, std::int64_t ld_v) {
  const Shape& s = a.shape;
  const std::int64_t dk2 = round_up(s.d_k, 2), nkv2 = round_up(s.n_kv, 2);
  const auto kept = [](KeptInput which, std::int64_t n) {
    return std::span<float>(kept_input(which, n), std::size_t(n));
  };
  Prepared p{.q = kept(KeptInput::kQ, s.batch_heads * s.n_q * dk2),
             .k = kept(KeptInput::kK, s.kv_batch_heads() * s.n_kv * dk2),
             .v = kept(KeptInput::kV, s.kv_batch_heads() * nkv2 * ld_v),
             .args = a};
  RoundRows(a.q, s.rows(), s.d_k, p.q.data(), dk2, a.threads);
  p.args.shape.d_k = dk2;
  p.args.q = p.q.data();
  p.args.k = p.k.data();
  p.args.v = p.v.data();
  return p;
}

// Widened products: bf16 values held in fp32, flash's fp32 micro-kernels. Q and K are stored
// with each pair of columns swapped, V with each pair of rows swapped, P^T likewise per tile.
struct WidenedProducts {
  static Prepared Prepare(const ForwardArgs& a, std::int64_t /*ld_acc*/) {
    const Shape& s = a.shape;
    Prepared p = RoundQuery(a, s.d_v);
    const std::int64_t dk2 = p.args.shape.d_k, nkv2 = round_up(s.n_kv, 2);
    RoundRows(a.k, s.kv_batch_heads() * s.n_kv, s.d_k, p.k.data(), dk2, a.threads);
    for (std::int64_t h = 0; h < s.kv_batch_heads(); ++h) {
      float* vh = p.v.data() + h * nkv2 * s.d_v;
      RoundRows(a.v + h * s.n_kv * s.d_v, s.n_kv, s.d_v, vh, s.d_v, a.threads);
      std::fill(vh + s.n_kv * s.d_v, vh + nkv2 * s.d_v, 0.0f);  // an odd n_kv's padding row
    }
    for (const std::span<float> x : {p.q, p.k})
      for (std::size_t c = 0; c < x.size(); c += 2) std::swap(x[c], x[c + 1]);
    for (float* vh = p.v.data(); vh < p.v.data() + p.v.size(); vh += 2 * s.d_v)
      std::swap_ranges(vh, vh + s.d_v, vh + s.d_v);
    return p;
  }
  static KeyRange Begin(const ForwardArgs& a, const QueryBlock& blk, const BlockScratch& w) {
    return BeginUnscaled(a, blk, w);
  }
  static void Scores(const ForwardArgs& a, const QueryBlock& blk, std::int64_t key0,
                     std::int64_t nk, const BlockScratch& w) {
    const Shape& s = a.shape;
    const std::int64_t rows = round_up(s.n_kv, 2);
    const float* v = a.v + s.kv_head(blk.head) * rows * s.d_v;
    Fp32::Scores(a, blk, key0, nk, w, Fp32::NextRows(v, rows, key0, round_up(nk, 2), s.d_v));
    ScaleTile(nk, w);
  }
  static void Accumulate(const ForwardArgs& a, const QueryBlock& blk, std::int64_t key0,
                         std::int64_t nk, std::int64_t ld_acc, bool first, const BlockScratch& w) {
    const Shape& s = a.shape;
    RoundSwapRowPairs(w.scores, nk, kQueryBlock);
    const float* v = a.v + (s.kv_head(blk.head) * round_up(s.n_kv, 2) + key0) * s.d_v;
    const float* k = a.k + s.kv_head(blk.head) * s.n_kv * s.d_k;
    Fp32::AccumulateRows(v, s.d_v, round_up(nk, 2), ld_acc, first, w,
                         Fp32::NextRows(k, s.n_kv, key0 + nk, nk, s.d_k));
  }

 private:
  using Fp32 = Fp32Products<HwyLanes>;
};

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// Native products (bf16.hpp): K as words of column pairs, V as words of row pairs (ld_acc
// words a row), both converted from the call's fp32 inputs, the block's queries and each tile's
// P^T packed in place in their scratch (vcvtneps2bf16 and vcvtne2ps2bf16: RoundBits' rounding).
struct DotProducts {
  static_assert(kQueryBlock == kBf16Block && HwyLanes::kLanes == 16);
  static Prepared Prepare(const ForwardArgs& a, std::int64_t ld_acc) {
    const Shape& s = a.shape;
    Prepared p = RoundQuery(a, ld_acc);
    // K as rows of bf16 (vcvtneps2bf16), d_k rounded up to even: words of column pairs.
    const std::int64_t dk2 = p.args.shape.d_k, nkv2 = round_up(s.n_kv, 2);
    auto* k = reinterpret_cast<std::uint16_t*>(p.k.data());
#pragma omp parallel for num_threads(a.threads) schedule(static)
    for (std::int64_t r = 0; r < s.kv_batch_heads() * s.n_kv; ++r) {
      bf16_round_native(a.k + r * s.d_k, k + r * dk2, s.d_k);
      if (dk2 > s.d_k) k[r * dk2 + s.d_k] = 0;
    }
    // V as words of row pairs, each head's at the start of its nkv2 x ld_acc floats.
    constexpr std::int64_t kRows = 128;  // per task: an even count, so tasks split no pair
    const std::int64_t tasks = (s.n_kv + kRows - 1) / kRows;
    auto* v = reinterpret_cast<std::uint32_t*>(p.v.data());
#pragma omp parallel for collapse(2) num_threads(a.threads) schedule(static)
    for (std::int64_t h = 0; h < s.kv_batch_heads(); ++h)
      for (std::int64_t t = 0; t < tasks; ++t)
        bf16_pack_row_pairs(a.v + (h * s.n_kv + t * kRows) * s.d_v, s.d_v, s.d_v,
                            std::min(kRows, s.n_kv - t * kRows),
                            v + (h * nkv2 + t * kRows / 2) * ld_acc, ld_acc);
    return p;
  }
  static KeyRange Begin(const ForwardArgs& a, const QueryBlock& blk, const BlockScratch& w) {
    const KeyRange keys = BeginUnscaled(a, blk, w);
    bf16_pack_row_pairs(w.q_t, a.shape.d_k, kQueryBlock);
    return keys;
  }
  static void Scores(const ForwardArgs& a, const QueryBlock& blk, std::int64_t key0,
                     std::int64_t nk, const BlockScratch& w) {
    const Shape& s = a.shape;
    const std::int64_t pairs = s.d_k / 2;
    const auto* k =
        reinterpret_cast<const std::uint32_t*>(a.k) + (s.kv_head(blk.head) * s.n_kv + key0) * pairs;
    bf16_dot_scores(k, pairs, nk, reinterpret_cast<const std::uint32_t*>(w.q_t), pairs, w.q_scale,
                    w.scores);
  }
  static void Accumulate(const ForwardArgs& a, const QueryBlock& blk, std::int64_t key0,
                         std::int64_t nk, std::int64_t ld_acc, bool first, const BlockScratch& w) {
    const Shape& s = a.shape;
    const std::uint32_t* p = bf16_pack_row_pairs(w.scores, nk, kQueryBlock);
    const auto* v = reinterpret_cast<const std::uint32_t*>(a.v) +
                    (s.kv_head(blk.head) * round_up(s.n_kv, 2) + key0 / 2) * ld_acc;
    bf16_dot_rows({.a = p,
                   .pairs = round_up(nk, 2) / 2,
                   .b = v,
                   .ldb = ld_acc,
                   .c = w.acc,
                   .ldc = ld_acc,
                   .ld = ld_acc,
                   .init = first ? Bf16Product::Init::kZero : Bf16Product::Init::kScaled,
                   .row_scale = w.rescale});
  }
};
#endif

template <class Products>
void Bf16Forward(const ForwardArgs& a) {
  const std::int64_t ld_acc = round_up(a.shape.d_v, HwyLanes::kLanes);
  const Prepared p = Products::Prepare(a, ld_acc);
  for_each_query_block(p.args, bf16_key_tile(a.shape.n_kv), ld_acc,
                       AttendBlockFor<HwyLanes, Products>(a));
}

void Bf16WidenedForward(const ForwardArgs& a) { Bf16Forward<WidenedProducts>(a); }

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
void Bf16NativeForward(const ForwardArgs& a) { Bf16Forward<DotProducts>(a); }
#endif

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_targets.hpp"

namespace sdpa::detail {

HWY_EXPORT(Bf16WidenedForward);

namespace {
// The native forward compiled for `target`, null if that target has none.
ForwardFn native_forward(std::int64_t target) {
#if HWY_TARGETS & HWY_AVX3_DL
  if (target == HWY_AVX3_DL) return &N_AVX3_DL::Bf16NativeForward;
#endif
#if HWY_TARGETS & HWY_AVX3
  if (target == HWY_AVX3) return &N_AVX3::Bf16NativeForward;
#endif
  (void)target;
  return nullptr;
}
}  // namespace

// Forward: the inputs rounded (Q and K with d_k rounded up to even, V with n_kv rounded up to
// even in rows of up to d_v rounded up to whole vectors), and per thread the block's scratch.
double flash_bf16_workspace(const Shape& s, Pass pass, int threads) {
  if (pass == Pass::backward) return flash_bf16_backward_workspace_bytes(s, threads);
  Shape prepared = s;
  prepared.d_k = round_up(s.d_k, 2);
  const std::int64_t ld_v = round_up(s.d_v, kMaxLanes);
  const double inputs = double(prepared.q_elements() + prepared.k_elements()) +
                        double(s.kv_batch_heads() * round_up(s.n_kv, 2) * ld_v);
  const double scratch =
      double(threads) * double(scratch_floats(prepared, bf16_key_tile(s.n_kv), ld_v));
  return sizeof(float) * (inputs + scratch);
}

std::vector<Kernel> flash_bf16_kernels() {
  const char* what = "fused tiles in bf16: fp32 accumulation and softmax, P rounded to bf16";
  const auto targets = supported_targets(HWY_DISPATCH_TABLE(Bf16WidenedForward));
  auto entries = per_target_kernels("flash-bf16", std::string(what) + ", widened to fp32", targets,
                                    &flash_bf16_workspace);
  for (auto& k : entries) k.precision = "bf16";
  const ForwardFn native =
      bf16_native_available() ? native_forward(targets.front().target) : nullptr;
  // The best entry is the native one where the CPU has it.
  if (native) {
    put_native_first(entries, "avx512-bf16", std::string(what) + ", vdpbf16ps (avx512-bf16)",
                     native);
    // flash_backward.cpp: the same micro-kernels serve the backward's products.
    entries[0].backward = entries[1].backward = flash_bf16_native_backward(targets.front().target);
  }
  return entries;
}

}  // namespace sdpa::detail
#endif  // HWY_ONCE
