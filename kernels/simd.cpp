// Rung 3: blocked's tiling, now with Highway micro-kernels (one vector of queries or outputs per
// accumulator, FMA) and a vectorised exp. Compiled once per target (foreach_target), chosen at
// run time; one registry entry per target this CPU runs. Still materialises a block's scores
// over all keys, like blocked.
#include <vector>

#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the rest.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy_lanes-inl.h"
#include "attention_tiles-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace sdpa::detail::HWY_NAMESPACE {

void HwyTiledForward(const ForwardArgs& a, std::int64_t key_tile) {
  TiledForward<HwyLanes>(a, key_tile);
}

void SimdForward(const ForwardArgs& a) { HwyTiledForward(a, a.shape.n_kv); }

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_targets.hpp"

namespace sdpa::detail {

HWY_EXPORT(SimdForward);

// Per thread, a block's scores over all n_kv keys and its scratch (query_blocks.hpp).
double simd_workspace(const Shape& s, Pass, int threads) {
  return tiled_workspace_bytes(s, s.n_kv, kMaxLanes, threads);
}

std::vector<Kernel> simd_kernels() {
  return per_target_kernels("simd", "blocked with Highway FMA micro-kernels and vector exp",
                            supported_targets(HWY_DISPATCH_TABLE(SimdForward)), &simd_workspace);
}

}  // namespace sdpa::detail
#endif  // HWY_ONCE
