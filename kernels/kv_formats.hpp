// K/V storage formats of flash-kv-f16 and flash-kv-bf16 (flash_kv.cpp): K and V held in 16 bits,
// as CPU inference engines keep their KV cache, and widened to fp32 where they are read (the
// widening is exact, so every target computes on the same fp32 values). Scalar conversions
// here; the vector widening is attention_decode-inl.h's WidenRows. Internal to sdpa_kernels.
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bf16.hpp"
#include "sdpa/aligned.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa::detail {

// IEEE binary16 bits of x, rounded to nearest, ties to even: past the largest finite (65504)
// to infinity, below the smallest subnormal (2^-24) to zero, NaN to a quiet NaN of its sign.
inline std::uint16_t f16_bits(float x) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  const std::uint16_t sign = std::uint16_t((b >> 16) & 0x8000u);
  const std::uint32_t magnitude = b & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504 (or is inf)
  if (magnitude < 0x38800000u) {                        // below 2^-14: subnormal or zero
    // The value in units of 2^-24, rounded to nearest even by adding half a unit to the
    // significand scaled down to those units.
    const std::uint32_t exponent = magnitude >> 23;
    if (exponent < 102) return sign;  // below 2^-25: rounds to zero
    const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // 14 to 24
    const std::uint32_t kept = significand >> shift;
    const std::uint32_t rest = significand & ((1u << shift) - 1), half = 1u << (shift - 1);
    return sign | std::uint16_t(kept + (rest > half || (rest == half && (kept & 1u))));
  }
  // Normal: rebias the exponent and round the 13 dropped bits to nearest even; a carry out of
  // the significand moves the exponent up, as it should.
  const std::uint32_t rebiased = magnitude - 0x38000000u;  // exponent - 112 in place
  return sign | std::uint16_t((rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13);
}

// The fp32 value of binary16 bits: exact (every binary16 value is an fp32 value).
inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0)  // subnormal or zero: mantissa x 2^-24, exact in fp32
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(float(mantissa) * 0x1p-24f));
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// bf16 storage: the upper half of bf16_round_bits (bf16.hpp: nearest even, subnormals to zero
// as vcvtneps2bf16 does, NaN quiet); widening is a shift.
inline std::uint16_t bf16_bits(float x) { return std::uint16_t(bf16_round_bits(x) >> 16); }
inline float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(std::uint32_t(h) << 16); }

enum class KvFormat { kF16, kBf16 };

// K and V of one shape as the bits of a 16-bit format, laid out as ForwardArgs' k and v.
struct StoredKv16 : StoredKv {
  KvFormat format;
  Shape shape;
  AlignedVector<std::uint16_t> k, v;
};

// Whether a cache stored for shape x serves a call of shape y: the same K and V (n_q may differ).
inline bool same_kv_shape(const Shape& x, const Shape& y) {
  return x.batch_heads == y.batch_heads && x.group == y.group && x.n_kv == y.n_kv &&
         x.d_k == y.d_k && x.d_v == y.d_v;
}

// a.k and a.v rounded to `format` (on a.threads threads).
std::unique_ptr<StoredKv> store_kv16(const ForwardArgs& a, KvFormat format);

// The call's stored K and V: a.stored_kv, which must be a StoredKv16 of this format and shape
// (std::invalid_argument if not: a cache of another kernel or shape would read out of bounds),
// or, without one, a.k and a.v stored into `own`.
const StoredKv16& stored_kv16(const ForwardArgs& a, KvFormat format,
                              std::unique_ptr<StoredKv>& own);

// The kernels' widening of binary16 to fp32 on each Highway target this CPU runs (F16C's
// vcvtph2ps, aarch64's fcvtl, or bit by bit where neither exists), for its tests.
using WidenF16Fn = void (*)(const std::uint16_t* x, float* y, std::int64_t n);
std::vector<std::pair<std::string, WidenF16Fn>> f16_widenings();

}  // namespace sdpa::detail
