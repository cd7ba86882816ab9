// Rung 0 of the ladder: the fp64 oracle. Materialises the scores and weights of one row in
// double, with max subtraction; every other variant is tested against it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "probe_row.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa {
namespace {

// One query row in double: its logits (sdpa/mask.hpp) over the keys it sees, a stable softmax
// with the sink in its denominator, the weighted sum of values. Returns lse, the sink included.
struct RowInDouble {
  RowLogits logits;
  double scale;  // the call's scale times the row's temperature, in double
  KeyRange keys;
};

RowInDouble row_in_double(const Shape& s, const Mask& mask, const ScoreMod& mod, double scale,
                          std::int64_t r) {
  const std::int64_t i = r % s.n_q;
  return {.logits = row_logits(s, mod, float(scale), r / s.n_q, i),
          .scale = mod.temperature.empty() ? scale : scale * double(mod.temperature[i]),
          .keys = mask.visible(s, i)};
}

template <typename In>
double reference_row(const Shape& s, const In* q, const In* k, const In* v, const RowInDouble& row,
                     double* out, std::vector<double>& scores) {
  const std::int64_t first = row.keys.begin, n = row.keys.size();
  scores.assign(n, 0.0);
  const double sink = row.logits.sink;
  double m = sink;
  for (std::int64_t j = 0; j < n; ++j) {
    double dot = 0;
    for (std::int64_t c = 0; c < s.d_k; ++c)
      dot += double(q[c]) * double(k[(first + j) * s.d_k + c]);
    scores[j] = row.logits.cap(row.scale * dot) + row.logits.bias<double>(first + j);
    m = std::max(m, scores[j]);
  }
  for (std::int64_t c = 0; c < s.d_v; ++c) out[c] = 0;
  if (n == 0) return sink;  // no key: output 0, lse the sink's (-inf without one)
  double l = std::exp(sink - m);
  for (std::int64_t j = 0; j < n; ++j) l += std::exp(scores[j] - m);
  for (std::int64_t j = 0; j < n; ++j) {
    const double p = std::exp(scores[j] - m) / l;
    for (std::int64_t c = 0; c < s.d_v; ++c) out[c] += p * double(v[(first + j) * s.d_v + c]);
  }
  return m + std::log(l);
}

// The registry entry: fp32 tensors in, computed in double, rounded once on output.
void reference_forward(const ForwardArgs& a) {
  const Shape& s = a.shape;
  std::vector<double> scores, row_out(s.d_v);
#pragma omp parallel for num_threads(a.threads) firstprivate(scores, row_out) schedule(static)
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t kv = s.kv_head(r / s.n_q);
    const RowInDouble row = row_in_double(s, a.mask, a.score_mod, a.scale, r);
    const double lse = reference_row(s, a.q + r * s.d_k, a.k + kv * s.n_kv * s.d_k,
                                     a.v + kv * s.n_kv * s.d_v, row, row_out.data(), scores);
    for (std::int64_t c = 0; c < s.d_v; ++c) a.out[r * s.d_v + c] = float(row_out[c]);
    if (a.lse) a.lse[r] = float(lse);
    if (a.probes) {
      a.probes->nonfinite[r] = detail::count_nonfinite(a.out + r * s.d_v, s.d_v);
      detail::probe_scores(*a.probes, r, scores.data(), row.keys.size(), row.logits.sink);
    }
  }
}

// The backward of one K/V head and the group of query heads that read it, in double, from
// scratch (the forward is recomputed): P = softmax(S), dV = P^T dO, dP = dO V^T,
// dS = P o (dP - rowsum(P o dP)), then through the soft-cap, dS' = dS o (1 - tanh^2), and
// dQ = c dS' K, dK = c dS'^T Q with c the row's scale; a sink's gradient is -p_sink rowsum(P o dP).
// dK, dV and the sinks' gradients sum over every row of every query head of the group, in
// order, and are rounded once.
template <typename In, typename Out>
void reference_backward_group(const Shape& s, std::int64_t kv, const In* q, const In* k,
                              const In* v, const In* d_out, double scale, const Mask& mask,
                              const ScoreMod& mod, Out* d_q, Out* d_k, Out* d_v,
                              std::vector<double>& d_sinks, GradProbes* probes) {
  k += kv * s.n_kv * s.d_k;
  v += kv * s.n_kv * s.d_v;
  std::vector<double> dk(s.n_kv * s.d_k, 0.0), dv(s.n_kv * s.d_v, 0.0), scores, ds, o(s.d_v);
  std::vector<double> dqi(s.d_k);
  for (std::int64_t r = kv * s.group * s.n_q; r < (kv + 1) * s.group * s.n_q; ++r) {
    const RowInDouble row = row_in_double(s, mask, mod, scale, r);
    const std::int64_t first = row.keys.begin, n = row.keys.size();
    const In* qi = q + r * s.d_k;
    const In* doi = d_out + r * s.d_v;
    const double lse = reference_row(s, qi, k, v, row, o.data(), scores);
    double d = 0;  // rowsum(P o dP) = dO_i . O_i
    for (std::int64_t c = 0; c < s.d_v; ++c) d += double(doi[c]) * o[c];
    ds.assign(n, 0.0);
    dqi.assign(s.d_k, 0.0);
    for (std::int64_t j = 0; j < n; ++j) {
      const double p = std::exp(scores[j] - lse);
      const std::int64_t key = first + j;
      double dp = 0;
      for (std::int64_t c = 0; c < s.d_v; ++c) {
        dp += double(doi[c]) * double(v[key * s.d_v + c]);
        dv[key * s.d_v + c] += p * double(doi[c]);
      }
      ds[j] = p * (dp - d) * row.logits.cap_derivative(scores[j] - row.logits.bias<double>(key));
      for (std::int64_t c = 0; c < s.d_k; ++c) {
        dqi[c] += row.scale * ds[j] * double(k[key * s.d_k + c]);
        dk[key * s.d_k + c] += row.scale * ds[j] * double(qi[c]);
      }
    }
    if (!mod.sinks.empty() && std::isfinite(row.logits.sink))
      d_sinks[(r / s.n_q) % mod.sinks.size()] -= std::exp(double(row.logits.sink) - lse) * d;
    for (std::int64_t c = 0; c < s.d_k; ++c) d_q[r * s.d_k + c] = Out(dqi[c]);
    if (probes) detail::probe_gradients(*probes, r, ds.data(), n);
  }
  d_k += kv * s.n_kv * s.d_k;
  d_v += kv * s.n_kv * s.d_v;
  for (std::size_t x = 0; x < dk.size(); ++x) d_k[x] = Out(dk[x]);
  for (std::size_t x = 0; x < dv.size(); ++x) d_v[x] = Out(dv[x]);
}

