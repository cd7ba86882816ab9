// Every kernel variant against the fp64 reference on shapes that break lazy code.
//
// Tolerances: tests/attention_catalogue.hpp derives them (fp32: u = 2^-24, the first-order error
// of each quantity from the fp64 quantities of the same inputs, times kSafety = 2).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attention_catalogue.hpp"
#include "kernels_under_test.hpp"
#include "run_report.hpp"
#include "sdpa/kernels.hpp"

namespace {

using sdpa::Shape;

#if defined(SDPA_SANITIZE) || defined(SDPA_EMULATED)
constexpr std::int64_t kLarge = 200;  // sizes shrink under the sanitizers and qemu, checks do not
#else
constexpr std::int64_t kLarge = 1000;
#endif

using catalogue::Case;
using catalogue::describe;
using catalogue::Expected;
using catalogue::Inputs;
using catalogue::random_inputs;
using catalogue::widen;

struct Problem : Inputs {
  Case c;
  float scale = 1;
  Expected want;
};

Problem make_problem(const Case& c) {
  Problem pr;
  static_cast<Inputs&>(pr) = random_inputs(c.shape, c.input_std, c.seed);
  pr.c = c;
  pr.scale = c.scale_value();
  pr.want = catalogue::expected(c, pr);
  return pr;
}

// Counts values outside their tolerance and reports the worst one, relative to its tolerance.
struct Comparison {
  std::int64_t bad = 0, worst_at = -1;
  double worst_ratio = 0;
  void add(std::int64_t at, double got, double want, double tol) {
    const bool same_inf = std::isinf(got) && std::isinf(want) && (got > 0) == (want > 0);
    const double err = same_inf ? 0.0 : std::abs(got - want);
    const double ratio = err == 0 ? 0.0 : (tol > 0 ? err / tol : INFINITY);
    if (!(ratio <= 1)) ++bad;  // NaN counts as bad
    if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst_at = at;
  }
};

WorstRatio g_worst_out_ratio{"|o - o_ref| / tolerance of the fp32 kernels"};

void check_kernel(const sdpa::Kernel& kern, const Problem& pr, const Expected& w) {
  const Shape& s = pr.c.shape;
  INFO(kern.name, " on ", describe(pr.c));
  std::vector<float> out(s.out_elements(), NAN), lse(s.rows(), NAN);
  sdpa::ForwardArgs args{.shape = s,
                         .q = pr.q.data(),
                         .k = pr.k.data(),
                         .v = pr.v.data(),
                         .out = out.data(),
                         .lse = lse.data(),
                         .scale = pr.scale,
                         .mask = pr.c.mask(),
                         .score_mod = pr.c.mod(),
                         .threads = pr.c.threads};
  kern.forward(args);

  Comparison o, l;
  for (std::int64_t x = 0; x < s.out_elements(); ++x) o.add(x, out[x], w.out[x], w.out_tol[x]);
  for (std::int64_t r = 0; r < s.rows(); ++r) l.add(r, lse[r], w.lse[r], w.lse_tol[r]);
  g_worst_out_ratio.add(o.worst_ratio);
  CHECK_MESSAGE(o.bad == 0, "out: ", o.bad, " outside tolerance; worst err/tol ", o.worst_ratio,
                " at ", o.worst_at);
  CHECK_MESSAGE(l.bad == 0, "lse: ", l.bad, " outside tolerance; worst err/tol ", l.worst_ratio,
                " at row ", l.worst_at);

  // Again with a probe sink and no lse: same outputs to the bit, probes against fp64 ones.
  std::vector<float> out2(s.out_elements(), NAN);
  sdpa::RowProbes probes(s.rows());
  args.out = out2.data();
  args.lse = nullptr;
  args.probes = &probes;
  kern.forward(args);
  CHECK_MESSAGE(std::equal(out.begin(), out.end(), out2.begin(),
                           [](float x, float y) { return x == y || (x != x && y != y); }),
                "a probe sink changed the output");
  Comparison h, mw, s1, s2, q2, q3;
  std::int64_t nonfinite = 0;
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    h.add(r, probes.entropy[r], w.probes.entropy[r], w.entropy_tol[r]);
    mw.add(r, probes.max_weight[r], w.probes.max_weight[r], w.max_weight_tol[r]);
    s1.add(r, probes.score_sum[r], w.probes.score_sum[r], w.sum_tol[r]);
    s2.add(r, probes.score_sumsq[r], w.probes.score_sumsq[r], w.sumsq_tol[r]);
    q2.add(r, probes.sum_p2[r], w.probes.sum_p2[r], w.p2_tol[r]);
    q3.add(r, probes.sum_p3[r], w.probes.sum_p3[r], w.p3_tol[r]);
    nonfinite += probes.nonfinite[r];
  }
  CHECK_MESSAGE(h.bad == 0, "entropy: worst err/tol ", h.worst_ratio, " at row ", h.worst_at);
  CHECK_MESSAGE(mw.bad == 0, "max weight: worst err/tol ", mw.worst_ratio, " at row ", mw.worst_at);
  CHECK_MESSAGE(s1.bad == 0, "score sum: worst err/tol ", s1.worst_ratio, " at row ", s1.worst_at);
  CHECK_MESSAGE(s2.bad == 0, "score sumsq: worst err/tol ", s2.worst_ratio, " at row ",
                s2.worst_at);
  CHECK_MESSAGE(q2.bad == 0, "sum p^2: worst err/tol ", q2.worst_ratio, " at row ", q2.worst_at);
  CHECK_MESSAGE(q3.bad == 0, "sum p^3: worst err/tol ", q3.worst_ratio, " at row ", q3.worst_at);
  CHECK_MESSAGE(nonfinite == 0, "non-finite values counted in a finite problem");
}

