// Per-ISA helpers of the Highway targets: the fp32 FMA peak loop that "% of peak" is measured
// against, and the vectorised exp and tanh of the SIMD rungs exposed for their accuracy tests.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "sdpa/kernels.hpp"

// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the rest.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd_targets.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy_lanes-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace sdpa::detail::HWY_NAMESPACE {

HWY_ALIGN float g_fma_sink[HwyLanes::kLanes];

// kChains independent FMA chains: enough to cover FMA latency x FMA ports (4 cycles x 2 on
// Zen 4/5 and Intel cores since Skylake needs 8) while staying in 16 registers. Each chain
// converges to add / (1 - mul) = 1, so no value overflows or goes subnormal. The chains are a
// parameter pack, not an array: SVE vectors are sizeless types, which arrays cannot hold.
template <std::size_t... I>
double FmaChainsOf(std::int64_t iterations, std::index_sequence<I...>) {
  const HwyLanes::V mul = HwyLanes::Set(0.999f), add = HwyLanes::Set(0.001f);
  [&](auto... acc) HWY_ATTR __attribute__((always_inline)) {
    for (std::int64_t it = 0; it < iterations; ++it) ((acc = HwyLanes::MulAdd(acc, mul, add)), ...);
    HwyLanes::V total = HwyLanes::Zero();
    ((total = HwyLanes::Add(total, acc)), ...);
    HwyLanes::Store(total, g_fma_sink);  // keeps the chains from being optimised away
  }
  (HwyLanes::Set(float(I))...);
  return double(iterations) * sizeof...(I) * HwyLanes::kLanes * 2.0;
}

double FmaChains(std::int64_t iterations) {
  return FmaChainsOf(iterations, std::make_index_sequence<12>());
}

// y = f(x) over an array, the tail through a padded vector.
template <class F>
HWY_INLINE void MapArray(const float* x, float* y, std::int64_t n, F f) {
  constexpr std::int64_t L = HwyLanes::kLanes;
  std::int64_t i = 0;
  for (; i + L <= n; i += L) HwyLanes::Store(f(HwyLanes::Load(x + i)), y + i);
  if (i < n) {
    float in[L] = {}, out[L];
    std::copy(x + i, x + n, in);
    HwyLanes::Store(f(HwyLanes::Load(in)), out);
    std::copy(out, out + (n - i), y + i);
  }
}

void ExpArray(const float* x, float* y, std::int64_t n) {
  MapArray(x, y, n, [](HwyLanes::V v) HWY_ATTR { return HwyLanes::Exp(v); });
}

void TanhArray(const float* x, float* y, std::int64_t n) {
  MapArray(x, y, n, [](HwyLanes::V v) HWY_ATTR { return HwyLanes::Tanh(v); });
}

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "hwy_targets.hpp"

namespace sdpa {
namespace detail {
HWY_EXPORT(FmaChains);
HWY_EXPORT(ExpArray);
HWY_EXPORT(TanhArray);
}  // namespace detail

const std::vector<SimdTarget>& simd_targets() {
  static const std::vector<SimdTarget> targets = [] {
    std::vector<SimdTarget> out;
    const auto fma = detail::supported_targets(HWY_DISPATCH_TABLE(detail::FmaChains));
    const auto exp = detail::supported_targets(HWY_DISPATCH_TABLE(detail::ExpArray));
    const auto tanh = detail::supported_targets(HWY_DISPATCH_TABLE(detail::TanhArray));
    for (std::size_t i = 0; i < fma.size(); ++i)
      out.push_back({fma[i].isa, fma[i].fn, exp[i].fn, tanh[i].fn});
    return out;
  }();
  return targets;
}

const SimdTarget* find_simd_target(std::string_view isa) {
  for (const auto& t : simd_targets())
    if (t.isa == isa) return &t;
  return nullptr;
}

double measure_fma_peak(const SimdTarget& target, int threads, double seconds) {
  using Clock = std::chrono::steady_clock;
  // Calibrate one thread's run to about seconds / 5, then keep the best of five timed runs.
  std::int64_t iterations = 1 << 16;
  for (;;) {
    const auto t0 = Clock::now();
    target.fma_chains(iterations);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (dt > seconds / 20 || iterations > (std::int64_t(1) << 40)) {
      iterations = std::int64_t(double(iterations) * (seconds / 5) / std::max(dt, 1e-9)) + 1;
      break;
    }
    iterations *= 4;
  }
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    double flops = 0;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
    flops += target.fma_chains(iterations);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, flops / dt * 1e-9);
  }
  return best;
}

}  // namespace sdpa
#endif  // HWY_ONCE
