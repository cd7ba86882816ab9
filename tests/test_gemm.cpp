// The register-tile GEMM every tiled kernel runs (RunGemm, kernels/attention_tiles-inl.h), tested
// alone for each lanes policy: ScalarLanes (blocked) and HwyLanes on every Highway target this
// CPU runs, each with both of its tile shapes (S^T's and O's). Sizes step over the edges of the
// register tile (MR rows, NV vectors), of the depth chunk (kDepthChunk) and of b_cols (rows of B
// that are not whole vectors, padded), so a tiling bug names the tiling instead of failing
// blocked, simd and flash at once.
//
// Tolerance: C = init + sum_p a_ip b_pj in fp32, each of the k steps rounding at most twice (the
// product and the sum, once with an FMA) and a scaled initial value once more, so
// |c - c_exact| <= gamma_{2k+1} (|scale c0| + sum_p |a_ip b_pj|), gamma_n = n u / (1 - n u),
// u = 2^-24 (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.1).

// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the rest.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "test_gemm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy_lanes-inl.h"
#include "attention_tiles-inl.h"
// clang-format on

#ifndef SDPA_TEST_GEMM_ONCE_
#define SDPA_TEST_GEMM_ONCE_
#include <cstdint>

// One product, independent of the target: RunGemm's Gemm, built per target from it.
struct GemmCase {
  std::int64_t m, n_vec, k, a_row, a_col, ldb, b_cols, ldc;
  const float *a, *b, *row_scale;
  float *b_pack, *c;
  int init;  // 0, 1, 2: Gemm::Init kZero, kLoad, kLoadScaled
};

// A lanes policy's vector width and tile shapes.
struct Tiling {
  std::int64_t lanes;
  int mr_s, nv_s, mr_o, nv_o;
};
#endif  // SDPA_TEST_GEMM_ONCE_

HWY_BEFORE_NAMESPACE();
namespace sdpa::detail::HWY_NAMESPACE {

template <class P, int MR, int NV>
void Run(const GemmCase& c) {
  Gemm g;
  g.m = c.m, g.n_vec = c.n_vec, g.k = c.k;
  g.a = c.a, g.a_row = c.a_row, g.a_col = c.a_col;
  g.b = c.b, g.ldb = c.ldb, g.b_cols = c.b_cols, g.b_pack = c.b_pack;
  g.c = c.c, g.ldc = c.ldc;
  g.init = Gemm::Init(c.init);
  g.row_scale = c.row_scale;
  RunGemm<P, MR, NV>(g);
}

// shape 0: the tile of S^T (kMrS x kNvS), 1: the tile of O (kMrO x kNvO).
void RunHwy(const GemmCase& c, int shape) {
  if (shape == 0)
    Run<HwyLanes, HwyLanes::kMrS, HwyLanes::kNvS>(c);
  else
    Run<HwyLanes, HwyLanes::kMrO, HwyLanes::kNvO>(c);
}

Tiling HwyTiling() {
  return {HwyLanes::kLanes, HwyLanes::kMrS, HwyLanes::kNvS, HwyLanes::kMrO, HwyLanes::kNvO};
}

}  // namespace sdpa::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "hwy_targets.hpp"
#include "run_report.hpp"
#include "scalar_lanes.hpp"