// The registry entry: fp32 tensors in, computed in double, rounded once on output. The
// forward's out and lse are not needed: the oracle recomputes them. Heads run in parallel, each
// with its own sums of the sinks' gradients, added in head order.
void reference_backward(const BackwardArgs& a) {
  const Shape& s = a.shape;
  const std::size_t sinks = a.score_mod.sinks.size();
  std::vector<std::vector<double>> d_sinks(s.kv_batch_heads(), std::vector<double>(sinks, 0.0));
#pragma omp parallel for num_threads(a.threads) schedule(static)
  for (std::int64_t kv = 0; kv < s.kv_batch_heads(); ++kv)
    reference_backward_group(s, kv, a.q, a.k, a.v, a.d_out, a.scale, a.mask, a.score_mod, a.d_q,
                             a.d_k, a.d_v, d_sinks[kv], a.probes);
  if (a.d_sinks)
    for (std::size_t h = 0; h < sinks; ++h) {
      double sum = 0;
      for (const auto& part : d_sinks) sum += part[h];
      a.d_sinks[h] = float(sum);
    }
}

// A row of scores and of output in double per thread (and the master's copy of the output row);
// the backward, per head it runs, dK, dV, a row of scores and of dS, in double.
double reference_workspace(const Shape& s, Pass pass, int threads) {
  if (pass == Pass::forward)
    return 8.0 * (double(threads) * double(s.n_kv + s.d_v) + double(s.d_v));
  const double heads = double(std::min<std::int64_t>(threads, s.batch_heads));
  return heads * 8.0 * double(s.n_kv * (s.d_k + s.d_v + 2) + s.d_k + s.d_v);
}

}  // namespace

ReferenceGradients reference_attention_backward(const Shape& s, std::span<const double> q,
                                                std::span<const double> k,
                                                std::span<const double> v,
                                                std::span<const double> d_out, double scale,
                                                const Mask& mask, const ScoreMod& mod) {
  ReferenceGradients g{std::vector<double>(s.q_elements()), std::vector<double>(s.k_elements()),
                       std::vector<double>(s.v_elements()),
                       std::vector<double>(mod.sinks.size(), 0.0)};
  for (std::int64_t kv = 0; kv < s.kv_batch_heads(); ++kv)
    reference_backward_group(s, kv, q.data(), k.data(), v.data(), d_out.data(), scale, mask, mod,
                             g.d_q.data(), g.d_k.data(), g.d_v.data(), g.d_sinks, nullptr);
  return g;
}

ReferenceResult reference_attention(const Shape& s, std::span<const double> q,
                                    std::span<const double> k, std::span<const double> v,
                                    double scale, const Mask& mask, const ScoreMod& mod) {
  ReferenceResult res{std::vector<double>(s.out_elements()), std::vector<double>(s.rows())};
  std::vector<double> scores;
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t kv = s.kv_head(r / s.n_q);
    res.lse[r] = reference_row(
        s, q.data() + r * s.d_k, k.data() + kv * s.n_kv * s.d_k, v.data() + kv * s.n_kv * s.d_v,
        row_in_double(s, mask, mod, scale, r), res.out.data() + r * s.d_v, scores);
  }
  return res;
}

std::vector<Kernel> detail::reference_kernels() {
  return {{.name = "reference",
           .family = "reference",
           .isa = "scalar",
           .description = "fp64 oracle: materialised scores and weights, max-subtracted softmax",
           .forward = &reference_forward,
           .backward = &reference_backward,
           .fp64 = true,
           .workspace = &reference_workspace}};
}

}  // namespace sdpa
