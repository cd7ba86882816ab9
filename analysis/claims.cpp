#include "sdpa/claims.hpp"

#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "grouping.hpp"
#include "markdown.hpp"
#include "sdpa/input_error.hpp"
#include "sdpa/report.hpp"
#include "training_verdict.hpp"

namespace sdpa::claims {
namespace {

using report::number;
using Records = std::vector<const json*>;
using Sources = std::vector<Source>;

std::string file_names(const Sources& sources) {
  std::string names;
  for (const auto& s : sources) names += (names.empty() ? "" : ", ") + s.file;
  return names;
}

const json& experiment(const Sources& sources, const std::string& name) {
  for (const auto& s : sources)
    for (const auto& e : (*s.result)["experiments"])
      if (e["name"] == name) return e;
  throw InputError(file_names(sources) + ": no experiment named \"" + name +
                   "\"; the claims report reads a result file of configs/seeds.json");
}

Records select(const json& exp, const std::function<bool(const json& params)>& keep) {
  Records out;
  for (const auto& r : exp["records"])
    if (keep(r["params"])) out.push_back(&r);
  return out;
}

std::string cited(const json& exp, const Records& records) {
  std::string cells;
  for (const json* r : records) cells += (cells.empty() ? "" : ", ") + (*r)["cell"].dump();
  return "experiment `" + exp["name"].get<std::string>() + "`, cells " + cells;
}

double value(const json& stat) { return stat["value"].get<double>(); }

std::string with_ci(const json& stat) {
  if (stat["value"].is_null()) return "non-finite";  // how a result file stores inf or NaN
  const json& ci = stat["ci95"];
  if (ci[0].is_null() || ci[1].is_null()) return number(value(stat));  // one seed: no interval
  return number(value(stat)) + " [" + number(ci[0].get<double>()) + ", " +
         number(ci[1].get<double>()) + "]";
}

// Whether `predicted` is consistent with a statistic when `family` such checks are made at
// once: |value - predicted| within the Bonferroni-corrected normal quantile of its standard
// error (the 95 % CI's half-width / 1.96), so the whole family errs 5 % of the time.
bool consistent(const json& stat, double predicted, std::size_t family) {
  const double se = (stat["ci95"][1].get<double>() - stat["ci95"][0].get<double>()) / (2 * 1.96);
  const boost::math::normal normal;
  const double z = boost::math::quantile(normal, 1 - 0.05 / (2.0 * double(family)));
  return std::abs(value(stat) - predicted) <= z * se;
}

std::string yes_no(bool b) { return b ? "yes" : "**no**"; }

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : ", ") + w;
  return s;
}

Claim claim_variance_is_d_k(const Sources& sources) {
  const json& e = experiment(sources, "claim1-2-variance");
  const Records rs = select(e, [](const json& p) { return p["scale"] == "none"; });
  Claim c(1,
          "If Q and K have entries with mean 0 and variance 1, each entry of QK^T has mean 0 "
          "and variance d_k.");
  c.header = {"d_k", "mean [95% CI]", "variance [95% CI]", "theory", "consistent"};
  std::vector<std::string> failing;
  for (const json* r : rs) {
    const double d_k = (*r)["params"]["d_k"];
    const bool ok =
        consistent((*r)["score_mean"], 0.0, 2 * rs.size()) &&
        consistent((*r)["score_variance"], (*r)["score_variance"]["predicted"], 2 * rs.size());
    if (!ok) failing.push_back(number(d_k));
    c.rows.push_back({number(d_k), with_ci((*r)["score_mean"]), with_ci((*r)["score_variance"]),
                      "0, " + number(d_k), yes_no(ok)});
  }
  c.verdict = failing.empty() ? Verdict::holds : Verdict::does_not_hold;
  c.reason =
      failing.empty()
          ? "mean and variance agree with 0 and d_k at every d_k tested (Bonferroni-corrected "
            "5 % family-wise level)"
          : "measured mean or variance departs from theory at d_k = " + join(failing);
  c.source = cited(e, rs);
  return c;
}

