// The fused kernels' decode path (kernels/attention_decode-inl.h: few query rows per K/V head)
// under every mask and score modifier, against the fp64 oracle (kernels/reference.cpp). flash
// runs fp32 throughout; flash-kv-f16 and -bf16 run fp32 arithmetic on K and V rounded to their
// format, so they are held to the same bound against the oracle of the rounded K and V.
// flash-kv-int8 rounds Q, K and V (test_low_precision.cpp bounds it): here it is held to what
// is exact whatever the rounding (the sink and empty rows, keys outside every row's range never
// read, the same bits on any thread count).
//
// The bound is test_kernels.cpp's first-order bound of fp32 attention (see its header), per row
// over the logits z_j the oracle computes (sdpa/mask.hpp's order), in units of u = 2^-24:
//   E_j = cap'(s_j) ((d_k + 2) A_j + |s_j|)  the scaled score's error through the soft-cap's
//                                            slope (and the rounding of s_j / c)
//       + 12 |cap(s_j)|                      c tanh(s / c): Highway's tanh (<= 4 ulp), times c
//       + 2 |bias_j|                         ALiBi's bias, added by one multiply-add
//       + |z_j - m| + |z_j| + R + 4          the exponent's argument, the rescales, exp
// and the sink as one more outcome with value 0 and E = |sink - m| + |sink| + R + 4.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bf16.hpp"
#include "decode_blocks.hpp"
#include "kv_formats.hpp"
#include "sdpa/kernels.hpp"