void check_all_kernels(const Case& c) {
  const Problem pr = make_problem(c);
  for (const sdpa::Kernel& kern : kernels_under_test()) {
    if (kern.precision != "fp32") continue;  // their own bounds: test_low_precision.cpp
    if (!kern.row_statistics) continue;      // O only (ggml): test_ggml.cpp
    if (kern.unstable_softmax && c.large_magnitude()) continue;  // it overflows by design
    check_kernel(kern, pr, pr.want);
  }
}

}  // namespace

TEST_CASE("the registry lists the reference first") {
  REQUIRE(!sdpa::kernel_registry().empty());
  CHECK(sdpa::kernel_registry().front().name == "reference");
}

TEST_CASE("the registry has every rung, a best entry per SIMD family and unique names") {
  for (const char* name :
       {"reference", "naive", "naive-unstable", "blocked", "simd", "flash", "eigen", "blas"})
    CHECK_MESSAGE(sdpa::find_kernel(name) != nullptr, name);
  auto names = sdpa::kernel_names();
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
  for (const auto& t : sdpa::simd_targets()) {
    if (t.isa == "scalar") continue;
    CHECK_MESSAGE(sdpa::find_kernel("simd@" + t.isa) != nullptr, t.isa);
    CHECK_MESSAGE(sdpa::find_kernel("flash@" + t.isa) != nullptr, t.isa);
  }
}

// The emulated arm64 runs (tests/CMakeLists.txt) set SDPA_EXPECT_ISA with the CPU they give qemu,
// so a run meant for SVE cannot pass on NEON alone; elsewhere nothing says what to expect.
TEST_CASE("the best SIMD target is the one the test run asks for" *
          run_if(std::getenv("SDPA_EXPECT_ISA") != nullptr,
                 "the best SIMD target against SDPA_EXPECT_ISA: unset (the arm64 runs set it)")) {
  const char* expected = std::getenv("SDPA_EXPECT_ISA");
  REQUIRE(!sdpa::simd_targets().empty());
  CHECK(sdpa::simd_targets().front().isa == expected);
  CHECK(sdpa::find_kernel("flash")->isa == expected);
  CHECK(sdpa::find_kernel(std::string("flash@") + expected) != nullptr);
}

namespace {

// Attention from its formula, sharing no code with kernels/reference.cpp or kernels/mask.cpp
// (the oracle every other check here compares with): per query row in long double, one pass
// over the keys it sees for the largest logit, a second for the weighted sums. Row i sits at key
// position p = i + n_kv - n_q and sees key j when every one of the case's masks lets it:
// causal, j <= p or j < prefix; a window, p - left <= j <= p + right; chunks, j in p's chunk
// (floor(j / chunk) = floor(p / chunk): a position before the keys is in no chunk of keys);
// documents, j in p's document (a position before the keys is in none). Its logit is
// cap(scale t_i q.k_j) - slope |p - j| with cap(x) = c tanh(x / c), and a sink joins the
// denominator without a value. A row that sees nothing: output 0, lse the sink (or -inf).
// Head h reads K/V head h / group, and the per-head lists entry h % size.
struct Direct {
  std::vector<long double> out, lse, mass;  // mass: sum_j p_j |v_jc|, per output element
  // Per row: max_j of E_j (tests/attention_catalogue.hpp, in fp64's units) and n + 4 + |lse|
  // (the weights may come from exp(z_j - lse)).
  std::vector<long double> e_max;
};

bool direct_sees(const Case& c, std::int64_t i, std::int64_t j) {
  const Shape& s = c.shape;
  const std::int64_t p = i + s.n_kv - s.n_q;
  const auto floor_div = [](std::int64_t x, std::int64_t y) {
    return x >= 0 ? x / y : -((-x + y - 1) / y);
  };
  if (c.causal && !(j <= p || j < c.prefix)) return false;
  if (c.window_left >= 0 && j < p - c.window_left) return false;
  if (c.window_right >= 0 && j > p + c.window_right) return false;
  if (c.chunk > 0 && floor_div(p, c.chunk) != floor_div(j, c.chunk)) return false;
  if (!c.documents.empty()) {
    if (p < 0) return false;
    std::int64_t doc_p = 0, doc_j = 0;
    for (std::size_t d = 0; d < c.documents.size(); ++d) {
      if (c.documents[d] <= p) doc_p = std::int64_t(d);
      if (c.documents[d] <= j) doc_j = std::int64_t(d);
    }
    if (doc_p != doc_j) return false;
  }
  return true;
}

Direct direct_attention(const Case& c, const Inputs& in) {
  const Shape& s = c.shape;
  const long double scale = c.scale_value();
  Direct d;
  d.out.assign(std::size_t(s.out_elements()), 0);
  d.mass.assign(std::size_t(s.out_elements()), 0);
  d.lse.assign(std::size_t(s.rows()), -INFINITY);
  d.e_max.assign(std::size_t(s.rows()), 0);
  for (std::int64_t h = 0; h < s.batch_heads; ++h)
    for (std::int64_t i = 0; i < s.n_q; ++i) {
      const std::int64_t r = h * s.n_q + i, kvh = h / s.group, pos = i + s.n_kv - s.n_q;
      const long double sink =
          c.sinks.empty() ? -INFINITY : (long double)c.sinks[std::size_t(h) % c.sinks.size()];
      const long double slope =
          c.alibi_slopes.empty() ? 0 : c.alibi_slopes[std::size_t(h) % c.alibi_slopes.size()];
      const long double row_scale =
          c.temperature.empty() ? scale : scale * (long double)c.temperature[std::size_t(i)];
      std::vector<std::int64_t> keys;
      for (std::int64_t j = 0; j < s.n_kv; ++j)
        if (direct_sees(c, i, j)) keys.push_back(j);
      // The logits, then the sink as one more outcome (key -1, value 0).
      std::vector<long double> z, f;
      for (const std::int64_t j : keys) {
        long double dot = 0, abs = 0;
        for (std::int64_t x = 0; x < s.d_k; ++x) {
          const long double y =
              (long double)in.q[r * s.d_k + x] * in.k[(kvh * s.n_kv + j) * s.d_k + x];
          dot += y, abs += std::fabs(y);
        }
        const long double sc = row_scale * dot, a = std::fabs(row_scale) * abs;
        const long double capped = c.softcap > 0 ? c.softcap * std::tanh(sc / c.softcap) : sc;
        const long double t = c.softcap > 0 ? 1 - std::pow(std::tanh(sc / c.softcap), 2) : 1;
        const long double bias = -slope * std::fabs((long double)(pos - j));
        z.push_back(capped + bias);
        long double fj = t * (s.d_k + 2) * a;  // the header's F_j
        if (!c.temperature.empty()) fj += t * (a + std::fabs(sc));
        if (c.softcap > 0) fj += t * std::fabs(sc) + 6 * std::fabs(capped);
        if (slope != 0) fj += 2 * std::fabs(bias) + std::fabs(capped + bias);
        f.push_back(fj);
      }
      if (std::isfinite(sink)) z.push_back(sink), f.push_back(0);
      if (keys.empty()) {
        d.lse[std::size_t(r)] = sink;
        continue;
      }
      const long double m = *std::max_element(z.begin(), z.end());
      const long double range = m - *std::min_element(z.begin(), z.end());
      long double l = 0;
      for (const long double x : z) l += std::exp(x - m);
      const long double lse = d.lse[std::size_t(r)] = m + std::log(l);
      const long double n = (long double)z.size();
      for (std::size_t j = 0; j < z.size(); ++j) {
        const long double e = f[j] + (m - z[j]) + std::fabs(z[j]) + range + 4;
        d.e_max[std::size_t(r)] = std::max(d.e_max[std::size_t(r)], e + n + 4 + std::fabs(lse));
      }
      for (std::int64_t x = 0; x < s.d_v; ++x) {
        long double o = 0, mass = 0;
        for (std::size_t j = 0; j < keys.size(); ++j) {
          const long double p = std::exp(z[j] - m) / l;
          const long double v = in.v[(kvh * s.n_kv + keys[j]) * s.d_v + x];
          o += p * v, mass += p * std::fabs(v);
        }
        d.out[std::size_t(r * s.d_v + x)] = o;
        d.mass[std::size_t(r * s.d_v + x)] = mass;
      }
    }
  return d;
}

}  // namespace

