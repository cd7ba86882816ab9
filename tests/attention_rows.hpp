// The fp64 scores and weights of one query row of fp32 inputs: what the kernel tests derive
// their error bounds from (test_low_precision.cpp for bf16, test_ggml.cpp; the fp32 kernels'
// bounds are tests/attention_catalogue.hpp's).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

struct RowScores {
  std::vector<double> s;  // scale q.k_j over the n visible keys
  std::vector<double> a;  // |scale| sum_c |q_c k_jc|
  std::vector<double> p;  // softmax weights
  double m = 0;           // max_j s_j
  double range = 0;       // m - min_j s_j
  double l = 0;           // sum_j e^{s_j - m}
};

// q: the row's d_k entries; k: its head's keys, d_k entries each; n >= 1 visible keys.
inline RowScores row_scores(const float* q, const float* k, std::int64_t d_k, std::int64_t n,
                            double scale) {
  RowScores r;
  r.s.assign(n, 0);
  r.a.assign(n, 0);
  for (std::int64_t j = 0; j < n; ++j) {
    const float* kj = k + j * d_k;
    for (std::int64_t x = 0; x < d_k; ++x) {
      r.s[j] += double(q[x]) * kj[x];
      r.a[j] += std::abs(double(q[x]) * kj[x]);
    }
    r.s[j] *= scale;
    r.a[j] *= std::abs(scale);
  }
  r.m = *std::max_element(r.s.begin(), r.s.end());
  r.range = r.m - *std::min_element(r.s.begin(), r.s.end());
  r.p.assign(n, 0);
  for (std::int64_t j = 0; j < n; ++j) r.l += r.p[j] = std::exp(r.s[j] - r.m);
  for (auto& x : r.p) x /= r.l;
  return r;
}