Claim claim_scaling_restores_unit_variance(const Sources& sources) {
  const json& e = experiment(sources, "claim1-2-variance");
  const Records rs = select(e, [](const json& p) { return p["scale"] != "none"; });
  Claim c(2,
          "Dividing by sqrt(d_k) brings that variance back to 1 for every d_k; dividing by d_k "
          "instead shrinks it to 1/d_k.");
  c.header = {"d_k", "scale", "variance [95% CI]", "theory", "consistent"};
  std::vector<std::string> failing;
  for (const json* r : rs) {
    const double d_k = (*r)["params"]["d_k"];
    const bool sqrt_dk = (*r)["params"]["scale"] == "sqrt_dk";
    const double theory = sqrt_dk ? 1.0 : 1.0 / d_k;
    const bool ok =
        consistent((*r)["score_variance"], (*r)["score_variance"]["predicted"], rs.size());
    if (!ok)
      failing.push_back((sqrt_dk ? "1/sqrt(d_k) at d_k = " : "1/d_k at d_k = ") + number(d_k));
    c.rows.push_back({number(d_k), sqrt_dk ? "1/sqrt(d_k)" : "1/d_k",
                      with_ci((*r)["score_variance"]), number(theory), yes_no(ok)});
  }
  c.verdict = failing.empty() ? Verdict::holds : Verdict::does_not_hold;
  c.reason = failing.empty()
                 ? "every scaled variance agrees with 1, every 1/d_k variance with 1/d_k"
                 : "departs from theory for " + join(failing);
  c.source = cited(e, rs);
  return c;
}

Claim claim_two_by_two(const Sources& sources) {
  const json& e = experiment(sources, "claim3-2x2");
  const Records rs = select(e, [](const json&) { return true; });
  const json& sv = (*rs.at(0))["sample_variance"];
  Claim c(3,
          "np.var of the product of two 2 x 2 standard-normal matrices should be d_k = 2, so "
          "seeing 1.6 is puzzling.");
  double at_16 = -1;
  for (const auto& x : sv["cdf_at"])
    if (x["x"] == 1.6) at_16 = x["fraction"];
  const double q05 = sv["q05"], q95 = sv["q95"];
  const bool is_two = consistent(sv, 2.0, 2), is_15 = consistent(sv, 1.5, 2);
  const bool typical = q05 <= 1.6 && 1.6 <= q95;
  c.header = {"statistic", "measured", "theory"};
  c.rows = {{"E[np.var(S)]", with_ci(sv), "1.5 = 2 (1 - 1/4)"},
            {"5 % / 95 % quantiles", number(q05) + " / " + number(q95), "-"},
            {"P(np.var(S) <= 1.6)", number(at_16), "-"},
            {"trials", (*rs[0])["params"]["trials"].dump(), "-"}};
  c.verdict = is_two ? Verdict::holds : Verdict::does_not_hold;
  c.reason = std::string("E[np.var] is ") + (is_15 ? "consistent with 1.5" : "not 1.5") + " and " +
             (is_two ? "consistent with 2" : "not 2") +
             " (ddof 0 over 4 entries loses a quarter); 1.6 is " +
             (typical ? "inside" : "outside") + " the 5-95 % range of a single trial";
  c.source = cited(e, rs);
  return c;
}

Claim claim_numpy_printout(const Sources& sources) {
  const json& e = experiment(sources, "claim4-1111x111");
  const Records rs = select(e, [](const json&) { return true; });
  Claim c(4,
          "NumPy printed np.var(A @ B) = 110.56 for A 1111 x 111, B 111 x 1111, and 0.996 after "
          "dividing by sqrt(111): consistent with variance d_k = 111, and 1 after scaling.");
  c.header = {"scale",       "printed",      "E[np.var] theory", "measured mean [95% CI]",
              "sd (theory)", "5-95 % range", "P(<= printed)",    "printed is typical"};
  bool all_typical = true;
  for (const json* r : rs) {
    const json& sv = (*r)["sample_variance"];
    const bool scaled = (*r)["params"]["scale"] == "sqrt_dk";
    const double printed = scaled ? 0.996 : 110.56;
    double fraction = -1;
    for (const auto& x : sv["cdf_at"])
      if (x["x"] == printed) fraction = x["fraction"];
    const bool typical = sv["q05"].get<double>() <= printed && printed <= sv["q95"].get<double>();
    all_typical = all_typical && typical;
    c.rows.push_back(
        {scaled ? "1/sqrt(111)" : "none", number(printed), number(sv["predicted"]), with_ci(sv),
         number(sv["stddev"]["value"]) + " (" + number(sv["stddev"]["predicted"]) + ")",
         number(sv["q05"]) + " - " + number(sv["q95"]), number(fraction), yes_no(typical)});
  }
  c.verdict = all_typical ? Verdict::holds : Verdict::does_not_hold;
  c.reason = all_typical
                 ? "both printed values lie inside the 5-95 % range of np.var for that shape"
                 : "a printed value lies outside the 5-95 % range for that shape";
  c.source = cited(e, rs);
  return c;
}

