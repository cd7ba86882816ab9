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

}  // namespace

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
           .fp64 = true}};
}

}  // namespace sdpa
