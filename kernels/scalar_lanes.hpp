// ScalarLanes: the lanes policy of attention_tiles-inl.h in plain scalar C++, for the blocked
// rung (and the micro-kernel test). Plain C++, so it lives outside Highway's per-target
// namespaces.
#pragma once

#include <cmath>
#include <cstdint>

namespace sdpa::detail {

// One float per "vector"; 3 x 3 register tiles: 9 accumulators, 3 values of B and one of A
// stay in the 16 scalar registers of x86-64 (4 x 4 spills, and measured slower:
// docs/perf-log/2026-11-24-scalar-tiles.md).
struct ScalarLanes {
  using V = float;
  static constexpr std::int64_t kLanes = 1;
  static constexpr int kMrS = 3, kNvS = 3, kMrO = 3, kNvO = 3;
  static constexpr int kDepthUnroll = 1;        // MicroTileOf's depth loop as written
  static constexpr bool kPrefetchNext = false;  // Gemm's `next` unread

  static V Zero() { return 0.0f; }
  static V Set(float x) { return x; }
  static V Load(const float* p) { return *p; }
  static void Store(V x, float* p) { *p = x; }
  static V Add(V x, V y) { return x + y; }
  static V Sub(V x, V y) { return x - y; }
  static V Mul(V x, V y) { return x * y; }
  static V MulAdd(V x, V y, V z) { return x * y + z; }
  static V Max(V x, V y) { return x > y ? x : y; }
  static V Abs(V x) { return std::fabs(x); }
  static V Tanh(V x) { return std::tanh(x); }
  static V ZeroIfNotFinite(V x) { return std::isfinite(x) ? x : 0.0f; }
  static V OneIfNotFinite(V x) { return std::isfinite(x) ? 0.0f : 1.0f; }
  static V Exp(V x) { return std::exp(x); }
};

}  // namespace sdpa::detail
