// Rung 4: fused attention. The simd rung's code with a small key tile: each block of queries
// walks the keys tile by tile with an online softmax (running max and sum, earlier output
// rescaled when the max grows), so no N x N matrix exists and scratch is O(tile) per thread.
// Writes the row lse; probes are computed online in the same pass. Shapes with few query rows
// per head (decode) take their own path: rows of a group packed, keys split across threads
// (attention_decode-inl.h).
#include <vector>

#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the rest.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flash.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy_lanes-inl.h"
#include "attention_tiles-inl.h"
#include "attention_decode-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace sdpa::detail::HWY_NAMESPACE {

void FlashForward(const ForwardArgs& a) {
  if (is_decode_shape(a.shape))
    DecodeForward<HwyLanes>(a);
  else
    HwyTiledForward(a, kFlashKeys);
}

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_targets.hpp"

namespace sdpa::detail {

HWY_EXPORT(FlashForward);

// Forward: per thread, one key tile of scores and the block's scratch, whatever n_kv; on
// decode shapes, the splits' partials besides (decode_blocks.hpp).
double flash_workspace(const Shape& s, Pass pass, int threads) {
  if (pass == Pass::backward) return flash_backward_workspace_bytes(s, threads);
  if (is_decode_shape(s)) return decode_workspace_bytes(s, threads);
  return tiled_workspace_bytes(s, kFlashKeys, kMaxLanes, threads);
}

std::vector<Kernel> flash_kernels() {
  auto entries =
      per_target_kernels("flash", "fused tiles, online softmax, O(tile) scratch, lse",
                         supported_targets(HWY_DISPATCH_TABLE(FlashForward)), &flash_workspace);
  for (auto& k : entries) k.backward = flash_backward_fn(k.isa);  // flash_backward.cpp
  return entries;
}

}  // namespace sdpa::detail
#endif  // HWY_ONCE
