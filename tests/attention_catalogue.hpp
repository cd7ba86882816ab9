// The kernel tests' one catalogue (issue 39, item 5): awkward shapes x masks x score modifiers,
// one input generator, and one forward bound per precision, shared by test_kernels.cpp (fp32),
// test_low_precision.cpp (bf16) and test_backward.cpp (gradients).
//
// The forward bound: first-order rounding error of attention, per element, from the fp64
// quantities of the same fp32 inputs, times kSafety = 2 for second-order terms. Sums use the
// worst-case bound of recursive summation (n terms: (n - 1) u relative, Higham, "Accuracy and
// Stability of Numerical Algorithms", 2nd ed., §4.2), which any blocked, pairwise or tiled order
// also meets. u = 2^-24 (fp32); a precision that rounds its operands adds `Rounding`. Per row,
// over the keys it sees, with c = scale x the row's temperature (sdpa/mask.hpp's RowLogits):
//   s_j = c q.k_j,  A_j = |c| sum |q_x k_jx|,  z_j = cap(s_j) + bias_j (the logit),
//   t_j = 1 - tanh^2(s_j / softcap) (1 without a soft-cap: cap's derivative; in F_j its
//         largest value within kSafety times the error F_j has before the cap, as int8's
//         errors are not small beside a tiny soft-cap),
//   F_j = the logit's own error: t_j (d_k + 2) A_j                        the dot and the scale
//         + t_j (A_j + |s_j|) with a temperature                          scale x temperature
//         + t_j |s_j| + 6 |cap_j| with a soft-cap       s / softcap, tanh's ULPs, x softcap
//         + 2 |bias_j| + |z_j| with ALiBi                                 slope x distance, add
//         (in units of u; plus, for rounded operands, t_j (product A_j + |c| sum_x of the
//         products' absolute errors: Rounding), and (d_k + 2) t_j those errors in units of u),
//   m = max(z, sink),  R = m - min(z, sink) (flash's rescales sum to at most R),
//   E_j = F_j + |z_j - m| + |z_j| + R + 4     the exponent's argument, unshifted or not, exp ULPs.
// The sink is one more outcome of the softmax, with value 0 and F = 0. A logit error e_j moves
// weight p_j by p_j (e_j - sum_k p_k e_k), so over the n' outcomes (keys and sink)
//   |o_c - o_ref_c| <= kSafety [ sum_j p_j |v_jc - o_c| (E_j + Ebar) + sum_j p_j |v_jc| (value
//                                + (2 n' + 8) u) + (1 + value) sum_j p_j e_v,jc ] (Rounding),
//   |lse - lse_ref| <= kSafety [ Ebar + (n' + 4 + |lse|) u ],
// and the probes likewise (entropy, max weight and sum p^k over the outcomes; the score moments
// over the visible logits: F_j each and sums of n terms). kSafety = 2 covers the second-order
// terms while the first-order ones are small: a rounding precision requires max_j E_j + Ebar
// <= 1/2 (Expected::worst_first_order; then e^x - 1 <= 1.3 x). A row that sees no key has output 0
// and lse = the sink (-inf without one) exactly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "sdpa/kernels.hpp"

namespace catalogue {

using sdpa::Shape;

inline constexpr double kU32 = 0x1p-24;  // fp32 unit roundoff
inline constexpr double kSafety = 2.0;
inline constexpr float kNoSink = -std::numeric_limits<float>::infinity();

struct Case {
  Shape shape;
  bool causal = false;
  std::int64_t prefix = 0, window_left = -1, window_right = -1, chunk = 0;
  // `= {}`: GCC 12 warns wherever a designated initializer leaves out a member without one.
  std::vector<std::int64_t> documents = {};
  float softcap = 0;
  std::vector<float> alibi_slopes = {}, sinks = {}, temperature = {};
  double scale = 0;      // 0: 1 / sqrt(d_k)
  double input_std = 1;  // q, k, v ~ N(0, input_std^2)
  std::uint32_t seed = 1;
  int threads = 1;
  std::string name = "";

