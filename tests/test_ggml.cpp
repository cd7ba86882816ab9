// The ggml peer entries (kernels/ggml.cpp: llama.cpp's ggml_flash_attn_ext) against the fp64
// reference of the fp32 inputs, with bounds derived from what each storage format rounds, by
// the rule of flash-kv-int8's quantisation bound (test_low_precision.cpp), per element rather
// than per row:
//  - each element x of Q, K and V as the kernel computes with it is within e_x of x: 0 in f32;
//    |x| u16 + 2^-25 in f16 (Q too: ggml rounds Q to the dot format of K's type on its row
//    path); in q8_0 (Q of q8_0 and q4_0 K: q8_0) a block of 32 with scale d = max|x| / 127 held
//    in f16 moves each element by d / 2 (rounding) + 127 |d - f16(d)| (the scale's rounding):
//    e = d (1/2 + 2^-14 + 127 u16) + 127 2^-25; in q4_0, d = max|x| / 8 and the clamp of the
//    largest level moves an element by up to d: e = d (1 + 2^-14 + 8 u16) + 8 2^-25;
//  - a score moves by at most Q_j = |c| sum_x (|q_x| ek_jx + eq_x (|k_jx| + ek_jx)), plus
//    fp32's u32 ((d_k + 2)(A_j + Q_j) + (m - s_j) + R + 4) (test_low_precision.cpp); D = max_j;
//  - then, exactly (weights move by factors within e^(+-2D)),
//      |o^_c - o_c| <= (e^(2D) - 1) sum_j p_j (|v_jc - o_c| + ev_jc) + sum_j p_j ev_jc
//                    + e^(2D) (2 n + 8) u_acc sum_j p_j (|v_jc| + ev_jc)
//    with u_acc = u32, or u16 for f16 V: ggml's row path accumulates P V in f16.
// ggml gives no lse; the entries refuse a call that asks for one, and shapes their format
// cannot store.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_rows.hpp"
#include "sdpa/kernels.hpp"

