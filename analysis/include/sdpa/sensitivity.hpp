// Learning-rate sensitivity (Wortsman et al. 2023, "Small-scale proxies for large-scale
// Transformer training instabilities", sec. 2.2): how far, on average over a range of learning
// rates, the final loss falls short of the best one, a run that ends above its loss at
// initialisation counting as if it had not trained.
#pragma once

#include <span>
#include <vector>

#include "sdpa/stats.hpp"

namespace sdpa::stats {

// LR sensitivity = E_eta[min(l(eta), l0)] - min_eta l(eta), the paper's definition, with l(eta)
// the final loss at learning rate eta and l0 the loss at initialisation. The expectation is the
// mean over the grid `final_losses` (log-spaced rates make it the mean over log eta, as in the
// paper). A non-finite final loss (a run that blew up) counts as above l0 in the mean and is not
// the best. Non-negative whenever some rate ends at or below l0; negative when every rate ends
// above it (the sweep never trained); NaN when no rate has a finite loss, or for an empty grid.
double lr_sensitivity(std::span<const double> final_losses, double initial_loss);

// The sensitivity of each seed's sweep, their mean and its confidence interval: Student's t over
// seeds (stats::mean_ci), which is exact for normal per-seed values, where a percentile bootstrap
// over the 3 to 10 seeds a sweep affords covers too little. The lower end is raised to 0 when
// every seed's value is non-negative (then the sensitivity cannot be negative, and cutting an
// interval to the parameter's range keeps its coverage).
struct Sensitivity {
  double mean = 0;
  Interval ci;
  std::vector<double> per_seed;
};
// final_losses[seed][rate], initial_losses[seed]: a seed's runs share their initial weights, so
// they share l0.
Sensitivity lr_sensitivity_across_seeds(const std::vector<std::vector<double>>& final_losses,
                                        std::span<const double> initial_losses,
                                        double level = 0.95);

}  // namespace sdpa::stats