  sdpa::Mask mask() const {
    return {.causal = causal,
            .prefix = prefix,
            .window_left = window_left,
            .window_right = window_right,
            .chunk = chunk,
            .documents = documents};
  }
  sdpa::ScoreMod mod() const {
    return {.softcap = softcap,
            .alibi_slopes = alibi_slopes,
            .sinks = sinks,
            .temperature = temperature};
  }
  float scale_value() const {
    return float(scale != 0 ? scale : 1.0 / std::sqrt(double(shape.d_k)));
  }
  // Logits or sinks past what exp takes without max subtraction: the unstable softmax overflows
  // by design there.
  bool large_magnitude() const {
    return input_std > 1 || std::any_of(sinks.begin(), sinks.end(), [](float x) { return x > 80; });
  }
};

inline std::string describe(const Case& c) {
  const Shape& s = c.shape;
  std::string d = (c.name.empty() ? "" : c.name + ": ") + "bh=" + std::to_string(s.batch_heads) +
                  " group=" + std::to_string(s.group) + " n_q=" + std::to_string(s.n_q) +
                  " n_kv=" + std::to_string(s.n_kv) + " d_k=" + std::to_string(s.d_k) +
                  " d_v=" + std::to_string(s.d_v) + (c.causal ? " causal" : "");
  if (c.prefix) d += " prefix=" + std::to_string(c.prefix);
  if (c.window_left >= 0 || c.window_right >= 0)
    d += " window=" + std::to_string(c.window_left) + "," + std::to_string(c.window_right);
  if (c.chunk) d += " chunk=" + std::to_string(c.chunk);
  if (!c.documents.empty()) d += " documents=" + std::to_string(c.documents.size());
  if (c.softcap) d += " softcap=" + std::to_string(c.softcap);
  if (!c.alibi_slopes.empty()) d += " alibi";
  if (!c.sinks.empty()) d += " sinks=" + std::to_string(c.sinks.front()) + "..";
  if (!c.temperature.empty()) d += " temperature";
  return d + " scale=" + std::to_string(c.scale) + " std=" + std::to_string(c.input_std);
}

struct Inputs {
  std::vector<float> q, k, v;
};

inline std::vector<float> normals(std::int64_t n, double std_dev, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, float(std_dev));
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

// The one input generator: q, k, v ~ N(0, std^2) in that order from one mt19937 stream.
inline Inputs random_inputs(const Shape& s, double std_dev, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Inputs in;
  in.q = normals(s.q_elements(), std_dev, rng);
  in.k = normals(s.k_elements(), std_dev, rng);
  in.v = normals(s.v_elements(), std_dev, rng);
  return in;
}

// The upstream gradient dO of a backward case: N(0, 1) from its own stream.
inline std::vector<float> upstream_gradient(const Shape& s, std::uint32_t seed) {
  std::mt19937 rng(seed ^ 0x9e3779b9u);
  return normals(s.out_elements(), 1, rng);
}

inline std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }

// Where a precision rounds its operands. `product` bounds the relative error of each q_x k_jx
// from rounding its factors, `value` that of each p_j v_jc (0 for fp32). Beyond that, an element
// may be off by an absolute e (the standard model with underflow, fl(x) = x (1 + d) + h, d h = 0;
// Higham §2.1): a product q_x k_jx then by up to (1 + product) |q_x| e_k + e_q (|k_jx| + e_k),
// a weighted value p_j v_jc by (1 + value) p_j e_v more.
//  - `tiny`, `underflow`: below a format's smallest normal, rounding is to the subnormal grid: a
//    K or V element with |x| < tiny is off by up to underflow (half the subnormal spacing).
//  - `row_step`: kv-int8 rounds Q, K and V per row to multiples of sigma = max|row| / 127, each
//    element off by up to row_step max|row|: half a step, plus fp32's rounding of x / sigma
//    (< 2^-16 sigma) and of sigma x int (< 2^-17 sigma).
struct Rounding {
  double product = 0, value = 0;
  double tiny = 0, underflow = 0;
  double row_step = 0;
  // The absolute error of rounding element x of a K or V row whose largest magnitude is
  // row_max: 0 where the relative bound holds.
  double absolute(double x, double row_max) const {
    return (std::abs(x) < tiny ? underflow : 0) + row_step * row_max;
  }
};

inline double max_abs(const float* x, std::int64_t n) {
  double m = 0;
  for (std::int64_t c = 0; c < n; ++c) m = std::max(m, std::abs(double(x[c])));
  return m;
}

// The largest |got - want| over the elements.
inline double max_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (std::size_t x = 0; x < got.size(); ++x)
    worst = std::max(worst, std::abs(double(got[x]) - want[x]));
  return worst;
}

