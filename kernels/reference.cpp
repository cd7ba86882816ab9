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

// One query row in double: scores, stable softmax, weighted sum of values.
template <typename In>
double reference_row(const Shape& s, const In* q, const In* k, const In* v, double scale,
                     std::int64_t visible, double* out, std::vector<double>& scores) {
  scores.assign(visible, 0.0);
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < visible; ++j) {
    double dot = 0;
    for (std::int64_t c = 0; c < s.d_k; ++c) dot += double(q[c]) * double(k[j * s.d_k + c]);
    scores[j] = scale * dot;
    m = std::max(m, scores[j]);
  }
  for (std::int64_t c = 0; c < s.d_v; ++c) out[c] = 0;
  if (visible == 0) return -std::numeric_limits<double>::infinity();
  double l = 0;
  for (std::int64_t j = 0; j < visible; ++j) l += std::exp(scores[j] - m);
  for (std::int64_t j = 0; j < visible; ++j) {
    const double p = std::exp(scores[j] - m) / l;
    for (std::int64_t c = 0; c < s.d_v; ++c) out[c] += p * double(v[j * s.d_v + c]);
  }
  return m + std::log(l);
}

// The registry entry: fp32 tensors in, computed in double, rounded once on output.
void reference_forward(const ForwardArgs& a) {
  const Shape& s = a.shape;
  std::vector<double> scores, row_out(s.d_v);
#pragma omp parallel for num_threads(a.threads) firstprivate(scores, row_out) schedule(static)
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t b = r / s.n_q, i = r % s.n_q;
    const std::int64_t visible = visible_keys(s, a.causal, i);
    const float* k = a.k + b * s.n_kv * s.d_k;
    const double lse = reference_row(s, a.q + r * s.d_k, k, a.v + b * s.n_kv * s.d_v, a.scale,
                                     visible, row_out.data(), scores);
    for (std::int64_t c = 0; c < s.d_v; ++c) a.out[r * s.d_v + c] = float(row_out[c]);
    if (a.lse) a.lse[r] = float(lse);
    if (a.probes) {
      a.probes->nonfinite[r] = detail::count_nonfinite(a.out + r * s.d_v, s.d_v);
      detail::probe_scores(*a.probes, r, scores.data(), visible);
    }
  }
}

// The backward of one batch-head in double, from scratch (the forward is recomputed):
// P = softmax(S), dV = P^T dO, dP = dO V^T, dS = P o (dP - rowsum(P o dP)), dQ = c dS K,
// dK = c dS^T Q.
template <typename In, typename Out>
void reference_backward_head(const Shape& s, const In* q, const In* k, const In* v, const In* d_out,
                             double scale, bool causal, Out* d_q, Out* d_k, Out* d_v,
                             GradProbes* probes, std::int64_t first_row) {
  std::vector<double> dk(s.n_kv * s.d_k, 0.0), dv(s.n_kv * s.d_v, 0.0), scores, ds, o(s.d_v);
  for (std::int64_t i = 0; i < s.n_q; ++i) {
    const std::int64_t visible = visible_keys(s, causal, i);
    const In* qi = q + i * s.d_k;
    const In* doi = d_out + i * s.d_v;
    const double lse = reference_row(s, qi, k, v, scale, visible, o.data(), scores);
    double d = 0;  // rowsum(P o dP) = dO_i . O_i
    for (std::int64_t c = 0; c < s.d_v; ++c) d += double(doi[c]) * o[c];
    ds.assign(visible, 0.0);
    std::vector<double> dqi(s.d_k, 0.0);
    for (std::int64_t j = 0; j < visible; ++j) {
      const double p = std::exp(scores[j] - lse);
      double dp = 0;
      for (std::int64_t c = 0; c < s.d_v; ++c) {
        dp += double(doi[c]) * double(v[j * s.d_v + c]);
        dv[j * s.d_v + c] += p * double(doi[c]);
      }
      ds[j] = p * (dp - d);
      for (std::int64_t c = 0; c < s.d_k; ++c) {
        dqi[c] += scale * ds[j] * double(k[j * s.d_k + c]);
        dk[j * s.d_k + c] += scale * ds[j] * double(qi[c]);
      }
    }
    for (std::int64_t c = 0; c < s.d_k; ++c) d_q[i * s.d_k + c] = Out(dqi[c]);
    if (probes) detail::probe_gradients(*probes, first_row + i, ds.data(), visible);
  }
  for (std::size_t x = 0; x < dk.size(); ++x) d_k[x] = Out(dk[x]);
  for (std::size_t x = 0; x < dv.size(); ++x) d_v[x] = Out(dv[x]);
}

// The registry entry: fp32 tensors in, computed in double, rounded once on output. The
// forward's out and lse are not needed: the oracle recomputes them.
void reference_backward(const BackwardArgs& a) {
  const Shape& s = a.shape;
  const Shape head{1, s.n_q, s.n_kv, s.d_k, s.d_v};
#pragma omp parallel for num_threads(a.threads) schedule(static)
  for (std::int64_t b = 0; b < s.batch_heads; ++b)
    reference_backward_head(head, a.q + b * s.n_q * s.d_k, a.k + b * s.n_kv * s.d_k,
                            a.v + b * s.n_kv * s.d_v, a.d_out + b * s.n_q * s.d_v, a.scale,
                            a.causal, a.d_q + b * s.n_q * s.d_k, a.d_k + b * s.n_kv * s.d_k,
                            a.d_v + b * s.n_kv * s.d_v, a.probes, b * s.n_q);
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
                                                bool causal) {
  ReferenceGradients g{std::vector<double>(s.q_elements()), std::vector<double>(s.k_elements()),
                       std::vector<double>(s.v_elements())};
  const Shape head{1, s.n_q, s.n_kv, s.d_k, s.d_v};
  for (std::int64_t b = 0; b < s.batch_heads; ++b)
    reference_backward_head(head, q.data() + b * s.n_q * s.d_k, k.data() + b * s.n_kv * s.d_k,
                            v.data() + b * s.n_kv * s.d_v, d_out.data() + b * s.n_q * s.d_v, scale,
                            causal, g.d_q.data() + b * s.n_q * s.d_k,
                            g.d_k.data() + b * s.n_kv * s.d_k, g.d_v.data() + b * s.n_kv * s.d_v,
                            static_cast<GradProbes*>(nullptr), 0);
  return g;
}

ReferenceResult reference_attention(const Shape& s, std::span<const double> q,
                                    std::span<const double> k, std::span<const double> v,
                                    double scale, bool causal) {
  ReferenceResult res{std::vector<double>(s.out_elements()), std::vector<double>(s.rows())};
  std::vector<double> scores;
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t b = r / s.n_q, i = r % s.n_q;
    res.lse[r] = reference_row(s, q.data() + r * s.d_k, k.data() + b * s.n_kv * s.d_k,
                               v.data() + b * s.n_kv * s.d_v, scale, visible_keys(s, causal, i),
                               res.out.data() + r * s.d_v, scores);
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
