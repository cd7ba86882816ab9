// Per-trial results gathered into columns and summarised across trials, shared by the
// experiment kinds: trials are independent, so a column's mean has a Student-t interval.
#pragma once

#include <optional>
#include <vector>

#include "sdpa/record.hpp"
#include "sdpa/stats.hpp"

namespace sdpa {

// One field of every trial, in trial order.
template <typename Trial>
std::vector<double> column(const std::vector<Trial>& trials, double Trial::*field) {
  std::vector<double> out;
  out.reserve(trials.size());
  for (const auto& t : trials) out.push_back(t.*field);
  return out;
}

// Mean and 95 % CI across trials, for a statistic without a prediction.
inline json summary(const std::vector<double>& x) {
  return measured(stats::mean(x), stats::mean_ci(x), std::nullopt, "");
}

}  // namespace sdpa