namespace {

using sdpa::KeyRange;
using sdpa::Mask;
using sdpa::ScoreMod;
using sdpa::Shape;

constexpr double kU = 0x1p-24;
constexpr double kSafety = 2.0;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Case {
  std::string name;
  Shape shape;
  Mask mask;
  ScoreMod mod;
};

std::vector<float> normals(std::int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

struct Inputs {
  std::vector<float> q, k, v;
};

Inputs inputs(const Shape& s, std::uint32_t seed) {
  std::mt19937 rng(seed);
  return {normals(s.q_elements(), rng), normals(s.k_elements(), rng), normals(s.v_elements(), rng)};
}

std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }

struct Result {
  std::vector<float> out, lse;
  sdpa::RowProbes probes;
};

Result run(const sdpa::Kernel& kern, const Case& c, const Inputs& in, float scale, int threads,
           bool probes = true) {
  const Shape& s = c.shape;
  Result r{std::vector<float>(s.out_elements(), NAN), std::vector<float>(s.rows(), NAN),
           sdpa::RowProbes(s.rows())};
  kern.forward({.shape = s,
                .q = in.q.data(),
                .k = in.k.data(),
                .v = in.v.data(),
                .out = r.out.data(),
                .lse = r.lse.data(),
                .scale = scale,
                .mask = c.mask,
                .score_mod = c.mod,
                .threads = threads,
                .probes = probes ? &r.probes : nullptr});
  return r;
}

// The oracle's output and lse, and the bound of each (see the header).
struct Bound {
  sdpa::ReferenceResult ref;
  std::vector<double> out_tol, lse_tol;
  // The probes that count the sink as an outcome (entropy, max weight, sum p^2), as
  // test_kernels.cpp bounds them.
  std::vector<double> entropy_tol, max_weight_tol, p2_tol;
};

Bound bound(const Case& c, const Inputs& in, float scale) {
  const Shape& s = c.shape;
  Bound b{sdpa::reference_attention(s, widen(in.q), widen(in.k), widen(in.v), scale, c.mask, c.mod),
          std::vector<double>(s.out_elements(), 0),
          std::vector<double>(s.rows(), 0),
          std::vector<double>(s.rows(), 0),
          std::vector<double>(s.rows(), 0),
          std::vector<double>(s.rows(), 0)};
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t i = r % s.n_q, kv = s.kv_head(r / s.n_q);
    const KeyRange keys = c.mask.visible(s, i);
    const sdpa::RowLogits row = sdpa::row_logits(s, c.mod, scale, r / s.n_q, i);
    const double row_scale =
        c.mod.temperature.empty() ? scale : double(scale) * c.mod.temperature[i];
    const std::int64_t n = keys.size();
    std::vector<double> z(n), e(n);
    double m = row.sink, lo = row.sink;
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t key = keys.begin + j;
      double dot = 0, a = 0;
      for (std::int64_t x = 0; x < s.d_k; ++x) {
        const double qk = double(in.q[r * s.d_k + x]) * in.k[(kv * s.n_kv + key) * s.d_k + x];
        dot += qk;
        a += std::abs(qk);
      }
      const double scaled = row_scale * dot, capped = row.cap(scaled);
      const double bias = row.bias<double>(key);
      z[j] = capped + bias;
      e[j] =
          row.cap_derivative(capped) * ((s.d_k + 2) * std::abs(row_scale) * a + std::abs(scaled)) +
          12 * std::abs(capped) + 2 * std::abs(bias);
      m = std::max(m, z[j]);
      lo = std::isfinite(lo) ? std::min(lo, z[j]) : z[j];
    }
    if (!std::isfinite(m)) continue;  // no key and no sink: exact zeros and -inf expected
    const double range = m - lo;
    const bool sink = std::isfinite(row.sink);
    double l = sink ? std::exp(row.sink - m) : 0;
    for (std::int64_t j = 0; j < n; ++j) l += std::exp(z[j] - m);
    double e_mean = 0;
    const double e_sink = sink ? std::abs(row.sink - m) + std::abs(row.sink) + range + 4 : 0;
    const double p_sink = sink ? std::exp(row.sink - m) / l : 0;
    for (std::int64_t j = 0; j < n; ++j) {
      e[j] += std::abs(z[j] - m) + std::abs(z[j]) + range + 4;
      e_mean += std::exp(z[j] - m) / l * e[j];
    }
    e_mean += p_sink * e_sink;
    const double terms = double(n) + (sink ? 1 : 0);
    b.lse_tol[r] = kSafety * kU * (e_mean + terms + 4 + std::abs(b.ref.lse[r]));
    // Every outcome's weight p, logit and error, the sink's last.
    std::vector<double> p(n), zz = z, ee = e;
    for (std::int64_t j = 0; j < n; ++j) p[j] = std::exp(z[j] - m) / l;
    if (sink) p.push_back(p_sink), zz.push_back(row.sink), ee.push_back(e_sink);
    double entropy = 0, p2 = 0, p2_tol = 0;
    for (std::size_t j = 0; j < p.size(); ++j) {
      entropy -= p[j] > 0 ? p[j] * std::log(p[j]) : 0;
      p2 += p[j] * p[j];
      p2_tol += 2 * p[j] * p[j] * (ee[j] + terms + 4);
    }
    double h_tol = terms + 4;
    for (std::size_t j = 0; j < p.size(); ++j) {
      const double lnp = p[j] > 0 ? std::log(p[j]) : 0;
      h_tol += p[j] * std::abs(lnp + entropy) * ee[j] +
               p[j] * std::abs(zz[j] - m) * (ee[j] + 2 * terms + 8);
    }
    b.entropy_tol[r] = kSafety * kU * h_tol;
    b.max_weight_tol[r] = kSafety * kU * (1 / l) * (e_mean + terms + 4);
    b.p2_tol[r] = kSafety * kU * p2_tol + 1e-30;
    for (std::int64_t x = 0; x < s.d_v; ++x) {
      const double o = b.ref.out[r * s.d_v + x];
      double spread = p_sink * std::abs(o) * (e_sink + e_mean), mass = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        const double p = std::exp(z[j] - m) / l;
        const double vj = in.v[(kv * s.n_kv + keys.begin + j) * s.d_v + x];
        spread += p * std::abs(vj - o) * (e[j] + e_mean);
        mass += p * std::abs(vj);
      }
      b.out_tol[r * s.d_v + x] = kSafety * kU * (spread + (2 * terms + 8) * mass);
    }
  }
  return b;
}

// The registry entries whose decode path this file checks (one per target, no best alias).
std::vector<const sdpa::Kernel*> decode_kernels(std::initializer_list<std::string_view> families) {
  std::vector<const sdpa::Kernel*> out;
  for (const auto& k : sdpa::kernel_registry())
    if (k.name.find('@') != std::string::npos &&
        std::find(families.begin(), families.end(), k.family) != families.end())
      out.push_back(&k);
  return out;
}

