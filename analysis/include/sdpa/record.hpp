// The shape of a measured statistic in a result file's records (results/schema.json):
// {"value", "ci95": [low, high], "predicted", "agrees", "theory"}. `agrees` is true when the
// prediction lies inside the 95 % confidence interval; at that level about one cell in twenty
// disagrees by chance alone.
#pragma once

#include <optional>
#include <string>

#include "sdpa/json.hpp"
#include "sdpa/stats.hpp"

namespace sdpa {

// The version of results/schema.json: written into every result file, and the only one read
// (a file of another version is refused by name).
inline constexpr int kResultSchemaVersion = 1;

// theory: "exact", "asymptotic" or "approximate" (how far the prediction can be trusted),
// or "none" when no prediction applies to this cell.
inline json measured(double value, stats::Interval ci, std::optional<double> predicted,
                     const std::string& theory) {
  json m = {{"value", value}, {"ci95", {ci.low, ci.high}}};
  if (predicted) {
    m["predicted"] = *predicted;
    m["agrees"] = ci.contains(*predicted);
    m["theory"] = theory;
  } else {
    m["predicted"] = nullptr;
    m["theory"] = "none";
  }
  return m;
}

}  // namespace sdpa
