// Probes for kernels that hold a whole row of scores: the statistics of one query row,
// computed in double from the row's scaled scores. Internal to sdpa_kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "sdpa/kernels.hpp"

namespace sdpa::detail {

// Fills the row's score moments, entropy and max weight. Entropy uses the online-friendly form
// H = m + ln(l) - (sum e^{s-m} s) / l with m = max s, l = sum e^{s-m}, which needs no weights.
// Non-finite scores are counted and left out of the moments. A sink (a logit without a value,
// -inf for none) is one more outcome of the softmax: in the weights, not in the moments.
template <typename T>
void probe_scores(RowProbes& probes, std::int64_t row, const T* scores, std::int64_t n,
                  double sink = -std::numeric_limits<double>::infinity()) {
  double sum = 0, sumsq = 0, m = sink;
  std::int64_t nonfinite = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    const double s = static_cast<double>(scores[j]);
    if (!std::isfinite(s)) {
      ++nonfinite;
      continue;
    }
    sum += s;
    sumsq += s * s;
    m = std::max(m, s);
  }
  const bool has_sink = std::isfinite(sink);
  double l = has_sink ? std::exp(sink - m) : 0, t = has_sink ? l * sink : 0;
  for (std::int64_t j = 0; j < n; ++j) {
    const double s = static_cast<double>(scores[j]);
    if (!std::isfinite(s)) continue;
    const double e = std::exp(s - m);
    l += e;
    t += e * s;
  }
  const double p_sink = has_sink ? std::exp(sink - m) / l : 0;
  double p2 = p_sink * p_sink, p3 = p_sink * p_sink * p_sink;
  for (std::int64_t j = 0; j < n && l > 0; ++j) {
    const double s = static_cast<double>(scores[j]);
    if (!std::isfinite(s)) continue;
    const double p = std::exp(s - m) / l;
    p2 += p * p;
    p3 += p * p * p;
  }
  probes.score_sum[row] = sum;
  probes.score_sumsq[row] = sumsq;
  probes.entropy[row] = l > 0 ? m + std::log(l) - t / l : 0.0;
  probes.max_weight[row] = l > 0 ? 1.0 / l : 0.0;  // the largest weight is e^{m-m} / l
  probes.sum_p2[row] = p2;
  probes.sum_p3[row] = p3;
  probes.nonfinite[row] += nonfinite;
}

// Fills a backward's probes for one row from its gradients dS_j at the scaled scores.
template <typename T>
void probe_gradients(GradProbes& probes, std::int64_t row, const T* ds, std::int64_t n) {
  double sumsq = 0, max_abs = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    const double g = static_cast<double>(ds[j]);
    sumsq += g * g;
    max_abs = std::max(max_abs, std::abs(g));
  }
  std::int64_t participating = 0;
  for (std::int64_t j = 0; j < n; ++j)
    participating += std::abs(static_cast<double>(ds[j])) > kParticipationThreshold * max_abs;
  probes.ds_sumsq[row] = sumsq;
  probes.ds_max_abs[row] = max_abs;
  probes.participating[row] = participating;
  probes.visible[row] = n;
}

// A GEMM peer's materialised row r (of n_kv products scale q.k_j) becomes the row's logits
// (sdpa/mask.hpp): the temperature, soft-cap and ALiBi over the keys its mask shows, -inf over
// the others, so that the GEMMs stay plain products. Returns those keys; `sink` gets the row's.
inline KeyRange logits_in_place(const ForwardArgs& a, std::int64_t r, float* row, float& sink) {
  const Shape& s = a.shape;
  const std::int64_t i = r % s.n_q;
  const KeyRange keys = a.mask.visible(s, i);
  const RowLogits logits = row_logits(s, a.score_mod, a.scale, r / s.n_q, i);
  sink = logits.sink;
  const float temperature = a.score_mod.temperature.empty() ? 1.0f : a.score_mod.temperature[i];
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::fill(row, row + keys.begin, -kInf);
  std::fill(row + std::max(keys.begin, keys.end), row + s.n_kv, -kInf);
  if (!a.score_mod.none())
    for (std::int64_t j = keys.begin; j < keys.end; ++j)
      row[j] = logits.cap(row[j] * temperature) + logits.bias<float>(j);
  return keys;
}

template <typename T>
std::int64_t count_nonfinite(const T* x, std::int64_t n) {
  std::int64_t c = 0;
  for (std::int64_t j = 0; j < n; ++j) c += std::isfinite(static_cast<double>(x[j])) ? 0 : 1;
  return c;
}

}  // namespace sdpa::detail