// The reference is the same code on every CPU of a build: an SDPA_ONLY_ISA run, for that ISA's
// entries (tests/kernels_under_test.hpp), leaves it to the build's unfiltered run.
TEST_CASE("the fp64 reference and the reference kernel are attention's formula in long double" *
          run_if(std::getenv("SDPA_ONLY_ISA") == nullptr,
                 "the fp64 reference in long double: the same code on every CPU, checked by the "
                 "run without SDPA_ONLY_ISA")) {
  // fp64 against long double: the forward's bounds (tests/attention_catalogue.hpp) with fp64's
  // unit roundoff u64 = 2^-53 and every E_j at its largest, E (Direct::e_max): an output within
  // 2 u64 (4 E + 2 n + 8) sum_j p_j |v_jc| (p-weighted |v_jc - o_c| <= twice that sum), lse
  // within 2 u64 E. The reference kernel rounds its fp64 result to fp32: half an fp32 ULP more
  // (|x| 2^-24). Plain shapes, then every case of the catalogue (masks and modifiers).
  std::vector<Case> cases = {
      {.shape = {.batch_heads = 2, .n_q = 5, .n_kv = 7, .d_k = 3, .d_v = 4}},
      {.shape = {.batch_heads = 2, .n_q = 5, .n_kv = 7, .d_k = 3, .d_v = 4}, .causal = true},
      {.shape = {.batch_heads = 4, .n_q = 9, .n_kv = 4, .d_k = 16, .d_v = 8, .group = 2},
       .causal = true},
      {.shape = {.batch_heads = 1, .n_q = 65, .n_kv = 65, .d_k = 64, .d_v = 64},
       .causal = true,
       .input_std = 3},
      {.shape = {.batch_heads = 4, .n_q = 1, .n_kv = 300, .d_k = 32, .d_v = 17, .group = 4},
       .input_std = 2},
  };
  std::uint32_t seed = 900;
  for (Case& c : cases) c.seed = seed++;
  for (const Case& c : catalogue::cases()) cases.push_back(c);
  constexpr long double kU64 = 0x1p-53L;
  long double worst64 = 0;
  for (const Case& c : cases) {
    const Shape& s = c.shape;
    const Inputs in = random_inputs(s, c.input_std, c.seed);
    const float scale = c.scale_value();
    INFO(describe(c));
    const Direct want = direct_attention(c, in);
    const auto fp64 = sdpa::reference_attention(s, widen(in.q), widen(in.k), widen(in.v), scale,
                                                c.mask(), c.mod());
    std::vector<float> out(std::size_t(s.out_elements()), NAN), lse(std::size_t(s.rows()), NAN);
    sdpa::find_kernel("reference")
        ->forward({.shape = s,
                   .q = in.q.data(),
                   .k = in.k.data(),
                   .v = in.v.data(),
                   .out = out.data(),
                   .lse = lse.data(),
                   .scale = scale,
                   .mask = c.mask(),
                   .score_mod = c.mod()});
    std::vector<long double> vmax(std::size_t(s.batch_heads), 0);  // max |v| a head reads
    for (std::int64_t h = 0; h < s.batch_heads; ++h)
      for (std::int64_t x = 0; x < s.n_kv * s.d_v; ++x)
        vmax[std::size_t(h)] = std::max<long double>(
            vmax[std::size_t(h)], std::fabs(in.v[s.kv_head(h) * s.n_kv * s.d_v + x]));
    std::int64_t bad64 = 0, bad32 = 0;
    for (std::int64_t r = 0; r < s.rows(); ++r) {
      const long double e = want.e_max[std::size_t(r)];
      const long double w = want.lse[std::size_t(r)];
      if (e == 0) {  // a row that sees no key: output 0, lse the sink's (or -inf), exactly
        bad64 += !(fp64.lse[std::size_t(r)] == double(w));
        bad32 += !(lse[std::size_t(r)] == float(w));
        for (std::int64_t c2 = 0; c2 < s.d_v; ++c2) {
          bad64 += fp64.out[std::size_t(r * s.d_v + c2)] != 0;
          bad32 += out[std::size_t(r * s.d_v + c2)] != 0;
        }
        continue;
      }
      const long double n = s.n_kv + 1;
      const long double lse_tol = 2 * kU64 * e;
      worst64 = std::max(worst64, std::fabs(fp64.lse[std::size_t(r)] - w) / lse_tol);
      bad64 += !(std::fabs(fp64.lse[std::size_t(r)] - w) <= lse_tol);
      bad32 += !(std::fabs(lse[std::size_t(r)] - w) <= lse_tol + 0x1p-24L * std::fabs(w));
      for (std::int64_t c2 = 0; c2 < s.d_v; ++c2) {
        const std::size_t x = std::size_t(r * s.d_v + c2);
        // Weights below fp64's (fp32's) smallest normal number lose their digits: 2^-1022
        // (2^-126) |v_jc| each at most, and an fp32 output below it is a subnormal, 2^-150 off.
        const long double tol = 2 * kU64 * (4 * e + 2 * n + 8) * want.mass[x] +
                                n * 0x1p-1022L * vmax[std::size_t(r / s.n_q)];
        const long double tol32 = n * 0x1p-126L * vmax[std::size_t(r / s.n_q)] + 0x1p-150L;
        worst64 = std::max(worst64, tol > 0 ? std::fabs(fp64.out[x] - want.out[x]) / tol : 0);
        bad64 += !(std::fabs(fp64.out[x] - want.out[x]) <= tol);
        bad32 +=
            !(std::fabs(out[x] - want.out[x]) <= tol + tol32 + 0x1p-24L * std::fabs(want.out[x]));
      }
    }
    CHECK_MESSAGE(bad64 == 0, "reference_attention: ", bad64, " values off; worst err/tol ",
                  double(worst64));
    CHECK_MESSAGE(bad32 == 0, "the reference kernel: ", bad32, " values off");
  }
  MESSAGE("reference_attention against long double: worst err/tol ", double(worst64));
}

