// flash-kv-int8's steps of the decode path (attention_decode-inl.h), per Highway target: K and V
// read through Int8Rows, a row reader that carries the rows' scales (kv_int8.hpp's format), and
// the three overloads DecodeSplit reaches through it:
//   ScoreRows    Q rows quantised to int8 per row (scale Q, as packed by DecodeSplit), then
//                exact integer dot products (Int8Rows::scores: vpdpbusd or portable) times the
//                two rows' scales;
//   TileValues   the decode path's value rows for P V (ValueTile): each row's scale multiplied
//                into P, the rows read through Int8Values, whose ValueVector widens int8 alone;
//   WidenRows    the same for whole rows (P V when d_v is not whole vectors; prefill shapes).
//
// Per-target include guard (Highway's pattern): this file is compiled once per ISA target.
#if defined(SDPA_KERNELS_KV_INT8_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SDPA_KERNELS_KV_INT8_INL_H_
#undef SDPA_KERNELS_KV_INT8_INL_H_
#else
#define SDPA_KERNELS_KV_INT8_INL_H_
#endif

#include <algorithm>
#include <cstdint>

#include "decode_blocks.hpp"
#include "hwy/highway.h"
#include "hwy_lanes-inl.h"
#include "kv_int8.hpp"

static_assert(sdpa::detail::kDecodeKeyAlign % sdpa::detail::kInt8KeyBlock == 0);

HWY_BEFORE_NAMESPACE();
namespace sdpa::detail::HWY_NAMESPACE {

// Rows of K or V in the int8 format from one row on, as DecodeSplit addresses them: `+ n`
// advances by n elements of rows d wide, i.e. n / d rows of ld bytes (K: d4; V: d) and scales.
// DecodeKv::k and ::v point to one of these (KvRows in attention_decode-inl.h).
struct Int8Rows {
  static constexpr bool kScaledRows = true;
  const std::int8_t* data;
  const float* scale;
  std::int64_t d, ld;
  Int8ScoresFn scores;  // K: the dot products to use; V: null
  Int8Rows operator+(std::int64_t n) const {
    const std::int64_t rows = n / d;
    return {data + rows * ld, scale + rows, d, ld, scores};
  }
};

// L int8 elements at x as fp32 (exact): a sign extension and a conversion.
HWY_INLINE HwyLanes::V WidenInt8(const std::int8_t* x) {
  using D = HwyLanes::D;
  const hn::Rebind<std::int8_t, D> d8;
  const hn::Rebind<std::int32_t, D> d32;
  return hn::ConvertTo(D(), hn::PromoteTo(d32, hn::LoadU(d8, x)));
}

// L int8 elements at x as fp32, times scale: exact up to the one rounding of the product.
HWY_INLINE HwyLanes::V WidenScaled(const std::int8_t* x, HwyLanes::V scale) {
  return hn::Mul(scale, WidenInt8(x));
}

// dst[r][c] = scale[r] x src[r][c] in fp32 for c < cols, 0 for cols <= c < ld_dst, r < rows.
inline void WidenRows(const Int8Rows& src, std::int64_t rows, std::int64_t cols, std::int64_t,
                      float* dst, std::int64_t ld_dst) {
  constexpr std::int64_t L = HwyLanes::kLanes;
  for (std::int64_t r = 0; r < rows; ++r, dst += ld_dst) {
    const std::int8_t* x = src.data + r * src.ld;
    const float scale = src.scale[r];
    const auto vscale = hn::Set(HwyLanes::D(), scale);
    std::int64_t c = 0;
    for (; c + L <= cols; c += L) HwyLanes::Store(WidenScaled(x + c, vscale), dst + c);
    for (; c < cols; ++c) dst[c] = scale * float(x[c]);
    std::fill(dst + cols, dst + ld_dst, 0.0f);
  }
}

// Value rows of the format without their scales, as the decode path's ValueTile reads them once
// TileValues has multiplied each row's scale into P: a vector then widens in two instructions
// (sign extension, conversion) rather than three, for every row group that reads it, against
// one multiply per weight. p (s v) became (p s) v: one rounding at another place, within the
// same bound (tests/test_low_precision.cpp).
struct Int8Values {
  const std::int8_t* data;
  std::int64_t ld;
};

template <class P>
HWY_INLINE Int8Values TileValues(const Int8Rows& v, std::int64_t rows, std::int64_t nk,
                                 const DecodeScratch& w) {
  constexpr std::int64_t L = P::kLanes;
  for (std::int64_t i = 0; i < rows; ++i) {
    float* p = w.scores + i * w.tile;
    std::int64_t j = 0;
    for (; j + L <= nk; j += L) P::Store(P::Mul(P::Load(p + j), P::Load(v.scale + j)), p + j);
    for (; j < nk; ++j) p[j] *= v.scale[j];
  }
  return {v.data, v.ld};
}

template <class P>
HWY_INLINE typename P::V ValueVector(const Int8Values& v, std::int64_t, std::int64_t j,
                                     std::int64_t c) {
  return WidenInt8(v.data + j * v.ld + c * P::kLanes);
}

// A value row's element size and prefetch (ValueTile's), in this format.
constexpr std::int64_t ValueBytes(const Int8Values&) { return 1; }
HWY_INLINE void PrefetchValues(const Int8Values& v, std::int64_t, std::int64_t j, std::int64_t c0,
                               std::int64_t n) {
  PrefetchAhead(v.data + j * v.ld + c0, n);
}

// S [rows][w.tile] = (scale Q) K^T for keys [0, nk) of k: the block's packed rows w.q
// quantised per row into w.k_pack (int8, rows of d4) with their scales in w.dots, both free in
// this path (the fp32 path's key groups and partial sums), then k.scores.
template <class P>
void ScoreRows(const DecodeScratch& w, std::int64_t rows, const Int8Rows& k, std::int64_t d_k,
               std::int64_t nk) {
  // rows x d4 bytes fit in k_pack's kPartialAlign x ld_q floats (d4 <= ld_q), the rows'
  // scales in dots' kPartialAlign^2.
  static_assert(kDecodeRows <= kPartialAlign);
  auto* q = reinterpret_cast<std::int8_t*>(w.k_pack);
  for (std::int64_t i = 0; i < rows; ++i) {
    std::int8_t* qi = q + i * k.ld;
    w.dots[i] = quantise_row(w.q + i * w.ld_q, d_k, qi);
    std::fill(qi + d_k, qi + k.ld, std::int8_t{0});
  }
  k.scores(q, k.ld, w.dots, rows, k.data, k.scale, k.ld, nk, w.scores, w.tile);
}

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SDPA_KERNELS_KV_INT8_INL_H_
