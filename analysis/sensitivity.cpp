#include "sdpa/sensitivity.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace sdpa::stats {

double lr_sensitivity(std::span<const double> final_losses, double initial_loss) {
  double capped_sum = 0, best = std::numeric_limits<double>::infinity();
  for (const double l : final_losses) {
    capped_sum += std::isfinite(l) ? std::min(l, initial_loss) : initial_loss;
    if (std::isfinite(l)) best = std::min(best, l);
  }
  if (!std::isfinite(best)) return std::numeric_limits<double>::quiet_NaN();
  return capped_sum / double(final_losses.size()) - best;
}

Sensitivity lr_sensitivity_across_seeds(const std::vector<std::vector<double>>& final_losses,
                                        std::span<const double> initial_losses, double level) {
  if (final_losses.size() != initial_losses.size())
    throw std::invalid_argument("lr_sensitivity_across_seeds: one initial loss per seed");
  Sensitivity s;
  for (std::size_t i = 0; i < final_losses.size(); ++i)
    s.per_seed.push_back(lr_sensitivity(final_losses[i], initial_losses[i]));
  s.mean = mean(s.per_seed);
  s.ci = mean_ci(s.per_seed, level);
  if (std::all_of(s.per_seed.begin(), s.per_seed.end(), [](double x) { return x >= 0; }))
    s.ci.low = std::max(s.ci.low, 0.0);
  return s;
}

}  // namespace sdpa::stats