TEST_CASE("every kernel matches the fp64 reference on the catalogue of masks and modifiers") {
  // Every entry that does not refuse a case is checked within its precision's bound
  // (tests/attention_catalogue.hpp). What is not checked is listed as NOT RUN:
  //  - refusals: ggml's, of a temperature (ggml has none) and of slopes no max_bias gives;
  //  - ggml's O-only entries (no lse, no probes): test_ggml.cpp checks them;
  //  - naive-unstable where logits or a sink pass exp's range: it overflows by design;
  //  - a rounding precision on a case whose logits it cannot resolve (first-order bound > 1/2).
  std::map<std::string, int> refused;
  std::int64_t checked = 0;
  const auto cases = catalogue::cases();
  for (const Case& c : cases) {
    const Problem pr = make_problem(c);
    REQUIRE_MESSAGE(sdpa::mask_problem(c.shape, c.mask(), c.mod()).empty(), describe(c));
    std::map<const catalogue::Rounding*, Expected> bounds;
    for (const sdpa::Kernel& kern : kernels_under_test()) {
      const std::string why = kern.refusal(c.shape, c.mask(), c.mod());
      if (!why.empty()) {
        ++refused[kern.name + ": " + why];
        continue;
      }
      const catalogue::Rounding* rounding = catalogue::rounding_of(kern.precision);
      if (!kern.row_statistics || rounding == nullptr) {
        note_not_run(kern.name + " (" + kern.precision +
                     ") on the catalogue: checked by its own tests (O only, or its own bound)");
        continue;
      }
      if (kern.unstable_softmax && c.large_magnitude()) {
        ++refused[kern.name + ": overflows by design at large logits or sinks"];
        continue;
      }
      auto it = bounds.find(rounding);
      if (it == bounds.end())
        it = bounds.emplace(rounding, catalogue::expected(c, pr, *rounding)).first;
      if (it->second.worst_first_order > 0.5) {
        ++refused[kern.name + ": " + kern.precision + " cannot resolve the logits of a case"];
        continue;
      }
      check_kernel(kern, pr, it->second);
      ++checked;
    }
  }
  for (const auto& [what, n] : refused)
    note_not_run(what + " (" + std::to_string(n) + " of " + std::to_string(cases.size()) +
                 " catalogue cases)");
  MESSAGE("catalogue: ", cases.size(), " cases, ", checked, " kernel x case checks");
  CHECK(checked > 0);
}

TEST_CASE("every kernel matches the fp64 reference on small and odd sizes") {
  // d_v differs from d_k in most rows of this table.
  const std::int64_t dims[][2] = {{1, 8}, {8, 1}, {64, 64}, {80, 17}, {128, 96}, {256, 256}};
  std::uint32_t seed = 10;
  for (std::int64_t n : {1, 3, 17, 63, 65, 127})
    for (const auto& d : dims)
      for (bool causal : {false, true})
        check_all_kernels(
            {.shape = {.batch_heads = 2, .n_q = n, .n_kv = n, .d_k = d[0], .d_v = d[1]},
             .causal = causal,
             .seed = seed++});
}

TEST_CASE("every kernel matches the fp64 reference when n_q != n_kv") {
  // With causal and n_q > n_kv, the first n_q - n_kv rows see no key at all.
  const std::int64_t sizes[][2] = {{1, kLarge}, {kLarge, 1}, {17, 65},
                                   {65, 17},    {127, 63},   {63, 127}};
  std::uint32_t seed = 100;
  for (const auto& n : sizes)
    for (bool causal : {false, true})
      check_all_kernels(
          {.shape = {.batch_heads = 3, .n_q = n[0], .n_kv = n[1], .d_k = 64, .d_v = 40},
           .causal = causal,
           .seed = seed++});
}