namespace {

using sdpa::Shape;

constexpr double kU32 = 0x1p-24, kU16 = 0x1p-11, kF16Tiny = 0x1p-25;

// Per-element error of a row of d values as a format rounds it (above).
using RowErrors = void (*)(const float* x, std::int64_t d, double* e);

void exact(const float*, std::int64_t d, double* e) { std::fill(e, e + d, 0.0); }

void f16_errors(const float* x, std::int64_t d, double* e) {
  for (std::int64_t c = 0; c < d; ++c) e[c] = std::abs(double(x[c])) * kU16 + kF16Tiny;
}

// Blocks of 32 with scale max|x| / levels; `step` the largest move in units of the scale.
template <int kLevels, int kStep2>  // step = kStep2 / 2
void block_errors(const float* x, std::int64_t d, double* e) {
  for (std::int64_t b = 0; b < d; b += 32) {
    double m = 0;
    for (std::int64_t c = b; c < b + 32; ++c) m = std::max(m, std::abs(double(x[c])));
    const double scale = m / kLevels;
    const double err = scale * (kStep2 / 2.0 + 0x1p-14 + kLevels * kU16) + kLevels * kF16Tiny;
    std::fill(e + b, e + b + 32, err);
  }
}

struct Format {
  const char* kernel;
  RowErrors q, kv;
  double u_acc;
};
const Format kFormats[] = {{"ggml", &exact, &exact, kU32},
                           {"ggml-kv-f16", &f16_errors, &f16_errors, kU16},
                           {"ggml-kv-q8_0", &block_errors<127, 1>, &block_errors<127, 1>, kU32},
                           {"ggml-kv-q4_0", &block_errors<127, 1>, &block_errors<8, 2>, kU32}};

struct Case {
  Shape shape;
  bool causal = false;
  std::uint32_t seed = 1;
};

struct Problem {
  std::vector<float> q, k, v;
  float scale;
  std::vector<double> out, tol;
};

Problem make_problem(const Case& c, const Format& f) {
  const Shape& s = c.shape;
  Problem pr;
  std::mt19937 rng(c.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto* x : {&pr.q, &pr.k, &pr.v}) {
    x->resize(x == &pr.q ? s.q_elements() : x == &pr.k ? s.k_elements() : s.v_elements());
    for (float& e : *x) e = normal(rng);
  }
  pr.scale = float(1 / std::sqrt(double(s.d_k)));
  const double c_abs = std::abs(double(pr.scale));
  pr.out = sdpa::reference_attention(s, std::vector<double>(pr.q.begin(), pr.q.end()),
                                     std::vector<double>(pr.k.begin(), pr.k.end()),
                                     std::vector<double>(pr.v.begin(), pr.v.end()), pr.scale,
                                     sdpa::Mask{.causal = c.causal})
               .out;
  pr.tol.assign(s.out_elements(), 0);
  std::vector<double> eq(s.d_k), ek(s.d_k), ev(s.d_v);
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t b = s.kv_head(r / s.n_q);
    const std::int64_t n = sdpa::Mask{.causal = c.causal}.visible(s, r % s.n_q).end;
    if (n == 0) continue;  // fully masked: exact zeros expected
    const float* q = pr.q.data() + r * s.d_k;
    const float* k = pr.k.data() + b * s.n_kv * s.d_k;
    const float* v = pr.v.data() + b * s.n_kv * s.d_v;
    const RowScores row = row_scores(q, k, s.d_k, n, pr.scale);
    f.q(q, s.d_k, eq.data());
    double d = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      f.kv(k + j * s.d_k, s.d_k, ek.data());
      double moved = 0;
      for (std::int64_t x = 0; x < s.d_k; ++x)
        moved +=
            std::abs(double(q[x])) * ek[x] + eq[x] * (std::abs(double(k[j * s.d_k + x])) + ek[x]);
      moved *= c_abs;
      const double fp32 =
          kU32 * ((s.d_k + 2) * (row.a[j] + moved) + (row.m - row.s[j]) + row.range + 4);
      d = std::max(d, moved + fp32);
    }
    const double grow = std::exp(2 * d), nn = double(n);
    std::vector<double> spread(s.d_v, 0), moved(s.d_v, 0), mass(s.d_v, 0);
    for (std::int64_t j = 0; j < n; ++j) {
      f.kv(v + j * s.d_v, s.d_v, ev.data());
      for (std::int64_t x = 0; x < s.d_v; ++x) {
        const double vj = v[j * s.d_v + x], p = row.p[j], o = pr.out[r * s.d_v + x];
        spread[x] += p * (std::abs(vj - o) + ev[x]);
        moved[x] += p * ev[x];
        mass[x] += p * (std::abs(vj) + ev[x]);
      }
    }
    for (std::int64_t x = 0; x < s.d_v; ++x)
      pr.tol[r * s.d_v + x] =
          (grow - 1) * spread[x] + moved[x] + grow * (2 * nn + 8) * f.u_acc * mass[x];
  }
  return pr;
}

std::vector<float> run(const sdpa::Kernel& kern, const Problem& pr, const Case& c, int threads,
                       bool stored) {
  const Shape& s = c.shape;
  std::vector<float> out(s.out_elements(), NAN);
  sdpa::ForwardArgs a{.shape = s,
                      .q = pr.q.data(),
                      .k = pr.k.data(),
                      .v = pr.v.data(),
                      .out = out.data(),
                      .scale = pr.scale,
                      .mask = {.causal = c.causal},
                      .threads = threads};
  std::unique_ptr<sdpa::StoredKv> kv;
  if (stored && kern.store_kv) kv = kern.store_kv(a);
  a.stored_kv = kv.get();
  kern.forward(a);
  return out;
}

double g_worst_ratio = 0;
std::map<std::string, double> g_worst;  // per entry, for the message below