namespace sdpa::detail {

HWY_EXPORT(RunHwy);
HWY_EXPORT(HwyTiling);

namespace {

// ScalarLanes in the baseline target's namespace, as blocked.cpp compiles it.
void RunScalar(const GemmCase& c, int shape) {
  if (shape == 0)
    HWY_NAMESPACE::Run<ScalarLanes, ScalarLanes::kMrS, ScalarLanes::kNvS>(c);
  else
    HWY_NAMESPACE::Run<ScalarLanes, ScalarLanes::kMrO, ScalarLanes::kNvO>(c);
}

struct Policy {
  std::string name;
  Tiling tiling;
  std::function<void(const GemmCase&, int shape)> run;
};

std::vector<Policy> policies() {
  std::vector<Policy> out = {{"ScalarLanes",
                              {ScalarLanes::kLanes, ScalarLanes::kMrS, ScalarLanes::kNvS,
                               ScalarLanes::kMrO, ScalarLanes::kNvO},
                              &RunScalar}};
  const auto tilings = supported_targets(HWY_DISPATCH_TABLE(HwyTiling));
  const auto runs = supported_targets(HWY_DISPATCH_TABLE(RunHwy));
  for (std::size_t t = 0; t < runs.size(); ++t)
    out.push_back({"HwyLanes@" + runs[t].isa, tilings[t].fn(), runs[t].fn});
  return out;
}

// Values at an edge of `size`: 1, size - 1, size, size + 1 and 2 size + 1 (those >= 1, once).
std::vector<std::int64_t> around(std::int64_t size) {
  std::vector<std::int64_t> out;
  for (std::int64_t x : {std::int64_t(1), size - 1, size, size + 1, 2 * size + 1})
    if (x >= 1 && std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  return out;
}

const char* const kInit[] = {"kZero", "kLoad", "kLoadScaled"};

// Runs one product through `run` and checks every element of C (m rows of n_vec vectors)
// against the product in double; returns the first element out of tolerance, "" if none.
std::string check_product(const Policy& p, int shape, std::int64_t m, std::int64_t n_vec,
                          std::int64_t k, std::int64_t b_cols, int init, bool a_column_major,
                          std::mt19937& rng) {
  std::normal_distribution<float> normal;
  const std::int64_t width = n_vec * p.tiling.lanes;
  // Rows of B padded in memory beyond what the product may read, when they are whole vectors.
  const std::int64_t ldb = b_cols < width ? b_cols + 3 : width + 5, ldc = width + 7;
  std::vector<float> a(m * k), b(k * ldb), c(m * ldc), scale(m), pack(kDepthChunk * width);
  for (auto* x : {&a, &b, &c, &scale})
    for (auto& e : *x) e = normal(rng);
  const std::vector<float> c0 = c;
  const GemmCase g{.m = m,
                   .n_vec = n_vec,
                   .k = k,
                   .a_row = a_column_major ? 1 : k,
                   .a_col = a_column_major ? m : 1,
                   .ldb = ldb,
                   .b_cols = b_cols,
                   .ldc = ldc,
                   .a = a.data(),
                   .b = b.data(),
                   .row_scale = scale.data(),
                   .b_pack = pack.data(),
                   .c = c.data(),
                   .init = init};
  p.run(g, shape);
  const double u = 0x1p-24, steps = double(2 * k + 1), gamma = steps * u / (1 - steps * u);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < width; ++j) {
      const double start = init == 0 ? 0.0 : (init == 2 ? scale[i] : 1.0) * double(c0[i * ldc + j]);
      double exact = start, magnitude = std::abs(start);
      for (std::int64_t q = 0; j < b_cols && q < k; ++q) {  // B is zero past b_cols
        const double term = double(a[i * g.a_row + q * g.a_col]) * double(b[q * ldb + j]);
        exact += term, magnitude += std::abs(term);
      }
      const double error = std::abs(double(c[i * ldc + j]) - exact);
      if (!(error <= gamma * magnitude))
        return "C(" + std::to_string(i) + ", " + std::to_string(j) +
               ") = " + std::to_string(c[i * ldc + j]) + ", expected " + std::to_string(exact) +
               " within " + std::to_string(gamma * magnitude);
    }
  return "";
}

}  // namespace

TEST_CASE("RunGemm per lanes policy and tile shape, at the edges of MR, NV, kDepthChunk, b_cols") {
  // The targets compiled in that this CPU cannot run (e.g. AVX-512's 32-register tiles on AVX2).
  for (std::int64_t left = HWY_TARGETS & ~hwy::SupportedTargets(); left != 0; left &= left - 1)
    note_not_run("RunGemm on HwyLanes@" + sdpa::detail::isa_name(left & -left) +
                 " (its register tiles): this CPU lacks " + sdpa::detail::isa_name(left & -left));
  std::mt19937 rng(11);
  for (const Policy& p : policies()) {
    for (int shape : {0, 1}) {
      const int mr = shape == 0 ? p.tiling.mr_s : p.tiling.mr_o;
      const int nv = shape == 0 ? p.tiling.nv_s : p.tiling.nv_o;
      int variant = 0;  // rotates the initialisation and A's layout over the sizes
      for (std::int64_t m : around(mr))
        for (std::int64_t n_vec : around(nv))
          for (std::int64_t k : around(kDepthChunk)) {
            const std::int64_t width = n_vec * p.tiling.lanes;
            // Whole vectors (B read in place) and not (rows copied into b_pack and padded).
            for (std::int64_t b_cols : {width, std::max<std::int64_t>(1, width - 1)}) {
              const int init = variant % 3;
              const bool a_column_major = variant % 2 == 1;
              ++variant;
              const std::string tiling =
                  p.name + ", tile " + std::to_string(mr) + " x " + std::to_string(nv) +
                  " vectors of " + std::to_string(p.tiling.lanes) + ": m " + std::to_string(m) +
                  ", n_vec " + std::to_string(n_vec) + ", k " + std::to_string(k) +
                  " (depth chunk " + std::to_string(kDepthChunk) + "), b_cols " +
                  std::to_string(b_cols) + ", init " + kInit[init] + ", A " +
                  (a_column_major ? "column" : "row") + "-major";
              CAPTURE(tiling);
              CHECK(check_product(p, shape, m, n_vec, k, b_cols, init, a_column_major, rng) == "");
            }
          }
    }
  }
}

}  // namespace sdpa::detail
#endif  // HWY_ONCE
