// The reading side of the `stability` experiment (issue 19): what its tables, plots and claims
// compute from its records, one record per scale scheme and model holding every learning rate
// of the grid (experiments/stability.cpp). Pure functions of the records, so the thresholds the
// claims use are stated once here and tested on records built by hand.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sdpa/record.hpp"

namespace sdpa::stability_analysis {

// A learning rate "trains" when more than half of its seeds end with held-out accuracy at the
// experiment's target_accuracy or above (the record's `trained` share).
bool rate_trains(const json& rate);
// The grid's learning rates that train, in grid order.
std::vector<double> trainable_rates(const json& record);

// Of one learning rate's mean curves: the largest attention logit at step 0 and its peak over
// training (both the largest over blocks), and the smallest mean attention entropy of any block
// at any logged step after 0 (nats). NaN (a run that stopped) is skipped; the peak is NaN only
// when no step is finite.
struct LogitGrowth {
  double initial = 0, peak = 0, lowest_entropy = 0;
  double factor() const { return peak / initial; }
};
LogitGrowth logit_growth(const json& rate);

// Stated thresholds of claim 12: logits "grow" when their peak is at least kGrowthFactor times
// their value at initialisation, and softmax "saturates" when some block's mean entropy falls
// below kSaturatedEntropyShare of ln N (uniform attention over the N keys), i.e. each row puts
// nearly all its weight on about one key (exp(0.1 ln 17) = 1.3 effective keys at N = 17).
inline constexpr double kGrowthFactor = 10;
inline constexpr double kSaturatedEntropyShare = 0.1;
bool saturates(const LogitGrowth& g, double n_keys);

// Of one learning rate's mean curves: the held-out gradient norm of W_Q and W_K (summed over the
// blocks) at the last logged step over its value at step 0; NaN when a run stopped. Claim 16's
// threshold: the gradient is "kept" while that share is at least kGradientKeptShare.
double gradient_kept(const json& rate);
inline constexpr double kGradientKeptShare = 0.1;

// Whether a rate's seeds all ran without diverging (the record's `diverged` share is 0).
bool none_diverged(const json& rate);

// Paired difference of two records' learning-rate sensitivities (a minus b), seed by seed: the
// seeds of one experiment share their streams across cells, so seed t's two sweeps saw the same
// data. Mean and Student-t interval of the per-seed differences; nullopt when the seed counts
// differ.
struct Difference {
  double mean = 0, low = 0, high = 0;
  std::size_t seeds = 0;
};
std::optional<Difference> sensitivity_difference(const json& a, const json& b);

}  // namespace sdpa::stability_analysis