void check_case(const Case& c) {
  for (const Format& f : kFormats) {
    const sdpa::Kernel* kern = sdpa::find_kernel(f.kernel);
    if (!kern) continue;  // a build without ggml: the test below says whether it should have it
    if (!kern->refusal(c.shape, {}, {}).empty()) continue;
    const Shape& s = c.shape;
    INFO(f.kernel, " bh=", s.batch_heads, " group=", s.group, " n_q=", s.n_q, " n_kv=", s.n_kv,
         " d_k=", s.d_k, " d_v=", s.d_v, c.causal ? " causal" : "");
    const Problem pr = make_problem(c, f);
    for (int threads : {1, 2, 3})
      for (bool stored : {false, true}) {
        CAPTURE(threads);
        CAPTURE(stored);
        const std::vector<float> got = run(*kern, pr, c, threads, stored);
        std::int64_t bad = 0;
        double worst = 0;
        for (std::int64_t x = 0; x < s.out_elements(); ++x) {
          const double err = std::abs(double(got[x]) - pr.out[x]);
          const double ratio = err == 0 ? 0 : err / pr.tol[x];
          bad += !(ratio <= 1);
          worst = std::max(worst, ratio);
        }
        g_worst_ratio = std::max(g_worst_ratio, worst);
        g_worst[f.kernel] = std::max(g_worst[f.kernel], worst);
        CHECK_MESSAGE(bad == 0, bad, " outputs outside the bound; worst err/tol ", worst);
      }
  }
}

}  // namespace

TEST_CASE("the ggml entries are there exactly when the build has ggml") {
#ifdef SDPA_HAVE_GGML
  for (const Format& f : kFormats) {
    const sdpa::Kernel* kern = sdpa::find_kernel(f.kernel);
    REQUIRE_MESSAGE(kern != nullptr, f.kernel);
    CHECK(kern->family == "ggml");
    CHECK_FALSE(kern->row_statistics);
    CHECK_FALSE(kern->same_bits_on_any_threads);
    CHECK(bool(kern->store_kv) == (std::string(f.kernel) != "ggml"));
  }
  // Bytes as stored: q8_0 is 34 bytes per 32 values, q4_0 18, f16 2 per value.
  const Shape s{.batch_heads = 4, .n_q = 1, .n_kv = 100, .d_k = 64, .d_v = 64, .group = 2};
  const double qo = 4.0 * (4 * 64 + 4 * 64), kv_values = 2.0 * 2 * 100 * 64;
  CHECK(sdpa::find_kernel("ggml")->bytes(s, {}) == qo + 4 * kv_values);
  CHECK(sdpa::find_kernel("ggml-kv-f16")->bytes(s, {}) == qo + 2 * kv_values);
  CHECK(sdpa::find_kernel("ggml-kv-q8_0")->bytes(s, {}) == qo + 34.0 / 32 * kv_values);
  CHECK(sdpa::find_kernel("ggml-kv-q4_0")->bytes(s, {}) == qo + 18.0 / 32 * kv_values);
#else
  for (const auto& k : sdpa::kernel_registry()) CHECK_MESSAGE(k.family != "ggml", k.name);
#endif
}

TEST_CASE("ggml entries are within their storage format's bound on grouped and decode shapes") {
  // Decode (one query: ggml splits the keys among threads from 512 keys on), a few queries (its
  // row path), prefill past its 64-query tiles, causal with n_q < n_kv and with n_q > n_kv (rows
  // that see no key: zeros), MHA, GQA and MQA.
  struct Dims {
    std::int64_t heads, group, n_q, n_kv, d_k, d_v;
  };
  const Dims dims[] = {{2, 1, 1, 1, 32, 32},     {8, 4, 1, 1100, 128, 128}, {4, 4, 1, 600, 64, 32},
                       {6, 2, 3, 300, 64, 64},   {2, 1, 1, 257, 96, 96},    {4, 2, 70, 150, 64, 64},
                       {2, 2, 100, 100, 32, 64}, {3, 1, 5, 37, 24, 16},     {2, 1, 70, 50, 32, 32}};
  std::uint32_t seed = 900;
  for (const auto& d : dims)
    for (bool causal : {false, true})
      check_case({.shape = {.batch_heads = d.heads,
                            .n_q = d.n_q,
                            .n_kv = d.n_kv,
                            .d_k = d.d_k,
                            .d_v = d.d_v,
                            .group = d.group},
                  .causal = causal,
                  .seed = seed++});
  for (const auto& [name, worst] : g_worst) MESSAGE(name, ": worst err / bound ", worst);
  CHECK(g_worst_ratio <= 1.0);
}