// K and V as flash-kv-f16 / -bf16 compute with them: rounded to the format, exactly widened.
Inputs rounded_kv(const Inputs& in, std::string_view family) {
  Inputs r = in;
  for (auto* x : {&r.k, &r.v})
    for (float& e : *x)
      e = family == "flash-kv-f16" ? sdpa::detail::f16_to_f32(sdpa::detail::f16_bits(e))
                                   : sdpa::detail::bf16_round(e);
  return r;
}

void check_against_oracle(const Case& c, std::uint32_t seed) {
  const Shape& s = c.shape;
  const Inputs in = inputs(s, seed);
  const float scale = float(1 / std::sqrt(double(s.d_k)));
  const Bound fp32 = bound(c, in, scale);
  for (const sdpa::Kernel* kern : decode_kernels({"flash", "flash-kv-f16", "flash-kv-bf16"})) {
    INFO(kern->name, " on ", c.name, " n_q=", s.n_q, " group=", s.group);
    const bool kv16 = kern->family != "flash";
    const Inputs used = kv16 ? rounded_kv(in, kern->family) : in;
    const Bound want = kv16 ? bound(c, used, scale) : fp32;
    const Result got = run(*kern, c, in, scale, 2);
    std::int64_t bad_out = 0, bad_lse = 0;
    double worst = 0;
    for (std::int64_t x = 0; x < s.out_elements(); ++x) {
      const double err = std::abs(got.out[x] - want.ref.out[x]);
      if (!(err <= want.out_tol[x])) ++bad_out;
      if (want.out_tol[x] > 0) worst = std::max(worst, err / want.out_tol[x]);
    }
    for (std::int64_t r = 0; r < s.rows(); ++r) {
      const double w = want.ref.lse[r];
      const bool same_inf = std::isinf(w) && got.lse[r] == w;
      if (!same_inf && !(std::abs(got.lse[r] - w) <= want.lse_tol[r])) ++bad_lse;
    }
    CHECK_MESSAGE(bad_out == 0, "out: ", bad_out, " outside the bound; worst err/tol ", worst);
    CHECK_MESSAGE(bad_lse == 0, "lse: ", bad_lse, " outside the bound");
    // The probes' weights count the sink: against the oracle kernel's probes.
    const Result ref = run(*sdpa::find_kernel("reference"), c, used, scale, 1);
    std::int64_t bad_probes = 0;
    for (std::int64_t r = 0; r < s.rows(); ++r) {
      const auto near = [](double x, double y, double tol) { return std::abs(x - y) <= tol; };
      bad_probes +=
          !near(got.probes.max_weight[r], ref.probes.max_weight[r], want.max_weight_tol[r]);
      bad_probes += !near(got.probes.sum_p2[r], ref.probes.sum_p2[r], want.p2_tol[r]);
      bad_probes += !near(got.probes.entropy[r], ref.probes.entropy[r], want.entropy_tol[r]);
      bad_probes += got.probes.nonfinite[r] != 0;
    }
    CHECK_MESSAGE(bad_probes == 0, "probes: ", bad_probes, " outside the bound");
  }
}

std::vector<float> per_head(std::int64_t n, float first, float step) {
  std::vector<float> x(n);
  for (std::int64_t h = 0; h < n; ++h) x[h] = first + step * float(h);
  return x;
}

}  // namespace

