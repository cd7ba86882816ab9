// Internal to sdpa_analysis: does unscaled attention train worse than 1/sqrt(d_k)? The one
// comparison that the training report's verdict table and the claims report both state.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sdpa/record.hpp"

namespace sdpa::report {

// Unscaled against 1/sqrt(d_k) at one d_k, from two training records. A difference counts only
// where the two 95 % CIs across seeds do not overlap (a conservative test).
struct TrainingVerdict {
  std::string text;          // e.g. "slower to target, higher final loss"
  bool slower = false;       // unscaled resolvably slower to the target accuracy
  bool less_stable = false;  // non-finite steps in resolvably more seeds
  bool better = false;       // unscaled resolvably better in some respect
  bool worse = false;        // slower, higher final loss or less stable, and better in none
};
TrainingVerdict unscaled_verdict(const json& none, const json& scaled);

// Every d_k of one group of training records that has both "none" and "sqrt_dk", in
// increasing d_k.
struct ScalePair {
  double d_k = 0;
  const json* none = nullptr;
  const json* scaled = nullptr;
  TrainingVerdict verdict;
};
std::vector<ScalePair> unscaled_vs_scaled(const std::vector<const json*>& records);

// "k/n": seeds of a training record with a non-finite step, of all its seeds.
std::string seeds_with_nonfinite(const json& record);

// "From which d_k on" a property holds: "from d_k = X on" when it holds at X and every larger
// d_k, else where it holds ("at no d_k", "at d_k = ... but not the largest").
std::string onset(const std::vector<std::pair<double, bool>>& holds);

}  // namespace sdpa::report
