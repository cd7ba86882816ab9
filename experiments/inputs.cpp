#include "inputs.hpp"

#include <boost/random/uniform_real_distribution.hpp>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <vector>

namespace sdpa {
namespace {

// out [n, d_k] = x [n, d_model] W with x of unit variance.
void project(PhiloxStream& rng, const std::vector<double>& w, std::int64_t n, std::int64_t d_model,
             std::int64_t d_k, std::span<float> out) {
  std::vector<double> x(d_model), row(d_k);
  for (std::int64_t i = 0; i < n; ++i) {
    fill_normal<double>(rng, x);
    std::fill(row.begin(), row.end(), 0.0);
    for (std::int64_t a = 0; a < d_model; ++a)
      for (std::int64_t b = 0; b < d_k; ++b) row[b] += x[a] * w[a * d_k + b];
    for (std::int64_t b = 0; b < d_k; ++b) out[i * d_k + b] = float(row[b]);
  }
}

}  // namespace

std::vector<double> initial_weights(PhiloxStream& rng, const std::string& init, std::int64_t fan_in,
                                    std::int64_t fan_out) {
  std::vector<double> w(fan_in * fan_out);
  const double variance = theory::projection_weight_variance(init, double(fan_in), double(fan_out));
  if (init == "pytorch") {
    const double bound = std::sqrt(3 * variance);  // U(-b, b) has variance b^2 / 3
    boost::random::uniform_real_distribution<double> uniform(-bound, bound);
    for (double& x : w) x = uniform(rng);
  } else {
    fill_normal<double>(rng, w, 0, std::sqrt(variance));
  }
  return w;
}

InputSpec InputSpec::from(const json& p) {
  InputSpec s;
  s.kind = p.value("inputs", s.kind);
  s.mean_q = p.value("mean_q", s.mean_q);
  s.std_q = p.value("std_q", s.std_q);
  s.mean_k = p.value("mean_k", s.mean_k);
  s.std_k = p.value("std_k", s.std_k);
  s.alignment = p.value("alignment", s.alignment);
  s.d_model = p.value("d_model", s.d_model);
  s.init = p.value("init", std::string("glorot"));
  return s;
}

void InputSpec::sample(PhiloxStream& rng, std::int64_t n_q, std::int64_t n_kv, std::int64_t d_k,
                       std::span<float> q, std::span<float> k) const {
  if (kind == "projected") {
    const auto w_q = initial_weights(rng, init, d_model, d_k);
    const auto w_k = initial_weights(rng, init, d_model, d_k);
    project(rng, w_q, n_q, d_model, d_k, q);
    project(rng, w_k, n_kv, d_model, d_k, k);
    return;
  }
  fill_normal<float>(rng, q, mean_q, std_q);
  fill_normal<float>(rng, k, mean_k, std_k);
  if (alignment > 0) {
    const float rho = float(alignment), rest = float(std::sqrt(1 - alignment * alignment));
    const std::int64_t pairs = std::min(n_q, n_kv) * d_k;
    for (std::int64_t i = 0; i < pairs; ++i) k[i] = rho * q[i] + rest * k[i];
  }
}

theory::ScoreModel InputSpec::score_model(double d_k, double scale, std::int64_t n_q,
                                          std::int64_t n_kv) const {
  if (kind == "projected") {
    const double sd = std::sqrt(theory::projected_variance(init, double(d_model), d_k));
    return {d_k, scale, 0, sd, 0, sd, n_q, n_kv};
  }
  return {d_k, scale, mean_q, std_q, mean_k, std_k, n_q, n_kv};
}

std::string InputSpec::fp32_problem(double d_k, double scale) const {
  const double tiny = std::ldexp(double(FLT_MIN), 24);  // 2^-102
  const theory::ScoreModel m = score_model(d_k, scale, 1, 1);
  // The largest entries (projected inputs have unit-variance tokens through W: their sd is
  // the model's), and the typical ones.
  const double q_max = std::abs(m.mean_q) + 10 * m.std_q, k_max = std::abs(m.mean_k) + 10 * m.std_k;
  const double q_rms = std::hypot(m.mean_q, m.std_q), k_rms = std::hypot(m.mean_k, m.std_k);
  const double score_max = d_k * q_max * k_max * std::max(1.0, std::abs(scale));
  const double product = q_rms * k_rms * std::min(1.0, std::abs(scale));
  char what[256];
  const char* remedy = "reduce the means, standard deviations or scale";
  if (q_max > FLT_MAX || k_max > FLT_MAX)
    std::snprintf(what, sizeof what, "/%s: inputs reach about %.3g (|mean| + 10 sd)",
                  q_max >= k_max ? (m.mean_q != 0 ? "mean_q" : "std_q")
                                 : (m.mean_k != 0 ? "mean_k" : "std_k"),
                  std::max(q_max, k_max));
  else if (score_max > FLT_MAX)
    std::snprintf(what, sizeof what,
                  ": scores c q.k can reach about %.3g (d_k %g times the largest entries %.3g "
                  "and %.3g, scale %g)",
                  score_max, d_k, q_max, k_max, scale);
  else if (std::min(q_rms, k_rms) < tiny || product < tiny)
    remedy = "increase the standard deviations or the scale",
    std::snprintf(what, sizeof what,
                  ": entries of about %.3g and %.3g (scale %g) make products of about %.3g, "
                  "below fp32's full precision (2^-102 = %.3g)",
                  q_rms, k_rms, scale, q_rms * k_rms * std::abs(scale), tiny);
  else
    return "";
  return std::string(what) + "; the kernels compute in fp32 (largest 3.4e+38): " + remedy;
}

}  // namespace sdpa