// One bound per precision: where each rounds its operands (kernels/bf16.hpp, kv_formats.hpp,
// kv_int8.hpp); null for a precision the catalogue has no bound for. fp16 rounds below its smallest
// normal 2^-14 to multiples of 2^-24, off by up to 2^-25 (a N(0, 1) input lands there about 5 times
// in 10^5). bf16 keeps fp32's exponent range: only fp32's own subnormals fall below it (flushed to
// zero; not covered, the tests' fp32 inputs are normal).
inline const Rounding* rounding_of(const std::string& precision) {
  static constexpr double kBf16 = 0x1p-8, kFp16 = 0x1p-11;
  static const Rounding fp32{}, bf16{2 * kBf16 + kBf16 * kBf16, 2 * kBf16 + kBf16 * kBf16},
      kv_bf16{kBf16, kBf16}, kv_fp16{kFp16, kFp16, 0x1p-14, 0x1p-25},
      kv_int8{.row_step = (0.5 + 0x1p-14) / 127};
  if (precision == "fp32") return &fp32;
  if (precision == "bf16") return &bf16;
  if (precision == "kv-bf16") return &kv_bf16;
  if (precision == "kv-fp16") return &kv_fp16;
  if (precision == "kv-int8") return &kv_int8;
  return nullptr;
}

// One outcome of a row's softmax in fp64: a visible key (key >= 0) or the sink (key -1).
struct Outcome {
  std::int64_t key;
  double z;           // the logit
  double f;           // F_j u with the rounded operands' terms: the logit's own error
  double e;           // E: f + (|z - m| + |z| + R + 4) u
  double p;           // softmax weight
  double t = 1;       // the soft-cap's derivative 1 - tanh^2 at the key (1 without one)
  double capped = 0;  // cap(s): the soft-capped score before ALiBi
};

// One row's outcomes from the fp32 inputs, in fp64 (the header's quantities).
inline std::vector<Outcome> row_outcomes(const Case& c, const Inputs& in, std::int64_t r,
                                         const Rounding& rounding, double* lse = nullptr) {
  const Shape& s = c.shape;
  const std::int64_t i = r % s.n_q, kv = s.kv_head(r / s.n_q);
  const sdpa::ScoreMod mod = c.mod();
  const sdpa::KeyRange keys = c.mask().visible(s, i);
  const sdpa::RowLogits row = sdpa::row_logits(s, mod, c.scale_value(), r / s.n_q, i);
  const double scale = mod.temperature.empty()
                           ? double(c.scale_value())
                           : double(c.scale_value()) * double(mod.temperature[i]);
  std::vector<Outcome> out;
  const float* q = in.q.data() + r * s.d_k;
  const double eq = rounding.row_step * max_abs(q, s.d_k);
  for (std::int64_t j = keys.begin; j < keys.end; ++j) {
    const float* kj = in.k.data() + (kv * s.n_kv + j) * s.d_k;
    const double k_max = rounding.row_step > 0 ? max_abs(kj, s.d_k) : 0;
    // a = A_j; under: the products' absolute errors (Rounding), unscaled.
    double dot = 0, a = 0, under = 0;
    for (std::int64_t x = 0; x < s.d_k; ++x) {
      dot += double(q[x]) * kj[x];
      a += std::abs(double(q[x]) * kj[x]);
      const double ek = rounding.absolute(kj[x], k_max);
      under += (1 + rounding.product) * std::abs(double(q[x])) * ek + eq * (std::abs(kj[x]) + ek);
    }
    const double sc = scale * dot, abs_sc = std::abs(sc);
    a *= std::abs(scale);
    under *= std::abs(scale);
    const double capped = row.cap(sc), bias = row.bias<double>(j), z = capped + bias;
    const double t = row.cap_derivative(capped);
    // The scaled score's own error, before the cap; the fp32 dot sums the rounded products,
    // A_j (1 + product) + under at most.
    double pre = (s.d_k + 2) * ((1 + rounding.product) * a + under);
    if (!mod.temperature.empty()) pre += a + abs_sc;
    if (row.softcap > 0) pre += abs_sc;
    pre = rounding.product * a + under + kU32 * pre;
    // The cap moves it by at most its largest slope over the scores within kSafety x that error
    // (mean value theorem): t_j itself where the error is small, more where it is not (int8).
    const double slope =
        row.softcap > 0 ? row.cap_derivative(row.cap(std::max(0.0, abs_sc - kSafety * pre))) : 1;
    double f = 0;
    if (row.softcap > 0) f += 6 * std::abs(capped);
    if (row.slope != 0) f += 2 * std::abs(bias) + std::abs(z);
    out.push_back({j, z, slope * pre + kU32 * f, 0, 0, t, capped});
  }
  if (std::isfinite(row.sink)) out.push_back({-1, double(row.sink), 0, 0, 0, 1, 0});
  if (out.empty()) {
    if (lse) *lse = row.sink;
    return out;
  }
  double m = -INFINITY, lo = INFINITY;
  for (const Outcome& o : out) m = std::max(m, o.z), lo = std::min(lo, o.z);
  double l = 0;
  for (Outcome& o : out) l += o.p = std::exp(o.z - m);
  for (Outcome& o : out) {
    o.p /= l;
    o.e = o.f + kU32 * (std::abs(o.z - m) + std::abs(o.z) + (m - lo) + 4);
  }
  if (lse) *lse = m + std::log(l);
  return out;
}