TEST_CASE("every kernel matches the fp64 reference at n = 1000") {
  check_all_kernels(
      {.shape = {.n_q = kLarge, .n_kv = kLarge, .d_k = 64, .d_v = 64}, .seed = 200, .threads = 2});
  check_all_kernels({.shape = {.n_q = kLarge, .n_kv = kLarge, .d_k = 80, .d_v = 48},
                     .causal = true,
                     .seed = 201,
                     .threads = 2});
}

TEST_CASE("every kernel matches the fp64 reference unscaled and at large magnitude") {
  std::uint32_t seed = 300;
  for (bool causal : {false, true}) {
    // scale 1: score std sqrt(d_k) = 8, the regime the unscaled study needs.
    check_all_kernels({.shape = {.batch_heads = 2, .n_q = 127, .n_kv = 127, .d_k = 64, .d_v = 64},
                       .causal = causal,
                       .scale = 1,
                       .seed = seed++});
    // std 10, scale 1: scores of std ~ 100 * sqrt(d_k); exp(s) overflows without max subtraction.
    check_all_kernels({.shape = {.batch_heads = 2, .n_q = 65, .n_kv = 300, .d_k = 128, .d_v = 64},
                       .causal = causal,
                       .scale = 1,
                       .input_std = 10,
                       .seed = seed++});
  }
}

TEST_CASE("every kernel matches the fp64 reference on grouped-query and decode shapes") {
  // Query heads share K/V heads in groups (MHA: group 1; MQA: all heads one group), and few
  // query rows per head take flash's decode path: the group's rows packed into one block (at
  // most 16 rows: 4 heads x 5 rows make two blocks of 2 heads), keys in splits of whole
  // 256-key units, at most 16 splits, each in tiles of as many units as the block's scores fit
  // in 4096 floats (1024 keys at 4 rows, 256 at 16), merged in order. With causal masking
  // aligned to the end, a decode row sees the whole cache and the rows before it; with
  // n_q > n_kv the first rows see nothing.
  struct Grouped {
    std::int64_t batch, heads_q, heads_kv, n_q, n_kv, d_k, d_v;
  };
  const Grouped shapes[] = {
      {1, 6, 1, 1, 1, 64, 40},       // MQA, one key
      {1, 8, 1, 1, 1000, 64, 64},    // MQA 8/1, n_kv not a multiple of the 256-key split
      {1, 8, 2, 1, 1000, 64, 64},    // GQA 8/2
      {1, 8, 8, 1, 300, 128, 128},   // MHA decode
      {1, 8, 2, 1, 500, 128, 128},   // GQA 8/2 at d = 128: 4 rows over whole key rows (AVX2)
      {1, 6, 2, 1, 270, 128, 96},    // GQA 6/2: 3 rows, the pass's remainder
      {3, 4, 4, 1, 333, 32, 48},     // MHA 4/4, batch 3, d_k != d_v
      {2, 8, 1, 2, 777, 40, 24},     // batch 2 of MQA 8/1: 16 rows per group, one full block
      {1, 8, 2, 3, 700, 80, 48},     // speculative decode: 3 new tokens, 12 rows per block
      {1, 8, 2, 5, 513, 32, 24},     // 20 rows per group: two blocks of 10
      {1, 7, 1, 1, 260, 72, 40},     // a group of 7 (28 / 4 heads); d not whole vectors
      {1, 2, 2, 16, 40, 16, 8},      // 16 rows, the most of a decode block
      {1, 16, 4, 4, 2000, 128, 64},  // 16 rows, P V along the lanes: tiles and chunks cut short
      {1, 4, 1, 4, 600, 160, 32},    // 16 rows, d_k deeper than one depth chunk of the Gemm
      {1, 4, 2, 1, 700, 256, 256},   // d = 256, 2 rows: key and value rows read whole (AVX-512)
      {1, 4, 2, 2, 700, 256, 256},   // the same at 4 rows: two groups of the wide value tile
      {1, 4, 2, 5, 2, 8, 3},         // n_q > n_kv: rows 0..2 see no key
      {1, 2, 1, 2, 9000, 1, 8},      // 4 rows: 12 splits of 768 (one tile each), the last short
      {1, 8, 1, 1, 9000, 16, 8},     // 8 rows (queries along the lanes): tiles of 512 and 256
      {1, 7, 1, 1, 9000, 16, 8},     // 7 rows (keys along the lanes): tiles of 512 and 256
      {2, 6, 2, 100, 150, 32, 24},   // prefill with groups (query blocks of one head), batch 2
      {1, 4, 1, 60, 61, 48, 48},     // prefill, MQA
  };
  if (sdpa::find_kernel("flash@avx512") == nullptr)
    note_not_run("the d = 256 decode shapes on AVX-512's whole key and value rows: needs avx512");
  std::uint32_t seed = 500;
  for (const Grouped& g : shapes)
    for (bool causal : {false, true})
      check_all_kernels({.shape = {.batch_heads = g.batch * g.heads_q,
                                   .n_q = g.n_q,
                                   .n_kv = g.n_kv,
                                   .d_k = g.d_k,
                                   .d_v = g.d_v,
                                   .group = g.heads_q / g.heads_kv},
                         .causal = causal,
                         .seed = seed++,
                         .threads = 2});
}

