#include "sdpa/stability_analysis.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sdpa/stats.hpp"

namespace sdpa::stability_analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A number of a record; null is how a result file stores a non-finite one.
double number_of(const json& x) { return x.is_number() ? x.get<double>() : kNaN; }

}  // namespace

bool rate_trains(const json& rate) {
  const json& trained = rate["trained"];
  return 2 * trained["count"].get<std::int64_t>() > trained["runs"].get<std::int64_t>();
}

std::vector<double> trainable_rates(const json& record) {
  std::vector<double> out;
  for (const auto& rate : record["learning_rates"])
    if (rate_trains(rate)) out.push_back(rate["learning_rate"].get<double>());
  return out;
}

LogitGrowth logit_growth(const json& rate) {
  LogitGrowth g{kNaN, kNaN, kNaN};
  for (const auto& layer : rate["curves"]["layers"]) {
    const json& logit = layer["max_logit"];
    const json& entropy = layer["entropy"];
    for (std::size_t i = 0; i < logit.size(); ++i) {
      const double x = number_of(logit[i]);
      if (std::isnan(x)) continue;
      if (i == 0) g.initial = std::isnan(g.initial) ? x : std::max(g.initial, x);
      g.peak = std::isnan(g.peak) ? x : std::max(g.peak, x);
    }
    for (std::size_t i = 1; i < entropy.size(); ++i) {
      const double h = number_of(entropy[i]);
      if (!std::isnan(h))
        g.lowest_entropy = std::isnan(g.lowest_entropy) ? h : std::min(g.lowest_entropy, h);
    }
  }
  return g;
}

bool saturates(const LogitGrowth& g, double n_keys) {
  return g.lowest_entropy < kSaturatedEntropyShare * std::log(n_keys);
}

double gradient_kept(const json& rate) {
  double first = 0, last = 0;
  for (const auto& layer : rate["curves"]["layers"])
    for (const char* w : {"grad_norm_w_q", "grad_norm_w_k"}) {
      const json& g = layer[w];
      if (g.empty()) return kNaN;
      first += number_of(g.front()), last += number_of(g.back());
    }
  return last / first;
}

bool none_diverged(const json& rate) { return rate["diverged"]["count"].get<std::int64_t>() == 0; }

std::optional<Difference> sensitivity_difference(const json& a, const json& b) {
  const json &x = a["sensitivity"]["per_seed"], &y = b["sensitivity"]["per_seed"];
  if (x.size() != y.size() || x.empty()) return std::nullopt;
  std::vector<double> d;
  for (std::size_t t = 0; t < x.size(); ++t) d.push_back(number_of(x[t]) - number_of(y[t]));
  const auto ci = stats::mean_ci(d);
  return Difference{stats::mean(d), ci.low, ci.high, d.size()};
}

}  // namespace sdpa::stability_analysis