TEST_CASE("ggml entries refuse by name what they cannot do") {
  const sdpa::Kernel* q8 = sdpa::find_kernel("ggml-kv-q8_0");
  if (!q8) return;  // no ggml in this build
  const Shape odd{.batch_heads = 2, .n_q = 1, .n_kv = 5, .d_k = 24, .d_v = 32};
  CHECK(q8->refusal(odd, {}, {}) ==
        "ggml's q8_0 stores rows in blocks of 32 values: d_k (24) and d_v (32) must be "
        "multiples of 32");
  std::vector<float> x(odd.k_elements(), 0.5f), out(odd.out_elements()), lse(odd.rows());
  sdpa::ForwardArgs a{.shape = odd, .q = x.data(), .k = x.data(), .v = x.data(), .out = out.data()};
  CHECK_THROWS_WITH_AS(q8->forward(a), q8->refusal(odd, {}, {}).c_str(), std::invalid_argument);
  CHECK(sdpa::find_kernel("ggml-kv-f16")->refusal(odd, {}, {}).empty());
  // No row log-sum-exp from ggml: a call asking for one is refused, not filled in another way.
  const Shape s{.batch_heads = 2, .n_q = 1, .n_kv = 5, .d_k = 32, .d_v = 32};
  std::vector<float> y(s.k_elements(), 0.5f), o(s.out_elements());
  sdpa::ForwardArgs b{.shape = s, .q = y.data(), .k = y.data(), .v = y.data(), .out = o.data()};
  b.lse = lse.data();
  CHECK_THROWS_AS(sdpa::find_kernel("ggml")->forward(b), std::invalid_argument);
  // A stored K/V of another format.
  b.lse = nullptr;
  const auto f16 = sdpa::find_kernel("ggml-kv-f16")->store_kv(b);
  b.stored_kv = f16.get();
  CHECK_THROWS_AS(q8->forward(b), std::invalid_argument);
}