TEST_CASE("fully masked rows give output 0, lse -inf and empty probes") {
  // n_q = 5, n_kv = 2, causal: rows 0..2 see no key; rows 3 and 4 see one and two.
  const Shape s{.batch_heads = 2, .n_q = 5, .n_kv = 2, .d_k = 8, .d_v = 3};
  const auto [q, k, v] = random_inputs(s, 1, 7);
  for (const sdpa::Kernel& kern : kernels_under_test()) {
    if (!kern.row_statistics) continue;  // O only (ggml): test_ggml.cpp checks its zeros
    INFO(kern.name);
    std::vector<float> out(s.out_elements(), NAN), lse(s.rows(), NAN);
    sdpa::RowProbes probes(s.rows());
    kern.forward({.shape = s,
                  .q = q.data(),
                  .k = k.data(),
                  .v = v.data(),
                  .out = out.data(),
                  .lse = lse.data(),
                  .scale = 0.5f,
                  .mask = {.causal = true},
                  .threads = 1,
                  .probes = &probes});
    for (std::int64_t r = 0; r < s.rows(); ++r) {
      if (r % s.n_q >= 3) continue;
      for (std::int64_t c = 0; c < s.d_v; ++c) CHECK(out[r * s.d_v + c] == 0.0f);
      CHECK(lse[r] == -INFINITY);
      CHECK(probes.entropy[r] == 0.0);
      CHECK(probes.max_weight[r] == 0.0);
      CHECK(probes.score_sum[r] == 0.0);
      CHECK(probes.nonfinite[r] == 0);
    }
    // A row that sees exactly one key copies its value with weight 1 and entropy 0.
    CHECK(probes.max_weight[3] == doctest::Approx(1.0));
    CHECK(probes.entropy[3] == doctest::Approx(0.0));
  }
}

TEST_CASE("scores that overflow fp32 give a non-finite output, not an empty row") {
  // q.k past fp32's range: the row is not fully masked, so its output must not read as one
  // (0 with lse -inf); callers (attend) detect the overflow from the non-finite output. Decode
  // (n_q = 3: flash's split path) and prefill (n_q = 60) shapes.
  for (const std::int64_t n_q : {3, 60}) {
    const Shape s{.batch_heads = 2, .n_q = n_q, .n_kv = 300, .d_k = 4, .d_v = 2, .group = 2};
    std::vector<float> q(s.q_elements()), k(s.k_elements()), v(s.v_elements(), 1.0f);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = 0.5f * float(1 + i % 3);
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = 1e38f * float(1 + i % 3);
    for (const sdpa::Kernel& kern : kernels_under_test()) {
      if (kern.fp64) continue;                         // the oracle computes in double: no overflow
      if (!kern.refusal(s, {}, {}).empty()) continue;  // a block format's row length
      INFO(kern.name, " n_q=", n_q);
      std::vector<float> out(s.out_elements()), lse(s.rows());
      kern.forward({.shape = s,
                    .q = q.data(),
                    .k = k.data(),
                    .v = v.data(),
                    .out = out.data(),
                    .lse = kern.row_statistics ? lse.data() : nullptr,
                    .scale = 0.5f,
                    .threads = 2});
      CHECK(std::none_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); }));
    }
  }
}

TEST_CASE("the tiled rungs give the same bits on any thread count") {
  // Prefill, prefill with groups, and decode shapes whose splits outnumber the threads or not.
  const Shape shapes[] = {
      {.batch_heads = 3, .n_q = 100, .n_kv = 150, .d_k = 32, .d_v = 24},
      {.batch_heads = 4, .n_q = 70, .n_kv = 90, .d_k = 16, .d_v = 8, .group = 2},
      {.batch_heads = 8, .n_q = 1, .n_kv = 2000, .d_k = 64, .d_v = 32, .group = 4},
      {.batch_heads = 3, .n_q = 4, .n_kv = 300, .d_k = 40, .d_v = 24, .group = 3},
      // 16 rows per block (4 heads x 4 queries), P V along the query lanes
      {.batch_heads = 8, .n_q = 4, .n_kv = 1500, .d_k = 64, .d_v = 64, .group = 4},
      // MQA 8/1 in a batch of 2: 14 splits of 768 keys (tiles of 512 and 256), the last short
      {.batch_heads = 16, .n_q = 1, .n_kv = 10000, .d_k = 32, .d_v = 16, .group = 8}};
  for (const Shape& s : shapes) {
    const auto [q, k, v] = random_inputs(s, 1, 9);
    for (const sdpa::Kernel& kern : kernels_under_test()) {
      // OpenBLAS and Eigen choose their own splits and make no such promise.
      if (!kern.same_bits_on_any_threads) continue;
      INFO(kern.name, " bh=", s.batch_heads, " group=", s.group, " n_q=", s.n_q);
      struct Run {
        std::vector<float> out, lse;
        sdpa::RowProbes probes;
      };
      std::vector<Run> runs;
      for (int threads : {1, 2, 3}) {
        Run r{std::vector<float>(s.out_elements()), std::vector<float>(s.rows()),
              sdpa::RowProbes(s.rows())};
        kern.forward({.shape = s,
                      .q = q.data(),
                      .k = k.data(),
                      .v = v.data(),
                      .out = r.out.data(),
                      .lse = r.lse.data(),
                      .scale = 0.2f,
                      .mask = {.causal = true},
                      .threads = threads,
                      .probes = &r.probes});
        runs.push_back(std::move(r));
      }
      for (std::size_t t = 1; t < runs.size(); ++t) {
        CAPTURE(t + 1);
        CHECK(runs[t].out == runs[0].out);
        CHECK(runs[t].lse == runs[0].lse);
        CHECK(runs[t].probes.entropy == runs[0].probes.entropy);
        CHECK(runs[t].probes.sum_p2 == runs[0].probes.sum_p2);
        CHECK(runs[t].probes.score_sumsq == runs[0].probes.score_sumsq);
      }
    }
  }
}