TEST_CASE("the decode path runs every mask and modifier as the oracle defines them") {
  const std::int64_t heads = 8, group = 4;
  const std::vector<std::int64_t> docs = {0, 700, 1501, 2998};
  const std::vector<float> slopes = per_head(heads, 0.5f, -0.0625f);
  const std::vector<float> sinks_large = per_head(heads, 30.0f, 1.0f);
  const std::vector<float> sinks_mixed = {kNegInf, -2.0f, 0.5f, 3.0f, kNegInf, 1.0f, 8.0f, -1.0f};
  std::uint32_t seed = 1;
  for (std::int64_t n_q = 1; n_q <= 4; ++n_q) {
    const std::vector<float> temperature = per_head(n_q, 0.75f, 0.25f);
    const auto shape = [&](std::int64_t n_kv, std::int64_t d) {
      return Shape{
          .batch_heads = heads, .n_q = n_q, .n_kv = n_kv, .d_k = d, .d_v = d, .group = group};
    };
    const Case cases[] = {
        {"window 128 on a long cache", shape(20000, 64), {.causal = true, .window_left = 127}, {}},
        {"window of 1", shape(3000, 32), {.causal = true, .window_left = 0}, {}},
        {"window both sides", shape(900, 40), {.window_left = 200, .window_right = 3}, {}},
        {"a chunk boundary inside a split", shape(3002, 32), {.causal = true, .chunk = 1000}, {}},
        {"documents", shape(3000, 48), {.causal = true, .documents = docs}, {}},
        {"sinks -inf and finite", shape(1000, 32), {.causal = true}, {.sinks = sinks_mixed}},
        {"large sinks, windowed",
         shape(2000, 32),
         {.causal = true, .window_left = 300},
         {.sinks = sinks_large}},
        {"tiny soft-cap", shape(1500, 64), {.causal = true}, {.softcap = 0.01f}},
        {"soft-cap 5 with ALiBi",
         shape(1500, 64),
         {.causal = true},
         {.softcap = 5, .alibi_slopes = slopes}},
        {"ALiBi, windowed",
         shape(5000, 32),
         {.causal = true, .window_left = 600},
         {.alibi_slopes = slopes}},
        {"temperature and sinks",
         shape(1200, 80),
         {},
         {.sinks = sinks_mixed, .temperature = temperature}},
        {"everything",
         shape(4000, 64),
         {.causal = true, .window_left = 1000, .chunk = 1500},
         {.softcap = 20, .alibi_slopes = slopes, .sinks = sinks_mixed, .temperature = temperature}},
    };
    for (const Case& c : cases) {
      REQUIRE(sdpa::mask_problem(c.shape, c.mask, c.mod).empty());
      check_against_oracle(c, seed++);
    }
  }
  // 16 rows per block (4 heads x 4 queries): the query-lanes layout.
  const Shape wide{.batch_heads = 8, .n_q = 4, .n_kv = 2500, .d_k = 64, .d_v = 64, .group = 4};
  const std::vector<float> temperature = per_head(4, 1.25f, -0.125f);
  check_against_oracle(
      {"query lanes, everything",
       wide,
       {.causal = true, .window_left = 700, .documents = docs},
       {.softcap = 3, .alibi_slopes = slopes, .sinks = sinks_mixed, .temperature = temperature}},
      seed++);
}

TEST_CASE("decode splits read only keys some row sees") {
  // K and V are NaN outside the union of the rows' ranges (widened to whole multiples of
  // kDecodeKeyAlign keys): a split that read them would carry a NaN into the output (0 x NaN),
  // so the output must equal the clean run's, bit for bit.
  const Shape s{.batch_heads = 8, .n_q = 3, .n_kv = 9000, .d_k = 64, .d_v = 64, .group = 4};
  const Case c{"window", s, {.causal = true, .window_left = 130}, {}};
  const Inputs in = inputs(s, 77);
  Inputs poisoned = in;
  const KeyRange first = c.mask.visible(s, 0), last = c.mask.visible(s, s.n_q - 1);
  for (std::int64_t kv = 0; kv < s.kv_batch_heads(); ++kv)
    for (std::int64_t j = 0; j < s.n_kv; ++j) {
      constexpr std::int64_t kAlign = sdpa::detail::kDecodeKeyAlign;
      if (j >= first.begin / kAlign * kAlign && j < (last.end + kAlign - 1) / kAlign * kAlign)
        continue;
      std::fill_n(poisoned.k.begin() + (kv * s.n_kv + j) * s.d_k, s.d_k, NAN);
      std::fill_n(poisoned.v.begin() + (kv * s.n_kv + j) * s.d_v, s.d_v, NAN);
    }
  for (const sdpa::Kernel* kern :
       decode_kernels({"flash", "flash-kv-f16", "flash-kv-bf16", "flash-kv-int8"})) {
    INFO(kern->name);
    const Result clean = run(*kern, c, in, 0.125f, 2), dirty = run(*kern, c, poisoned, 0.125f, 2);
    CHECK(
        std::all_of(dirty.out.begin(), dirty.out.end(), [](float x) { return std::isfinite(x); }));
    CHECK(dirty.out == clean.out);
    CHECK(dirty.lse == clean.lse);
  }
}