TEST_CASE("ggml maps the soft-cap, ALiBi, sinks and windows within fp32's bound") {
  // The f32 entry against the oracle: each logit ggml computes (a dot in fp32, times scale / c,
  // c tanh, plus its slope (within (heads + 4) u32 of ours: powf of a rounded power of two)
  // times the mask's exact distance) is within D of the exact one, D per row as the fp32 bound
  // above plus u32 (4 c + (heads + 6) |bias| + |logit|); the weights (the sink one more
  // outcome, of value 0) then move by factors within e^(+-2D).
  const sdpa::Kernel* kern = sdpa::find_kernel("ggml");
  if (!kern) return;  // no ggml in this build (the first test says whether it should have it)
  struct Dims {
    std::int64_t heads, group, n_q, n_kv;
  };
  // Decode split among threads (600 keys), the row path, and 64-query tiles.
  const Dims dims[] = {{4, 2, 1, 600}, {4, 1, 5, 40}, {8, 4, 70, 90}};
  const std::vector<float> slopes = sdpa::alibi_slopes(4);
  const std::vector<float> sinks = {-INFINITY, 0.0f, 3.0f, -1.5f};
  const sdpa::Mask masks[] = {{},
                              {.causal = true, .window_left = 7, .window_right = 0},
                              {.window_left = 3, .window_right = 5},
                              {.causal = true, .chunk = 16}};
  std::uint32_t seed = 40;
  double worst = 0;
  for (const Dims& d : dims)
    for (const sdpa::Mask& mask : masks)
      for (int m = 0; m < 4; ++m) {
        const sdpa::ScoreMod mod{
            .softcap = m & 1 ? 1.5f : 0.0f,
            .alibi_slopes = m >= 2 ? std::span<const float>(slopes) : std::span<const float>(),
            .sinks = m != 2 ? std::span<const float>(sinks) : std::span<const float>()};
        const Shape s{.batch_heads = d.heads * 2,
                      .n_q = d.n_q,
                      .n_kv = d.n_kv,
                      .d_k = 32,
                      .d_v = 32,
                      .group = d.group};
        INFO("heads ", s.batch_heads, " group ", s.group, " n_q ", s.n_q, " n_kv ", s.n_kv,
             " window ", mask.window_left, "/", mask.window_right, " chunk ", mask.chunk,
             " modifiers ", m);
        REQUIRE(kern->refusal(s, mask, mod).empty());
        std::mt19937 rng(seed++);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> q(s.q_elements()), k(s.k_elements()), v(s.v_elements());
        for (auto* x : {&q, &k, &v})
          for (float& e : *x) e = normal(rng);
        const float scale = float(1 / std::sqrt(double(s.d_k)));
        const auto ref = sdpa::reference_attention(
            s, std::vector<double>(q.begin(), q.end()), std::vector<double>(k.begin(), k.end()),
            std::vector<double>(v.begin(), v.end()), scale, mask, mod);
        for (int threads : {1, 2}) {
          std::vector<float> out(s.out_elements(), NAN);
          kern->forward({.shape = s,
                         .q = q.data(),
                         .k = k.data(),
                         .v = v.data(),
                         .out = out.data(),
                         .scale = scale,
                         .mask = mask,
                         .score_mod = mod,
                         .threads = threads});
          for (std::int64_t r = 0; r < s.rows(); ++r) {
            const std::int64_t b = r / s.n_q, i = r % s.n_q;
            const sdpa::KeyRange keys = mask.visible(s, i);
            const sdpa::RowLogits row = sdpa::row_logits(s, mod, scale, b, i);
            const float* kh = k.data() + s.kv_head(b) * s.n_kv * s.d_k;
            const float* vh = v.data() + s.kv_head(b) * s.n_kv * s.d_v;
            std::vector<double> logit, a;
            double top = row.sink, low = row.sink;
            for (std::int64_t j = keys.begin; j < keys.end; ++j) {
              double dot = 0, abs = 0;
              for (std::int64_t x = 0; x < s.d_k; ++x) {
                dot += double(q[r * s.d_k + x]) * kh[j * s.d_k + x];
                abs += std::abs(double(q[r * s.d_k + x]) * kh[j * s.d_k + x]);
              }
              logit.push_back(row.logit(dot, j));
              a.push_back(abs * scale);
              top = std::max(top, logit.back());
              low = std::isinf(low) ? logit.back() : std::min(low, logit.back());
            }
            double dmax = 0, sum = std::exp(double(row.sink) - top);
            for (std::size_t j = 0; j < logit.size(); ++j) {
              const double bias = std::abs(row.bias<double>(keys.begin + std::int64_t(j)));
              dmax =
                  std::max(dmax, kU32 * ((s.d_k + 2) * a[j] + 4 * row.softcap + (4 + 6) * bias +
                                         std::abs(logit[j]) + (top - logit[j]) + (top - low) + 4));
              sum += std::exp(logit[j] - top);
            }
            const double grow = std::exp(2 * dmax), p_sink = std::exp(double(row.sink) - top) / sum;
            for (std::int64_t c = 0; c < s.d_v; ++c) {
              const double o = ref.out[r * s.d_v + c];
              double spread = p_sink * std::abs(o), mass = 0;
              for (std::size_t j = 0; j < logit.size(); ++j) {
                const double p = std::exp(logit[j] - top) / sum,
                             vj = vh[(keys.begin + std::int64_t(j)) * s.d_v + c];
                spread += p * std::abs(vj - o);
                mass += p * std::abs(vj);
              }
              const double tol =
                  (grow - 1) * spread + grow * (2 * double(logit.size()) + 8) * kU32 * mass;
              const double err = std::abs(double(out[r * s.d_v + c]) - o);
              worst = std::max(worst, err == 0 ? 0 : err / tol);
              CHECK_MESSAGE(err <= tol, "row ", r, " column ", c, " err ", err, " bound ", tol);
            }
          }
        }
      }
  MESSAGE("ggml with modifiers: worst err / bound ", worst);
  // Temperature per row and slopes that are not ggml's are refused by name.
  const Shape s{.batch_heads = 3, .n_q = 4, .n_kv = 4, .d_k = 32, .d_v = 32};
  const std::vector<float> temperature(4, 1.0f), three = sdpa::alibi_slopes(3);
  CHECK(kern->refusal(s, {}, {.temperature = temperature}) ==
        "ggml_flash_attn_ext takes one scale per call: no temperature per query row");
  CHECK(kern->refusal(s, {}, {.alibi_slopes = three}).find("not ggml's for any max_bias") !=
        std::string::npos);
  const Shape far{.batch_heads = 4, .n_q = 1, .n_kv = 3000, .d_k = 32, .d_v = 32};
  CHECK(kern->refusal(far, {}, {.alibi_slopes = slopes}).find("up to 2048") != std::string::npos);
  CHECK(kern->refusal(far, {.window_left = 2000}, {.alibi_slopes = slopes}).empty());
}