TEST_CASE(
    "every kernel that promises it gives the same bits on any thread count on the catalogue") {
  // Masks that start late and every modifier: skipped tiles and splits, sinks in the combine.
  for (const Case& c : catalogue::cases()) {
    const Shape& s = c.shape;
    const auto [q, k, v] = random_inputs(s, c.input_std, c.seed);
    for (const sdpa::Kernel& kern : kernels_under_test()) {
      if (!kern.same_bits_on_any_threads || !kern.row_statistics ||
          !kern.refusal(s, c.mask(), c.mod()).empty())
        continue;  // refusals: listed by the catalogue's test above
      INFO(kern.name, " on ", describe(c));
      std::vector<float> runs[3];
      for (int threads : {1, 2, 3}) {
        std::vector<float> out(s.out_elements()), lse(s.rows());
        sdpa::RowProbes probes(s.rows());
        kern.forward({.shape = s,
                      .q = q.data(),
                      .k = k.data(),
                      .v = v.data(),
                      .out = out.data(),
                      .lse = lse.data(),
                      .scale = c.scale_value(),
                      .mask = c.mask(),
                      .score_mod = c.mod(),
                      .threads = threads,
                      .probes = &probes});
        out.insert(out.end(), lse.begin(), lse.end());
        for (const double x : probes.entropy) out.push_back(float(x));
        for (const double x : probes.sum_p2) out.push_back(float(x));
        runs[threads - 1] = std::move(out);
      }
      CHECK(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(float)) == 0);
      CHECK(std::memcmp(runs[0].data(), runs[2].data(), runs[0].size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("a grouped shape and its heads repeated per query head give the same attention") {
  // GQA is MHA with each K/V head repeated over its group's query heads: the reference on the
  // repeated tensors is an independent oracle for the indexing of K/V heads.
  const Shape grouped{.batch_heads = 6, .n_q = 3, .n_kv = 20, .d_k = 8, .d_v = 5, .group = 3};
  Shape repeated = grouped;
  repeated.group = 1;
  const auto [q, k, v] = random_inputs(grouped, 1, 11);
  std::vector<double> k_rep, v_rep;
  for (std::int64_t h = 0; h < grouped.batch_heads; ++h) {
    const std::int64_t kv = grouped.kv_head(h);
    k_rep.insert(k_rep.end(), k.begin() + kv * 20 * 8, k.begin() + (kv + 1) * 20 * 8);
    v_rep.insert(v_rep.end(), v.begin() + kv * 20 * 5, v.begin() + (kv + 1) * 20 * 5);
  }
  const auto want =
      sdpa::reference_attention(repeated, widen(q), k_rep, v_rep, 0.3, sdpa::Mask{.causal = true});
  const auto got = sdpa::reference_attention(grouped, widen(q), widen(k), widen(v), 0.3,
                                             sdpa::Mask{.causal = true});
  CHECK(got.out == want.out);
  CHECK(got.lse == want.lse);
}

TEST_CASE("shapes: grouped heads need batch_heads a multiple of the group") {
  CHECK(Shape{.batch_heads = 8, .group = 4}.valid());
  CHECK(Shape{.batch_heads = 8, .group = 4}.kv_batch_heads() == 2);
  CHECK(Shape{.batch_heads = 8, .group = 4}.kv_head(5) == 1);
  CHECK_FALSE(Shape{.batch_heads = 8, .group = 3}.valid());
  CHECK_FALSE(Shape{.batch_heads = 8, .group = 0}.valid());
  CHECK_FALSE(Shape{.batch_heads = 8, .n_kv = 0}.valid());
}

TEST_CASE("workspace: decode partials and the peers' group scores are counted") {
  // flash on a decode shape: one partial output row of d_v floats per split and query row, beyond
  // the per-thread scratch. With 32 or more blocks a block has one split, and the scratch does
  // not depend on the number of heads, so 128 more query heads take 128 more rows at least.
  const auto fwd = sdpa::Pass::forward;
  const auto flash_decode = [&](std::int64_t heads) {
    const Shape s{
        .batch_heads = heads, .n_q = 1, .n_kv = 16384, .d_k = 128, .d_v = 128, .group = 4};
    return sdpa::find_kernel("flash")->workspace_bytes(s, fwd, 2);
  };
  CHECK(flash_decode(256) - flash_decode(128) >= 4.0 * 128 * 128);
  const Shape decode{
      .batch_heads = 32, .n_q = 1, .n_kv = 16384, .d_k = 128, .d_v = 128, .group = 4};
  // The peers' scores: one K/V head's stacked rows (group x n_q) of n_kv at a time.
  CHECK(sdpa::find_kernel("eigen")->workspace_bytes(decode, fwd, 2) >= 4.0 * 4 * 16384);
  CHECK(sdpa::find_kernel("blas")->workspace_bytes(decode, fwd, 2) >= 4.0 * 4 * 16384);
}

namespace {

// The largest ULP error of a vectorised function over x, as Highway counts it: how many fp32
// values lie between the result and the correctly rounded one (of one sign, so their bit
// patterns order like their magnitudes); and where it is.
std::pair<std::int64_t, float> max_ulp_error(void (*f)(const float*, float*, std::int64_t),
                                             const std::vector<float>& x, double (*exact)(double)) {
  std::vector<float> y(x.size());
  f(x.data(), y.data(), std::int64_t(x.size()));
  std::pair<std::int64_t, float> worst{0, 0.0f};
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float rounded = float(exact(double(x[i])));
    const std::int64_t err = std::abs(std::int64_t(std::bit_cast<std::int32_t>(y[i])) -
                                      std::bit_cast<std::int32_t>(rounded));
    if (err > worst.first) worst = {err, x[i]};
  }
  return worst;
}

}  // namespace

TEST_CASE("the vectorised exp is within its documented accuracy over softmax's range") {
  // Softmax evaluates e^x for x = s - max <= 0; below about -87.3 the result is subnormal and
  // its relative accuracy does not matter. Highway documents Exp to 1 ULP; measured on an
  // AMD Zen 5 over 2^22 evenly spaced points of [-87.3, 0] and 2^20 log-spaced points in
  // [-1, -2^-20]: max 1 ULP (see the MESSAGE). The bound allows that and no more.
  constexpr std::int64_t kMaxUlp = 1;
  std::vector<float> x;
  const int even = 1 << 22, logspaced = 1 << 20;
  for (int i = 0; i <= even; ++i) x.push_back(float(-87.3 * i / even));
  for (int i = 0; i < logspaced; ++i) x.push_back(-float(std::exp2(-20.0 * i / logspaced)));
  for (const auto& t : sdpa::simd_targets()) {
    const auto [worst, at] = max_ulp_error(t.exp, x, [](double v) { return std::exp(v); });
    MESSAGE("exp on ", t.isa, ": max error ", worst, " ULP (at x = ", at, ")");
    CHECK(worst <= kMaxUlp);
  }
}

TEST_CASE("the soft-cap's vectorised tanh is within its documented accuracy") {
  // The soft-cap evaluates tanh(s / c) for any score: 2^21 evenly spaced points of [-10, 10]
  // (past 9, tanh rounds to +-1) and 2^19 log-spaced magnitudes in [2^-24, 1] of each sign,
  // where tanh x ~ x asks for relative accuracy. Exp's 1 ULP in e^{2|x|} - 1, the quotient's
  // rounding and its reciprocal's (a Newton step from x86's estimate, a division elsewhere)
  // add up to a few ULP: measured 5 at most on SSE4, AVX2, AVX-512, NEON and SVE (MESSAGE).
  constexpr std::int64_t kMaxUlp = 6;
  std::vector<float> x;
  const int even = 1 << 21, logspaced = 1 << 19;
  for (int i = -even / 2; i <= even / 2; ++i) x.push_back(float(20.0 * i / even));
  for (int i = 0; i < logspaced; ++i)
    for (const float sign : {1.0f, -1.0f})
      x.push_back(sign * float(std::exp2(-24.0 * i / logspaced)));
  for (const auto& t : sdpa::simd_targets()) {
    const auto [worst, at] = max_ulp_error(t.tanh, x, [](double v) { return std::tanh(v); });
    MESSAGE("tanh on ", t.isa, ": max error ", worst, " ULP (at x = ", at, ")");
    CHECK(worst <= kMaxUlp);
  }
}

namespace {

// This test program's own code, kernels included (the release build links them in), as
// `objdump -d` prints it (names demangled); empty without objdump.
std::string own_disassembly() {
  // The path, not /proc/self/exe: in objdump's process that names objdump.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  REQUIRE(self.find('\'') == std::string::npos);
  const std::string command = "objdump -d --no-show-raw-insn -C '" + self + "' 2>/dev/null";
  std::string text;
  if (FILE* p = popen(command.c_str(), "r")) {
    std::vector<char> buffer(1 << 16);
    for (std::size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), p)) > 0;)
      text.append(buffer.data(), n);
    pclose(p);
  }
  return text;
}

// The build whose code the prefetch check reads: x86-64, optimised, the kernels in the test
// program (the sanitize preset links them as a shared library, at -O1), and objdump.
bool prefetch_check_applies() {
#if defined(__x86_64__) && defined(__OPTIMIZE__) && !defined(SDPA_SANITIZE)
  return std::system("command -v objdump >/dev/null 2>&1") == 0;
#else
  return false;
#endif
}

// The functions built to prefetch: the decode GEMM's register tiles (MicroTile<..., true>), the
// decode passes over K (ScoreRows; int8 keys' in the x86 dots they call: part_scores,
// block_scores) and over V (ValueTile, AccumulateValues, ChunkStrips<..., true>). Not AVX2's
// prefill products: their RunGemm is also the decode's, which never requests a next operand.
// GCC's out-of-line .cold parts and lambdas are not the functions themselves.
bool built_to_prefetch(std::string_view function) {
  const auto has = [&](std::string_view part) { return function.find(part) != function.npos; };
  if (function.ends_with("[clone .cold]") || has("{lambda")) return false;
  return ((has("::MicroTile<") || has("::ChunkStrips<")) && has(", true>(")) ||
         has("::ValueTile<") || has("::AccumulateValues<") || has("::part_scores<") ||
         has("::block_scores<") || (has("::ScoreRows<") && !has("Int8Rows"));
}

}  // namespace