Claim claim_projections(const Sources& sources) {
  const json& e = experiment(sources, "claim5-projections");
  const Records rs = select(e, [](const json&) { return true; });
  Claim c(5,
          "It is safe to assume unit-variance queries and keys because inputs are LayerNorm'd "
          "and W_Q, W_K are initialised to preserve variance (Xavier/Glorot).");
  c.header = {"init", "scaled score variance [95% CI]", "theory (d_model v)^2", "ratio to 1"};
  // Stated thresholds: "unit" means a CI containing 1; within a factor 1.5 counts as a
  // qualified yes; further off, the assumption does not hold.
  bool all_unit = true, all_near = true;
  std::vector<std::string> parts;
  for (const json* r : rs) {
    const json& v = (*r)["score_variance"];
    const double x = value(v);
    all_unit = all_unit && v["ci95"][0].get<double>() <= 1 && 1 <= v["ci95"][1].get<double>();
    all_near = all_near && x >= 1 / 1.5 && x <= 1.5;
    c.rows.push_back(
        {(*r)["params"]["init"], with_ci(v), number(v["per_entry_predicted"]), number(x)});
    parts.push_back((*r)["params"]["init"].get<std::string>() + " gives " + number(x));
  }
  c.verdict = all_unit   ? Verdict::holds
              : all_near ? Verdict::holds_with_qualification
                         : Verdict::does_not_hold;
  c.reason = "d_model 512, d_k 64, scaled by 1/sqrt(d_k): " + join(parts) +
             " (1 would be unit variance; Var(q) = d_model Var(w), which neither initialisation "
             "sets to 1)";
  c.source = cited(e, rs);
  return c;
}

// Records of one experiment grouped by N, each group ordered by d_k as in the file.
std::map<double, Records> by_n(const json& exp, const std::function<bool(const json&)>& keep) {
  std::map<double, Records> groups;
  for (const json* r : select(exp, keep)) groups[(*r)["params"]["n_kv"].get<double>()].push_back(r);
  return groups;
}

Claim claim_saturation(const Sources& sources) {
  const json& e = experiment(sources, "claim6-saturation");
  Claim c(6, "Without scaling, softmax becomes almost one-hot as d_k grows.");
  c.header = {"N",        "d_k",        "entropy [95% CI]",
              "H / ln N", "max weight", "rows with max weight > 0.9"};
  bool monotone = true;
  std::vector<std::string> not_one_hot;
  Records all;
  for (const auto& [n, rs] : by_n(e, [](const json& p) { return p["scale"] == "none"; })) {
    for (std::size_t i = 0; i < rs.size(); ++i) {
      const json& r = *rs[i];
      if (i > 0 && value(r["max_weight"]) <= value((*rs[i - 1])["max_weight"])) monotone = false;
      c.rows.push_back({number(n), number(r["params"]["d_k"]), with_ci(r["entropy"]),
                        number(r["entropy_normalised"]), number(value(r["max_weight"])),
                        number(r["rows_max_weight_over_0_9"])});
      all.push_back(rs[i]);
    }
    // "Almost one-hot" (stated threshold): mean max weight above 0.9 at the largest d_k.
    if (value((*rs.back())["max_weight"]) <= 0.9) not_one_hot.push_back("N = " + number(n));
  }
  c.verdict = !monotone             ? Verdict::does_not_hold
              : not_one_hot.empty() ? Verdict::holds
                                    : Verdict::holds_with_qualification;
  c.reason = !monotone ? "the max weight does not grow monotonically with d_k"
             : not_one_hot.empty()
                 ? "the max weight grows with d_k for every N and exceeds 0.9 at the largest d_k"
                 : "the max weight grows with d_k, but at the largest d_k it stays at or below 0.9 "
                   "for " +
                       join(not_one_hot) + " (the larger N, the later softmax condenses)";
  c.source = cited(e, all);
  return c;
}

