// Rung 2: cache-blocked attention in plain scalar C++ (baseline -O3, no -march): the tiling of
// attention_tiles-inl.h with a scalar lanes policy. A block of query rows gets its scores over
// all visible keys (materialised, n_kv x kQueryBlock per thread), a lane-wise softmax, then
// O = P V, both products through the register-tile micro-kernel.
#include <vector>

#include "attention_tiles-inl.h"  // compiled for the baseline target only (no foreach_target)
#include "registry_entries.hpp"
#include "scalar_lanes.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa::detail::HWY_NAMESPACE {
namespace {

void blocked_forward(const ForwardArgs& a) { TiledForward<ScalarLanes>(a, a.shape.n_kv); }

// Per thread, a block's scores over all n_kv keys and its scratch (query_blocks.hpp).
double blocked_workspace(const Shape& s, Pass, int threads) {
  return tiled_workspace_bytes(s, s.n_kv, ScalarLanes::kLanes, threads);
}

}  // namespace
}  // namespace sdpa::detail::HWY_NAMESPACE

namespace sdpa {

std::vector<Kernel> detail::blocked_kernels() {
  return {{.name = "blocked",
           .family = "blocked",
           .isa = "scalar",
           .description = "cache-blocked scalar C++: register-tile micro-kernel, block of scores",
           .forward = &detail::HWY_NAMESPACE::blocked_forward,
           .workspace = &detail::HWY_NAMESPACE::blocked_workspace}};
}

}  // namespace sdpa
