// Rung 2: cache-blocked attention in plain scalar C++ (baseline -O3, no -march): the tiling of
// attention_tiles-inl.h with a scalar lanes policy. A block of query rows gets its scores over
// all visible keys (materialised, n_kv x kQueryBlock per thread), a lane-wise softmax, then
// O = P V, both products through the register-tile micro-kernel.
#include <cmath>
#include <vector>

#include "attention_tiles-inl.h"  // compiled for the baseline target only (no foreach_target)
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa::detail::HWY_NAMESPACE {
namespace {

// One float per "vector"; 3 x 3 register tiles: 9 accumulators, 3 values of B and one of A
// stay in the 16 scalar registers of x86-64 (4 x 4 spills and measured 20 % slower).
struct ScalarLanes {
  using V = float;
  static constexpr std::int64_t kLanes = 1;
  static constexpr int kMrS = 3, kNvS = 3, kMrO = 3, kNvO = 3;

  static V Zero() { return 0.0f; }
  static V Set(float x) { return x; }
  static V Load(const float* p) { return *p; }
  static void Store(V x, float* p) { *p = x; }
  static V Add(V x, V y) { return x + y; }
  static V Sub(V x, V y) { return x - y; }
  static V Mul(V x, V y) { return x * y; }
  static V MulAdd(V x, V y, V z) { return x * y + z; }
  static V Max(V x, V y) { return x > y ? x : y; }
  static V ZeroIfNotFinite(V x) { return std::isfinite(x) ? x : 0.0f; }
  static V OneIfNotFinite(V x) { return std::isfinite(x) ? 0.0f : 1.0f; }
  static V Exp(V x) { return std::exp(x); }
};

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
