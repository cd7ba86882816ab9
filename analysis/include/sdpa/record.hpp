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

// How many times higher a machine.peak entry's ceiling `key` ("fma_gflops", "triad_gbs"; the
// entry as a timing record copies it) measured after the run's last cell than before it (its
// recheck), 1 without one. A ceiling is the best the machine did, so a recheck above it by more
// than kPeakRecheckTolerance says the first measurement caught a slow spell, and every % against
// it reads high by up to that factor (docs/methodology.md: the FMA peak repeats within a few
// per cent, the triad less well).
inline constexpr double kPeakRecheckTolerance = 1.2;
// (A record's copy is not checked against machine.peak's schema: anything else reads as 1.)
inline double recheck_ratio(const json& peak, const char* key) {
  if (!peak.is_object() || !peak.contains("recheck") || !peak["recheck"].is_object()) return 1;
  const json first = peak.value(key, json(nullptr)),
             again = peak["recheck"].value(key, json(nullptr));
  if (!first.is_number() || !again.is_number() || first.get<double>() <= 0) return 1;
  return again.get<double>() / first.get<double>();
}

}  // namespace sdpa