// The fp64 truth of a case (the oracle on its fp32 inputs) and the tolerance of each quantity.
struct Expected {
  std::vector<double> out, out_tol;  // [rows][d_v]
  std::vector<double> lse, lse_tol;  // [rows]
  sdpa::RowProbes probes;            // the oracle's semantics, from the fp64 logits
  std::vector<double> entropy_tol, max_weight_tol, sum_tol, sumsq_tol, p2_tol, p3_tol;
  double worst_first_order = 0;  // max_j E_j + Ebar over rows: the bound needs it small
};

inline Expected expected(const Case& c, const Inputs& in, const Rounding& rounding = {}) {
  const Shape& s = c.shape;
  const auto ref = sdpa::reference_attention(s, widen(in.q), widen(in.k), widen(in.v),
                                             c.scale_value(), c.mask(), c.mod());
  Expected w;
  w.out = ref.out;
  w.lse = ref.lse;
  w.out_tol.assign(s.out_elements(), 0);
  w.lse_tol.assign(s.rows(), 0);
  w.probes.resize(s.rows());
  for (auto* t :
       {&w.entropy_tol, &w.max_weight_tol, &w.sum_tol, &w.sumsq_tol, &w.p2_tol, &w.p3_tol})
    t->assign(s.rows(), 0);
  std::vector<double> v_max(s.kv_batch_heads() * s.n_kv, 0);  // per value row, for row_step
  if (rounding.row_step > 0)
    for (std::size_t j = 0; j < v_max.size(); ++j)
      v_max[j] = max_abs(in.v.data() + std::int64_t(j) * s.d_v, s.d_v);
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t kv = s.kv_head(r / s.n_q);
    const std::vector<Outcome> row = row_outcomes(c, in, r, rounding);
    if (row.empty()) continue;  // no key, no sink: exact zeros (and lse -inf) expected
    const double nn = double(row.size());
    double e_mean = 0, e_max = 0, entropy = 0, sum = 0, sumsq = 0, p2 = 0, p3 = 0, m = -INFINITY;
    for (const Outcome& o : row) {
      e_mean += o.p * o.e, e_max = std::max(e_max, o.e), m = std::max(m, o.z);
      entropy -= o.p > 0 ? o.p * std::log(o.p) : 0;
      p2 += o.p * o.p, p3 += o.p * o.p * o.p;
      if (o.key >= 0) sum += o.z, sumsq += o.z * o.z;
    }
    w.worst_first_order = std::max(w.worst_first_order, e_max + e_mean);
    w.lse_tol[r] = kSafety * (e_mean + kU32 * (nn + 4 + std::abs(ref.lse[r])));
    // H = -sum p ln p moves by sum_j p_j |ln p_j + H| e_j under logit errors; the online form
    // ln l - t'/l adds the error of l and of t' = sum e^{z-m} (z - m).
    double h_tol = kU32 * (nn + 4), sum_tol = 0, sumsq_tol = 0, p2_tol = 0, p3_tol = 0, l = 0;
    for (const Outcome& o : row) {
      l += std::exp(o.z - m);
      // p_j moves by p_j (e_j - Ebar) under logit errors, and by the normalisation's rounding.
      const double nearby = o.e + e_mean + kU32 * (nn + 4);
      p2_tol += 2 * o.p * o.p * nearby;
      p3_tol += 3 * o.p * o.p * o.p * nearby;
      const double lnp = o.p > 0 ? std::log(o.p) : 0;
      h_tol += o.p * std::abs(lnp + entropy) * o.e +
               o.p * std::abs(o.z - m) * (o.e + kU32 * (2 * nn + 8));
      if (o.key < 0) continue;  // the moments are over the visible logits
      sum_tol += o.f + kU32 * nn * std::abs(o.z);
      sumsq_tol += 2 * std::abs(o.z) * o.f + kU32 * nn * o.z * o.z;
    }
    w.probes.score_sum[r] = sum;
    w.probes.score_sumsq[r] = sumsq;
    w.probes.entropy[r] = entropy;
    w.probes.max_weight[r] = 1.0 / l;
    w.probes.sum_p2[r] = p2;
    w.probes.sum_p3[r] = p3;
    w.p2_tol[r] = kSafety * p2_tol + 1e-30;
    w.p3_tol[r] = kSafety * p3_tol + 1e-30;
    w.entropy_tol[r] = kSafety * h_tol;
    // 1 / l with l = sum e^{z - m}: the logits' errors, the largest one's as the shift m, and
    // the sum's rounding.
    w.max_weight_tol[r] = kSafety * (1.0 / l) * (e_mean + e_max + kU32 * (nn + 4));
    w.sum_tol[r] = kSafety * sum_tol + 1e-30;
    w.sumsq_tol[r] = kSafety * sumsq_tol + 1e-30;
    for (std::int64_t x = 0; x < s.d_v; ++x) {
      const double o = ref.out[r * s.d_v + x];
      double spread = 0, mass = 0, under = 0;
      for (const Outcome& oc : row) {
        if (oc.key < 0) {  // the sink: no value
          spread += oc.p * std::abs(o) * (oc.e + e_mean);
          continue;
        }
        const std::int64_t row_j = kv * s.n_kv + oc.key;
        const double vj = in.v[row_j * s.d_v + x], ev = rounding.absolute(vj, v_max[row_j]);
        // The weights move the rounded value, off by ev more.
        spread += oc.p * (std::abs(vj - o) + ev) * (oc.e + e_mean);
        mass += oc.p * std::abs(vj);
        under += oc.p * ev;
      }
      w.out_tol[r * s.d_v + x] = kSafety * (spread + mass * (rounding.value + (2 * nn + 8) * kU32) +
                                            (1 + rounding.value + (2 * nn + 8) * kU32) * under);
    }
  }
  return w;
}

