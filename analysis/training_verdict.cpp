#include "training_verdict.hpp"

#include <map>

#include "grouping.hpp"
#include "sdpa/report.hpp"

namespace sdpa::report {
namespace {

// +1 when a's 95 % CI lies entirely above b's, -1 entirely below, 0 when they overlap or one
// is not finite. Disjoint 95 % intervals are a conservative test (p < 0.01 for equal spreads).
int order(const json& a, const json& b) {
  const json &ca = a["ci95"], &cb = b["ci95"];
  if (ca[0].is_null() || ca[1].is_null() || cb[0].is_null() || cb[1].is_null()) return 0;
  if (ca[0].get<double>() > cb[1].get<double>()) return 1;
  if (ca[1].get<double>() < cb[0].get<double>()) return -1;
  return 0;
}

}  // namespace

std::string seeds_with_nonfinite(const json& r) {
  return r["nonfinite_steps"]["seeds"].dump() + "/" + r["steps_to_target"]["seeds"].dump();
}

// Steps to the target (unreached seeds counted as the step budget), final held-out loss, and
// the share of seeds with a non-finite step.
TrainingVerdict unscaled_verdict(const json& none, const json& scaled) {
  const int steps =
      order(none["steps_to_target"]["censored_mean"], scaled["steps_to_target"]["censored_mean"]);
  const int loss = order(none["final_loss"], scaled["final_loss"]);
  const int stability =
      order(none["nonfinite_steps"]["seed_fraction"], scaled["nonfinite_steps"]["seed_fraction"]);
  std::vector<std::string> parts;
  if (steps != 0) parts.push_back(steps > 0 ? "slower to target" : "faster to target");
  if (loss != 0) parts.push_back(loss > 0 ? "higher final loss" : "lower final loss");
  if (stability != 0)
    parts.push_back(std::string(stability > 0 ? "less" : "more") + " stable (" +
                    seeds_with_nonfinite(none) + " vs " + seeds_with_nonfinite(scaled) +
                    " seeds with non-finite steps)");
  TrainingVerdict v;
  for (const auto& p : parts) v.text += (v.text.empty() ? "" : ", ") + p;
  if (v.text.empty()) v.text = "no resolved difference";
  v.slower = steps > 0;
  v.less_stable = stability > 0;
  v.better = steps < 0 || loss < 0 || stability < 0;
  v.worse = (steps > 0 || loss > 0 || stability > 0) && !v.better;
  return v;
}

std::vector<ScalePair> unscaled_vs_scaled(const std::vector<const json*>& records) {
  std::map<double, ScalePair> pairs;
  for (const json* r : records) {
    const std::string scale = label((*r)["params"]["scale"]);
    if (scale != "none" && scale != "sqrt_dk") continue;
    ScalePair& p = pairs[(*r)["params"]["d_k"].get<double>()];
    p.d_k = (*r)["params"]["d_k"];
    (scale == "none" ? p.none : p.scaled) = r;
  }
  std::vector<ScalePair> out;
  for (auto& [d_k, p] : pairs)
    if (p.none && p.scaled) {
      p.verdict = unscaled_verdict(*p.none, *p.scaled);
      out.push_back(p);
    }
  return out;
}

std::string onset(const std::vector<std::pair<double, bool>>& holds) {
  std::size_t from = holds.size();
  while (from > 0 && holds[from - 1].second) --from;
  if (from < holds.size()) return "from d_k = " + number(holds[from].first) + " on";
  std::string at;
  for (const auto& [d_k, h] : holds)
    if (h) at += (at.empty() ? "" : ", ") + number(d_k);
  return at.empty() ? "at no d_k" : "at d_k = " + at + " but not the largest";
}

}  // namespace sdpa::report
