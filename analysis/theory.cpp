#include "sdpa/theory.hpp"

#include <cmath>
#include <stdexcept>

namespace sdpa::theory {

double score_mean(const ScoreModel& m) { return m.scale * m.d_k * m.mean_q * m.mean_k; }

double score_variance(const ScoreModel& m) {
  const double vq = m.std_q * m.std_q, vk = m.std_k * m.std_k;
  const double mq2 = m.mean_q * m.mean_q, mk2 = m.mean_k * m.mean_k;
  return m.scale * m.scale * m.d_k * ((vq + mq2) * (vk + mk2) - mq2 * mk2);
}

double product_mean_variance(const ScoreModel& m) {
  const double c2d = m.scale * m.scale * m.d_k;
  const double row_cov = c2d * m.mean_k * m.mean_k * m.std_q * m.std_q;
  const double col_cov = c2d * m.mean_q * m.mean_q * m.std_k * m.std_k;
  const double entries = m.entries();
  // Ordered pairs of distinct entries sharing a row: n_q n_k (n_k - 1); a column: n_k n_q (n_q -
  // 1).
  const double covariances = entries * (double(m.n_k - 1) * row_cov + double(m.n_q - 1) * col_cov);
  return (entries * score_variance(m) + covariances) / (entries * entries);
}

double expected_sample_variance(const ScoreModel& m) {
  return score_variance(m) - product_mean_variance(m);
}

double expected_pooled_variance(const ScoreModel& m, std::int64_t trials) {
  return score_variance(m) - product_mean_variance(m) / double(trials);
}

double sample_variance_stddev(const ScoreModel& m) {
  const double d = m.d_k;
  const double unit = ((2 * d * d + 6 * d) + 2 * d * double(m.n_q + m.n_k - 2)) / m.entries();
  const double s = m.scale * m.scale * m.std_q * m.std_q * m.std_k * m.std_k;
  return std::sqrt(unit) * s;
}

double aligned_mean(double d_k, double scale, double rho) { return scale * rho * d_k; }

double aligned_variance(double d_k, double scale, double rho) {
  return scale * scale * d_k * (1 + rho * rho);
}

double projection_weight_variance(const std::string& init, double d_model, double d_k) {
  if (init == "glorot") return 2.0 / (d_model + d_k);
  if (init == "pytorch") return 1.0 / (3.0 * d_model);
  throw std::invalid_argument("unknown initialisation: " + init);
}

double projected_variance(const std::string& init, double d_model, double d_k) {
  return d_model * projection_weight_variance(init, d_model, d_k);
}

double entropy_bulk(double sigma2, double n_keys) { return std::log(n_keys) - sigma2 / 2; }

double jacobian_fro2_bulk(double sigma2, double n) {
  return std::exp(sigma2) / n + (std::exp(2 * sigma2) - 2 * std::exp(3 * sigma2)) / (n * n);
}

}  // namespace sdpa::theory