Claim claim_gap_of_four() {
  Claim c(7, "A gap of 4 between two scores already gives an almost one-sided distribution.");
  // Exact arithmetic, not a measurement: softmax([0, 4]).
  const double high = 1 / (1 + std::exp(-4.0)), low = 1 - high;
  c.header = {"weights of softmax([0, 4])", "max weight"};
  c.rows = {{number(low) + ", " + number(high), number(high)}};
  // Stated threshold for "almost one-sided": the larger weight at least 0.95.
  c.verdict = high >= 0.95 ? Verdict::holds : Verdict::does_not_hold;
  c.reason = "the larger weight is " + number(high) + " (threshold for almost one-sided: 0.95)";
  c.source = "computed exactly: 1 / (1 + e^-4)";
  return c;
}

Claim claim_gradients(const Sources& sources) {
  const json& e = experiment(sources, "claim8-gradients");
  Claim c(8, "Without scaling, gradients through most positions become very small.");
  c.header = {"d_k",
              "participation unscaled",
              "participation scaled",
              "||J||_F^2 unscaled",
              "||J||_F^2 scaled",
              "unscaled larger"};
  std::map<double, std::pair<const json*, const json*>> pairs;  // d_k -> (unscaled, scaled)
  Records all;
  for (const json* r : select(e, [](const json&) { return true; })) {
    auto& slot = pairs[(*r)["params"]["d_k"].get<double>()];
    ((*r)["params"]["scale"] == "none" ? slot.first : slot.second) = r;
    all.push_back(r);
  }
  std::vector<std::string> larger;
  double last_participation = 1;
  for (const auto& [d_k, pair] : pairs) {
    const json &u = *pair.first, &s = *pair.second;
    // "Larger" only when the intervals are separated.
    const bool bigger =
        u["jacobian_fro2"]["ci95"][0].get<double>() > s["jacobian_fro2"]["ci95"][1].get<double>();
    if (bigger) larger.push_back(number(d_k));
    last_participation = value(u["participation"]);
    c.rows.push_back({number(d_k), number(value(u["participation"])),
                      number(value(s["participation"])), with_ci(u["jacobian_fro2"]),
                      with_ci(s["jacobian_fro2"]), yes_no(bigger)});
  }
  // "Most positions" (stated threshold): fewer than half the keys receive a gradient above
  // 1e-3 of the row's largest, at the largest d_k.
  const bool most_small = last_participation < 0.5;
  c.verdict = !most_small      ? Verdict::does_not_hold
              : larger.empty() ? Verdict::holds
                               : Verdict::holds_with_qualification;
  c.reason =
      std::string(most_small ? "at the largest d_k only " + number(last_participation) +
                                   " of the keys receive a gradient above 1e-3 of the row's "
                                   "largest"
                             : "participation stays at " + number(last_participation)) +
      (larger.empty()
           ? ""
           : "; but the softmax Jacobian's norm is larger unscaled than scaled at "
             "d_k = " +
                 join(larger) + ": the gradient concentrates on a few keys rather than vanishing");
  c.source = cited(e, all);
  return c;
}