TEST_CASE("decode rows that see no key output 0 with lse the sink, -inf without one") {
  // n_q = 4 > n_kv = 2, causal: rows 0 and 1 see nothing. Heads 0 and 2 have no sink.
  const Shape s{.batch_heads = 4, .n_q = 4, .n_kv = 2, .d_k = 16, .d_v = 8, .group = 2};
  const std::vector<float> sinks = {kNegInf, 1.5f, kNegInf, -3.0f};
  const Case c{"empty rows", s, {.causal = true}, {.softcap = 2, .sinks = sinks}};
  const Inputs in = inputs(s, 5);
  for (const sdpa::Kernel* kern :
       decode_kernels({"flash", "flash-kv-f16", "flash-kv-bf16", "flash-kv-int8"})) {
    INFO(kern->name);
    const Result got = run(*kern, c, in, 0.25f, 1);
    for (std::int64_t h = 0; h < s.batch_heads; ++h)
      for (std::int64_t i = 0; i < 2; ++i) {
        const std::int64_t r = h * s.n_q + i;
        for (std::int64_t x = 0; x < s.d_v; ++x) CHECK(got.out[r * s.d_v + x] == 0.0f);
        CHECK(got.lse[r] == sinks[h]);
        // One outcome (the sink) or none: entropy 0; the sink takes all the weight.
        CHECK(got.probes.entropy[r] == 0.0);
        CHECK(got.probes.max_weight[r] == (h % 2 ? 1.0 : 0.0));
        CHECK(got.probes.score_sum[r] == 0.0);
      }
  }
}

TEST_CASE("the decode path under masks and modifiers gives the same bits on any thread count") {
  const Shape s{.batch_heads = 16, .n_q = 2, .n_kv = 12000, .d_k = 32, .d_v = 32, .group = 8};
  const std::vector<float> slopes = per_head(16, 0.25f, -0.01f), sinks = per_head(16, -1, 0.5f);
  const std::vector<float> temperature = {0.9f, 1.1f};
  const Case c{"threads",
               s,
               {.causal = true, .window_left = 5000, .chunk = 11000},
               {.softcap = 10, .alibi_slopes = slopes, .sinks = sinks, .temperature = temperature}};
  const Inputs in = inputs(s, 9);
  for (const sdpa::Kernel* kern :
       decode_kernels({"flash", "flash-kv-f16", "flash-kv-bf16", "flash-kv-int8"})) {
    INFO(kern->name);
    const Result one = run(*kern, c, in, 0.2f, 1);
    for (int threads : {2, 3}) {
      const Result more = run(*kern, c, in, 0.2f, threads);
      CHECK(more.out == one.out);
      CHECK(more.lse == one.lse);
      CHECK(more.probes.entropy == one.probes.entropy);
      CHECK(more.probes.sum_p3 == one.probes.sum_p3);
    }
  }
}

TEST_CASE("the K/V storage kernels refuse no mask or modifier, on decode or prefill shapes") {
  const Shape decode{.batch_heads = 2, .n_q = 16, .n_kv = 100, .d_k = 16, .d_v = 16};
  Shape prefill = decode;
  prefill.n_q = 17;
  const Mask window{.causal = true, .window_left = 10};
  for (const char* name : {"flash-kv-f16", "flash-kv-bf16", "flash-kv-int8"}) {
    INFO(name);
    const sdpa::Kernel* kern = sdpa::find_kernel(name);
    REQUIRE(kern != nullptr);
    for (const Shape& s : {decode, prefill}) {
      CHECK(kern->refusal(s, window, {.softcap = 1}).empty());
      CHECK(kern->refusal(s, {.causal = true}, {}).empty());
    }
  }
}