// ALiBi's slopes for h heads (Press et al.: 2^(-8 k / h), k = 1..h).
inline std::vector<float> alibi(std::int64_t heads) {
  std::vector<float> x;
  for (std::int64_t k = 1; k <= heads; ++k) x.push_back(float(std::exp2(-8.0 * k / heads)));
  return x;
}
// Llama 4's temperature per query row: 1 + 0.1 ln(1 + floor((p + 1) / 8)) at position p.
inline std::vector<float> temperature(const Shape& s) {
  std::vector<float> x;
  for (std::int64_t i = 0; i < s.n_q; ++i)
    x.push_back(float(1 + 0.1 * std::log(1 + std::floor(double(i + s.n_kv - s.n_q + 1) / 8))));
  return x;
}

// The catalogue. Query tiles of the fused kernels are 48 rows and key tiles 128 keys
// (kernels/query_blocks.hpp): chunks and documents here end inside tiles, windows cut tiles at
// both ends, and rows before the keys see none.
inline std::vector<Case> cases() {
  const Shape prefill{.batch_heads = 2, .n_q = 130, .n_kv = 130, .d_k = 32, .d_v = 24};
  const Shape grouped{.batch_heads = 8, .n_q = 70, .n_kv = 200, .d_k = 64, .d_v = 40, .group = 4};
  const Shape decode{.batch_heads = 8, .n_q = 1, .n_kv = 300, .d_k = 64, .d_v = 64, .group = 4};
  const Shape few{.batch_heads = 4, .n_q = 9, .n_kv = 4, .d_k = 16, .d_v = 8, .group = 2};
  std::vector<Case> c;
  c.push_back({.shape = prefill, .causal = true, .window_left = 0, .name = "a window of 1"});
  c.push_back(
      {.shape = prefill, .causal = true, .window_left = 1000, .name = "a window wider than N"});
  c.push_back({.shape = prefill,
               .window_left = 20,
               .window_right = 7,
               .name = "a two-sided window (bidirectional)"});
  c.push_back({.shape = prefill,
               .causal = true,
               .chunk = 40,
               .name = "chunks of 40: boundaries inside a query and a key tile"});
  c.push_back({.shape = grouped,
               .causal = true,
               .chunk = 100,
               .name = "chunks with grouped heads, n_q < n_kv"});
  c.push_back({.shape = prefill,
               .causal = true,
               .documents = {0, 5, 6, 50, 129},
               .name = "documents, one of one token, the last of one token"});
  c.push_back({.shape = prefill,
               .documents = {0, 47, 49},
               .name = "bidirectional documents across a tile boundary"});
  c.push_back({.shape = prefill, .causal = true, .prefix = 20, .name = "prefix-LM"});
  c.push_back({.shape = few,
               .causal = true,
               .sinks = {0.5f, -1.0f},
               .name = "rows that see no key (n_q > n_kv), with sinks"});
  c.push_back({.shape = few, .causal = true, .window_left = 1, .name = "n_q > n_kv, a window"});
  c.push_back(
      {.shape = few, .chunk = 3, .name = "n_q > n_kv, chunks: rows before the keys see none"});
  c.push_back({.shape = prefill,
               .causal = true,
               .sinks = {kNoSink, 0.25f},
               .name = "a sink of -inf and a finite one"});
  c.push_back({.shape = grouped, .causal = true, .sinks = {60.0f, -3.0f}, .name = "a large sink"});
  c.push_back({.shape = decode,
               .sinks = {1000.0f, 2.0f, kNoSink, -1.0f, 0.0f, 3.0f, 1.0f, 0.5f},
               .name = "decode, a sink of 1000 (the row's weight is all on it)"});
  c.push_back({.shape = prefill, .causal = true, .softcap = 0.05f, .name = "soft-cap, tiny c"});
  c.push_back({.shape = prefill,
               .causal = true,
               .softcap = 5.0f,
               .scale = 1,
               .input_std = 2,
               .name = "soft-cap that saturates"});
  c.push_back({.shape = grouped,
               .causal = true,
               .alibi_slopes = alibi(8),
               .name = "ALiBi with grouped heads"});
  c.push_back({.shape = prefill,
               .causal = true,
               .temperature = temperature(prefill),
               .name = "temperature per row"});
  c.push_back({.shape = decode,
               .causal = true,
               .window_left = 127,
               .softcap = 30.0f,
               .sinks = {0.5f, 1.5f},
               .name = "decode, window 128 of 300, soft-cap and sinks"});
  c.push_back({.shape = {.batch_heads = 4, .n_q = 3, .n_kv = 260, .d_k = 32, .d_v = 16, .group = 4},
               .causal = true,
               .window_left = 99,
               .alibi_slopes = alibi(4),
               .temperature = {1.0f, 1.25f, 0.75f},
               .name = "speculative decode: window, ALiBi, temperature"});
  // Gemma 2's layers (soft-cap 50; local: window 4096 -> here 50), gpt-oss's (sinks, window 128
  // -> here 33, grouped) and Llama 4's chunked ones with its temperature.
  c.push_back({.shape = grouped,
               .causal = true,
               .window_left = 49,
               .softcap = 50.0f,
               .scale = 1,
               .name = "Gemma 2: local window and soft-cap, unscaled"});
  c.push_back({.shape = grouped,
               .causal = true,
               .window_left = 32,
               .sinks = {0.1f, -0.7f, 1.2f, 2.0f, -5.0f, 0.0f, 0.3f, 0.9f},
               .name = "gpt-oss: window and a sink per head"});
  c.push_back({.shape = grouped,
               .causal = true,
               .chunk = 64,
               .temperature = temperature(grouped),
               .name = "Llama 4: chunks and temperature"});
  c.push_back({.shape = prefill,
               .causal = true,
               .prefix = 10,
               .window_left = 15,
               .documents = {0, 60},
               .softcap = 2.0f,
               .alibi_slopes = alibi(2),
               .sinks = {-0.5f, 0.5f},
               .temperature = temperature(prefill),
               .name = "everything at once"});
  std::uint32_t seed = 3900;
  for (Case& x : c) x.seed = seed++, x.threads = 2;
  return c;
}

}  // namespace catalogue