Claim claim_scaled_never_saturates(const Sources& sources) {
  const json& e = experiment(sources, "claim9-scaled-entropy");
  Claim c(9, "Scaling by 1/sqrt(d_k) keeps softmax from saturating, for any d_k.");
  c.header = {"N", "d_k", "entropy [95% CI]", "H / ln N", "ln N - 1/2", "max weight"};
  // Stated thresholds: not saturated = normalised entropy >= 0.8 at every d_k; "for any d_k"
  // without qualification = the entropy varies by at most 0.1 nats across d_k.
  bool saturated = false;
  std::vector<std::string> varying;
  Records all;
  for (const auto& [n, rs] : by_n(e, [](const json&) { return true; })) {
    double lo = 1e300, hi = -1e300;
    for (const json* r : rs) {
      const double h = value((*r)["entropy"]);
      lo = std::min(lo, h), hi = std::max(hi, h);
      saturated = saturated || (*r)["entropy_normalised"].get<double>() < 0.8;
      c.rows.push_back({number(n), number((*r)["params"]["d_k"]), with_ci((*r)["entropy"]),
                        number((*r)["entropy_normalised"]), number(std::log(n) - 0.5),
                        number(value((*r)["max_weight"]))});
      all.push_back(r);
    }
    if (hi - lo > 0.1)
      varying.push_back("N = " + number(n) + " (range " + number(hi - lo) + " nats)");
  }
  c.verdict = saturated         ? Verdict::does_not_hold
              : varying.empty() ? Verdict::holds
                                : Verdict::holds_with_qualification;
  c.reason = saturated ? "the normalised entropy falls below 0.8 at some d_k"
             : varying.empty()
                 ? "the entropy stays near ln N - 1/2 at every d_k and N tested"
                 : "never saturated, but the entropy still moves with d_k for " + join(varying) +
                       " (at small d_k the logits are products, not Gaussian)";
  c.source = cited(e, all);
  return c;
}

// Every training experiment of the files, each group of its records (e.g. per optimiser)
// compared at each d_k: unscaled against 1/sqrt(d_k).
std::optional<Claim> claim_training(const Sources& sources) {
  Claim c(10, "Without scaling, training becomes slower or less stable.");
  c.header = {"experiment",
              "d_k",
              "steps to target: unscaled [95% CI]",
              "1/sqrt(d_k) [95% CI]",
              "final loss: unscaled [95% CI]",
              "1/sqrt(d_k) [95% CI]",
              "seeds with non-finite steps: unscaled, 1/sqrt(d_k)",
              "unscaled vs 1/sqrt(d_k)"};
  std::vector<std::string> worse_from, not_worse, better_at, less_stable_at;
  bool slower = false;
  std::int64_t nonfinite = 0;
  std::string cited_experiments;
  for (const auto& s : sources)
    for (const auto& e : (*s.result)["experiments"]) {
      if (e["kind"] != "training" || e["records"].empty()) continue;
      cited_experiments += (cited_experiments.empty() ? "experiment `" : ", `") +
                           e["name"].get<std::string>() + "` of " + s.file;
      std::string fixed;
      for (const auto& [title, records] :
           report::group_records(e["records"], "d_k", "scale", fixed)) {
        const auto pairs = report::unscaled_vs_scaled(records);
        if (pairs.empty()) continue;
        const std::string name =
            e["name"].get<std::string>() + (title.empty() ? "" : " (" + title + ")");
        std::vector<std::pair<double, bool>> worse;
        for (const auto& p : pairs) {
          const json &u = *p.none, &k = *p.scaled;
          worse.emplace_back(p.d_k, p.verdict.worse);
          slower = slower || p.verdict.slower;
          if (p.verdict.better) better_at.push_back(name + " d_k = " + number(p.d_k));
          if (p.verdict.less_stable) less_stable_at.push_back(name + " d_k = " + number(p.d_k));
          nonfinite += u["nonfinite_steps"]["total"].get<std::int64_t>() +
                       k["nonfinite_steps"]["total"].get<std::int64_t>();
          c.rows.push_back(
              {name, number(p.d_k), with_ci(u["steps_to_target"]["censored_mean"]),
               with_ci(k["steps_to_target"]["censored_mean"]), with_ci(u["final_loss"]),
               with_ci(k["final_loss"]),
               report::seeds_with_nonfinite(u) + ", " + report::seeds_with_nonfinite(k),
               p.verdict.text});
        }
        if (worse.back().second)
          worse_from.push_back(name + " " + report::onset(worse));
        else
          not_worse.push_back(name);
      }
    }
  if (c.rows.empty()) return std::nullopt;
  // Stated thresholds: "holds" when, in every experiment, unscaled is resolvably worse (slower,
  // higher final loss or less stable, disjoint 95 % CIs) at the largest d_k tried and better at
  // none; qualified when that is so in some experiments only, or it is better somewhere.
  c.verdict = worse_from.empty()                       ? Verdict::does_not_hold
              : not_worse.empty() && better_at.empty() ? Verdict::holds
                                                       : Verdict::holds_with_qualification;
  if (worse_from.empty()) {
    c.reason = "unscaled attention is not resolvably worse at the largest d_k of any experiment";
  } else {
    c.reason = "unscaled attention trains worse than 1/sqrt(d_k) in " + join(worse_from);
    if (!not_worse.empty()) c.reason += "; not at the largest d_k in " + join(not_worse);
  }
  if (!better_at.empty()) c.reason += "; unscaled is better in some respect at " + join(better_at);
  if (!less_stable_at.empty())
    c.reason += "; less stable (more seeds with non-finite steps) at " + join(less_stable_at);
  else if (nonfinite > 0)
    c.reason += "; non-finite steps occurred, but in no resolvably larger share of unscaled seeds";
  else
    c.reason += std::string("; no training step was non-finite in any seed, scaled or not") +
                (slower ? ": unscaled training is slower, not less stable" : "");
  c.source = cited_experiments + " (every cell with scale none or sqrt_dk)";
  return c;
}

}  // namespace

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::holds:
      return "holds";
    case Verdict::holds_with_qualification:
      return "holds with qualification";
    case Verdict::does_not_hold:
      return "does not hold";
  }
  return "?";
}