// A prefetch changes no result, so no other test sees one go: from 78869f3 GCC deleted the calls
// of an ordinary inline prefetch_to_l2 from every Highway target's code, and the 4-query decode
// step ran 2.3x slower (docs/perf-log/2026-11-30-prefetch-calls-deleted.md). Each function built
// to prefetch must hold a prefetcht1, in its own code or in the MicroTileOf it calls or jumps to
// (GCC may leave MicroTile a jump to a clone).
TEST_CASE("every function built to prefetch holds its prefetch instruction" *
          run_if(prefetch_check_applies(),
                 "the kernels' prefetch instructions: needs x86-64, "
                 "objdump and an optimised build with the kernels linked in")) {
  struct Code {
    bool prefetches = false;
    std::vector<std::string> bodies;  // the MicroTileOf functions it calls or jumps to
  };
  std::map<std::string, Code> functions;
  Code* code = nullptr;
  std::istringstream lines(own_disassembly());
  for (std::string line; std::getline(lines, line);) {
    const std::size_t name = line.find('<');
    if (name != std::string::npos && line.ends_with(">:")) {  // "<address> <function>:"
      code = &functions[line.substr(name + 1, line.size() - name - 3)];
    } else if (code && line.find("prefetcht1") != std::string::npos) {
      code->prefetches = true;
    } else if (code && name != std::string::npos && line.ends_with(">") &&
               line.find("::MicroTileOf<") != std::string::npos) {
      std::string callee = line.substr(name + 1, line.size() - name - 2);
      if (callee.ends_with("@plt")) callee.resize(callee.size() - 4);
      code->bodies.push_back(callee);
    }
  }
  int checked = 0;
  for (const auto& [function, own] : functions) {
    if (!built_to_prefetch(function)) continue;
    ++checked;
    const bool prefetches =
        own.prefetches || std::any_of(own.bodies.begin(), own.bodies.end(), [&](const auto& b) {
          const auto body = functions.find(b);
          return body != functions.end() && body->second.prefetches;
        });
    CHECK_MESSAGE(prefetches, function, " has no prefetcht1");
  }
  MESSAGE(checked, " functions built to prefetch disassembled");
  CHECK(checked > 0);
}
