// Theory the experiments print beside their measurements (docs/theory.md, "Scores"). Each function
// says what it assumes and how exact it is. Notation: q, k have i.i.d. entries with means
// mu_q, mu_k and standard deviations sigma_q, sigma_k; c is the scale; S = c Q K^T is
// n_q x n_k with m = n_q n_k entries.
#pragma once

#include <cstdint>
#include <string>

namespace sdpa::theory {

struct ScoreModel {
  double d_k = 1;
  double scale = 1;
  double mean_q = 0, std_q = 1;
  double mean_k = 0, std_k = 1;
  std::int64_t n_q = 1, n_k = 1;

  double entries() const { return double(n_q) * double(n_k); }
};

// E[s] = c d_k mu_q mu_k. Exact for independent q, k.
double score_mean(const ScoreModel& m);

// Var(s) = c^2 d_k [(s_q^2 + mu_q^2)(s_k^2 + mu_k^2) - mu_q^2 mu_k^2]. Exact for independent q, k.
double score_variance(const ScoreModel& m);

// Var of the mean of one product's m entries. Entries sharing a row (or column) covary by
// c^2 d_k mu_k^2 s_q^2 (or c^2 d_k mu_q^2 s_k^2); with zero means they are uncorrelated.
// Exact.
double product_mean_variance(const ScoreModel& m);

// E[np.var(S)] (ddof 0, one product) = Var(s) - Var(mean of S); Var(s)(1 - 1/m) with zero
// means: 1.5 for a 2 x 2 product of standard normals. Exact.
double expected_sample_variance(const ScoreModel& m);

// E[np.var of T products stacked] = Var(s) - Var(mean of S) / T. Exact.
double expected_pooled_variance(const ScoreModel& m, std::int64_t trials);

// Standard deviation of np.var(S) across products: sqrt([(2d^2 + 6d) + 2d(n_q + n_k - 2)] / m)
// times c^2 s_q^2 s_k^2. Assumes zero means and normal entries; approximate: it ignores the
// subtracted squared mean, an O(1/m) relative error (poor for tiny products such as 2 x 2).
double sample_variance_stddev(const ScoreModel& m);

// Aligned pairs k = rho q + sqrt(1 - rho^2) z with standard-normal q, z: E[c q.k] = c rho d_k
// and Var(c q.k) = c^2 d_k (1 + rho^2). Exact.
double aligned_mean(double d_k, double scale, double rho);
double aligned_variance(double d_k, double scale, double rho);

// Var of x W for x with unit variance and W (d_model x d_k) with Var(w) = v: d_model v, where
// v = 2 / (d_model + d_k) (Glorot) or 1 / (3 d_model) (PyTorch's Linear default, uniform
// +-1/sqrt(d_model)). Exact for independent x and W.
double projection_weight_variance(const std::string& init, double d_model, double d_k);
double projected_variance(const std::string& init, double d_model, double d_k);

// Softmax over N i.i.d. Gaussian logits of variance s2 (docs/theory.md,
// "Softmax entropy and saturation"), all asymptotic
// in N (they assume the sums over keys self-average, s2 well below 2 ln N): E[H] ~ ln N - s2 / 2,
// valid while s2 < 2 ln N (where it reaches 0: the freezing point).
double entropy_bulk(double sigma2, double n_keys);
// E sum p^k ~ N^{1-k} e^{k (k-1) s2 / 2}, so the softmax Jacobian J = diag(p) - p p^T has
// E ||J||_F^2 = E[sum p^2 - 2 sum p^3 + (sum p^2)^2] ~ e^{s2}/N - 2 e^{3 s2}/N^2 + e^{2 s2}/N^2,
// to order 1/N^2; valid while s2 < ln N / 2 (the second moment of e^s must self-average).
double jacobian_fro2_bulk(double sigma2, double n_keys);

}  // namespace sdpa::theory