std::vector<Claim> evaluate(const std::vector<Source>& sources) {
  try {
    std::vector<Claim> claims = {claim_variance_is_d_k(sources),
                                 claim_scaling_restores_unit_variance(sources),
                                 claim_two_by_two(sources),
                                 claim_numpy_printout(sources),
                                 claim_projections(sources),
                                 claim_saturation(sources),
                                 claim_gap_of_four(),
                                 claim_gradients(sources),
                                 claim_scaled_never_saturates(sources)};
    if (auto training = claim_training(sources)) claims.push_back(std::move(*training));
    return claims;
  } catch (const json::exception& e) {
    throw InputError(file_names(sources) +
                     ": a record the claims need is missing or malformed: " + e.what());
  }
}

std::vector<Claim> evaluate(const json& result, const std::string& file) {
  return evaluate(std::vector<Source>{{&result, file}});
}

std::string markdown(const std::vector<Claim>& claims, const std::vector<std::string>& files) {
  std::string command;
  for (const auto& f : files) command += " " + f;
  const bool training = !claims.empty() && claims.back().number == 10;
  std::ostringstream out;
  out << "# Claims about scaled dot-product attention, tested\n\n"
      << "Generated by `sdpa-bench claims" << command << "` from "
      << (files.size() > 1 ? "those result files" : "that result file") << " alone (a run of "
      << "`configs/seeds.json`"
      << (training ? "; claim 10 from a run of `configs/training.json`" : "")
      << "). Each verdict is computed from the cited records; thresholds are stated in "
      << "`analysis/claims.cpp`.\n\n| claim | verdict |\n|---|---|\n";
  for (const auto& c : claims)
    out << "| " << c.number << ". " << c.statement << " | **" << to_string(c.verdict) << "** |\n";
  if (!training)
    out << "\nClaim 10 (does unscaled attention train slower or less stably?) needs a result "
           "file with a `training` experiment, such as a run of `configs/training.json`; none "
           "was given.\n";
  for (const auto& c : claims) {
    out << "\n## Claim " << c.number << "\n\n> " << c.statement
        << "\n\n**Verdict: " << to_string(c.verdict) << "**: " << c.reason << ".\n\n"
        << report::markdown_table(c.header, c.rows, false) << "\nSource: " << c.source << ".\n";
  }
  return out.str();
}

}  // namespace sdpa::claims
