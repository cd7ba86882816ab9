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
#else
  // 16 registers: 6x2 tiles, 12 accumulators + 2 B vectors + 1 broadcast.
  static constexpr int kMrS = 6, kNvS = 2, kMrO = 6, kNvO = 2;
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
  static V ZeroIfNotFinite(V x) { return hn::IfThenElseZero(hn::IsFinite(x), x); }
  static V OneIfNotFinite(V x) { return hn::IfThenZeroElse(hn::IsFinite(x), Set(1.0f)); }
  // Highway's polynomial exp (contrib/math: max error 1 ULP over float32 [-FLT_MAX, +104]);
  // returns 0 below -104, so e^-inf = 0 as the masked scores need.
  static V Exp(V x) { return hn::Exp(D(), x); }
};

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SDPA_KERNELS_HWY_LANES_INL_H_
