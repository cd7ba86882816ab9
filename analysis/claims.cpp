#include "sdpa/claims.hpp"

#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "grouping.hpp"
#include "markdown.hpp"
#include "sdpa/escape.hpp"
#include "sdpa/input_error.hpp"
#include "sdpa/json_read.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/report.hpp"
#include "sdpa/stability_analysis.hpp"
#include "training_verdict.hpp"

namespace sdpa::claims {
namespace {

using report::number;
using Records = std::vector<const json*>;

// A value a claim decides by is read with number_in: one that is not a number (a result file
// stores a non-finite value as null) is named by evaluate(), with its file and JSON path.

std::string num_text(const json& x) { return number(number_in(x)); }

// The result files of one evaluation, and which of them some claim has read.
class Inputs {
 public:
  explicit Inputs(const std::vector<Source>& sources)
      : sources_(sources), read_(sources.size(), false) {}

  // The first experiment named `name` that has records, its file marked read; null when none.
  const json* experiment(const std::string& name) {
    for (std::size_t i = 0; i < sources_.size(); ++i)
      for (const auto& e : (*sources_[i].result)["experiments"])
        if (e["name"] == name && !e["records"].empty()) {
          read_[i] = true;
          return &e;
        }
    return nullptr;
  }

  // Every experiment of `kind` that has records, in file order, their files marked read.
  struct Found {
    const json* experiment;
    std::string file;
  };
  std::vector<Found> of_kind(const std::string& kind) {
    std::vector<Found> out;
    for (std::size_t i = 0; i < sources_.size(); ++i)
      for (const auto& e : (*sources_[i].result)["experiments"])
        if (e["kind"] == kind && !e["records"].empty()) {
          read_[i] = true;
          out.push_back({&e, sources_[i].file});
        }
    return out;
  }

  const std::vector<Source>& sources() const { return sources_; }
  bool read(std::size_t i) const { return read_[i]; }

 private:
  const std::vector<Source>& sources_;
  std::vector<bool> read_;
};

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

double value(const json& stat) { return number_in(stat["value"]); }

std::string with_ci(const json& stat) {
  if (stat["value"].is_null()) return "non-finite";  // how a result file stores inf or NaN
  const json& ci = stat["ci95"];
  if (ci[0].is_null() || ci[1].is_null()) return number(value(stat));  // one seed: no interval
  return number(value(stat)) + " [" + num_text(ci[0]) + ", " + num_text(ci[1]) + "]";
}

// A value shown, not decided by: "non-finite" where the file stores null.
std::string shown(const json& stat) {
  return stat["value"].is_null() ? "non-finite" : number(value(stat));
}

// Whether `predicted` is consistent with a statistic when `family` such checks are made at
// once: |value - predicted| within the Bonferroni-corrected normal quantile of its standard
// error (the 95 % CI's half-width / 1.96), so the whole family errs 5 % of the time.
bool consistent(const json& stat, double predicted, std::size_t family) {
  const double se = (number_in(stat["ci95"][1]) - number_in(stat["ci95"][0])) / (2 * 1.96);
  const boost::math::normal normal;
  const double z = boost::math::quantile(normal, 1 - 0.05 / (2.0 * double(family)));
  return std::abs(value(stat) - predicted) <= z * se;
}

std::string yes_no(bool b) { return b ? "yes" : "**no**"; }

std::string join(const std::vector<std::string>& words, const std::string& separator = ", ") {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : separator) + w;
  return s;
}

// ---- claims 1-9: the experiments of configs/seeds.json --------------------------------------

void claim_variance_is_d_k(Inputs& in, Claim& c) {
  const json* e = in.experiment("claim1-2-variance");
  if (!e) return;
  const Records rs = select(*e, [](const json& p) { return p["scale"] == "none"; });
  c.header = {"d_k", "mean [95% CI]", "variance [95% CI]", "theory", "consistent"};
  std::vector<std::string> failing;
  for (const json* r : rs) {
    const double d_k = (*r)["params"]["d_k"];
    const bool ok = consistent((*r)["score_mean"], 0.0, 2 * rs.size()) &&
                    consistent((*r)["score_variance"],
                               number_in((*r)["score_variance"]["predicted"]), 2 * rs.size());
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
  c.source = cited(*e, rs);
}

void claim_scaling_restores_unit_variance(Inputs& in, Claim& c) {
  const json* e = in.experiment("claim1-2-variance");
  if (!e) return;
  const Records rs = select(*e, [](const json& p) { return p["scale"] != "none"; });
  c.header = {"d_k", "scale", "variance [95% CI]", "theory", "consistent"};
  std::vector<std::string> failing;
  for (const json* r : rs) {
    const double d_k = (*r)["params"]["d_k"];
    const bool sqrt_dk = (*r)["params"]["scale"] == "sqrt_dk";
    const double theory = sqrt_dk ? 1.0 : 1.0 / d_k;
    const bool ok = consistent((*r)["score_variance"],
                               number_in((*r)["score_variance"]["predicted"]), rs.size());
    if (!ok)
      failing.push_back((sqrt_dk ? "1/sqrt(d_k) at d_k = " : "1/d_k at d_k = ") + number(d_k));
    c.rows.push_back({number(d_k), sqrt_dk ? "1/sqrt(d_k)" : "1/d_k",
                      with_ci((*r)["score_variance"]), number(theory), yes_no(ok)});
  }
  c.verdict = failing.empty() ? Verdict::holds : Verdict::does_not_hold;
  c.reason = failing.empty()
                 ? "every scaled variance agrees with 1, every 1/d_k variance with 1/d_k"
                 : "departs from theory for " + join(failing);
  c.source = cited(*e, rs);
}

void claim_two_by_two(Inputs& in, Claim& c) {
  const json* e = in.experiment("claim3-2x2");
  if (!e) return;
  const Records rs = select(*e, [](const json&) { return true; });
  const json& sv = (*rs.at(0))["sample_variance"];
  double at_16 = -1;
  for (const auto& x : sv["cdf_at"])
    if (x["x"] == 1.6) at_16 = number_in(x["fraction"]);
  const double q05 = number_in(sv["q05"]), q95 = number_in(sv["q95"]);
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
  c.source = cited(*e, rs);
}

void claim_numpy_printout(Inputs& in, Claim& c) {
  const json* e = in.experiment("claim4-1111x111");
  if (!e) return;
  const Records rs = select(*e, [](const json&) { return true; });
  c.header = {"scale",       "printed",      "E[np.var] theory", "measured mean [95% CI]",
              "sd (theory)", "5-95 % range", "P(<= printed)",    "printed is typical"};
  bool all_typical = true;
  for (const json* r : rs) {
    const json& sv = (*r)["sample_variance"];
    const bool scaled = (*r)["params"]["scale"] == "sqrt_dk";
    const double printed = scaled ? 0.996 : 110.56;
    double fraction = -1;
    for (const auto& x : sv["cdf_at"])
      if (x["x"] == printed) fraction = number_in(x["fraction"]);
    const bool typical = number_in(sv["q05"]) <= printed && printed <= number_in(sv["q95"]);
    all_typical = all_typical && typical;
    c.rows.push_back(
        {scaled ? "1/sqrt(111)" : "none", number(printed), num_text(sv["predicted"]), with_ci(sv),
         shown(sv["stddev"]) + " (" + num_text(sv["stddev"]["predicted"]) + ")",
         num_text(sv["q05"]) + " - " + num_text(sv["q95"]), number(fraction), yes_no(typical)});
  }
  c.verdict = all_typical ? Verdict::holds : Verdict::does_not_hold;
  c.reason = all_typical
                 ? "both printed values lie inside the 5-95 % range of np.var for that shape"
                 : "a printed value lies outside the 5-95 % range for that shape";
  c.source = cited(*e, rs);
}

void claim_projections(Inputs& in, Claim& c) {
  const json* e = in.experiment("claim5-projections");
  if (!e) return;
  const Records rs = select(*e, [](const json&) { return true; });
  c.header = {"init", "scaled score variance [95% CI]", "theory (d_model v)^2", "ratio to 1"};
  // Stated thresholds: "unit" means a CI containing 1; within a factor 1.5 counts as a
  // qualified yes; further off, the assumption does not hold.
  bool all_unit = true, all_near = true;
  std::vector<std::string> parts;
  for (const json* r : rs) {
    const json& v = (*r)["score_variance"];
    const double x = value(v);
    all_unit = all_unit && number_in(v["ci95"][0]) <= 1 && 1 <= number_in(v["ci95"][1]);
    all_near = all_near && x >= 1 / 1.5 && x <= 1.5;
    c.rows.push_back(
        {(*r)["params"]["init"], with_ci(v), num_text(v["per_entry_predicted"]), number(x)});
    parts.push_back((*r)["params"]["init"].get<std::string>() + " gives " + number(x));
  }
  c.verdict = all_unit   ? Verdict::holds
              : all_near ? Verdict::holds_with_qualification
                         : Verdict::does_not_hold;
  c.reason = "d_model 512, d_k 64, scaled by 1/sqrt(d_k): " + join(parts) +
             " (1 would be unit variance; Var(q) = d_model Var(w), which neither initialisation "
             "sets to 1)";
  c.source = cited(*e, rs);
}

// Records of one experiment grouped by N, each group ordered by d_k as in the file.
std::map<double, Records> by_n(const json& exp, const std::function<bool(const json&)>& keep) {
  std::map<double, Records> groups;
  for (const json* r : select(exp, keep)) groups[(*r)["params"]["n_kv"].get<double>()].push_back(r);
  return groups;
}

void claim_saturation(Inputs& in, Claim& c) {
  const json* e = in.experiment("claim6-saturation");
  if (!e) return;
  c.header = {"N",        "d_k",        "entropy [95% CI]",
              "H / ln N", "max weight", "rows with max weight > 0.9"};
  bool monotone = true;
  std::vector<std::string> not_one_hot;
  Records all;
  for (const auto& [n, rs] : by_n(*e, [](const json& p) { return p["scale"] == "none"; })) {
    for (std::size_t i = 0; i < rs.size(); ++i) {
      const json& r = *rs[i];
      if (i > 0 && value(r["max_weight"]) <= value((*rs[i - 1])["max_weight"])) monotone = false;
      c.rows.push_back({number(n), number(r["params"]["d_k"]), with_ci(r["entropy"]),
                        num_text(r["entropy_normalised"]), number(value(r["max_weight"])),
                        num_text(r["rows_max_weight_over_0_9"])});
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
  c.source = cited(*e, all);
}

void claim_gap_of_four(Inputs&, Claim& c) {
  // Exact arithmetic, not a measurement: softmax([0, 4]).
  const double high = 1 / (1 + std::exp(-4.0)), low = 1 - high;
  c.header = {"weights of softmax([0, 4])", "max weight"};
  c.rows = {{number(low) + ", " + number(high), number(high)}};
  // Stated threshold for "almost one-sided": the larger weight at least 0.95.
  c.verdict = high >= 0.95 ? Verdict::holds : Verdict::does_not_hold;
  c.reason = "the larger weight is " + number(high) + " (threshold for almost one-sided: 0.95)";
  c.source = "computed exactly: 1 / (1 + e^-4)";
}

void claim_gradients(Inputs& in, Claim& c) {
  const json* e = in.experiment("claim8-gradients");
  if (!e) return;
  c.header = {"d_k",
              "participation unscaled",
              "participation scaled",
              "||J||_F^2 unscaled",
              "||J||_F^2 scaled",
              "unscaled larger"};
  std::map<double, std::pair<const json*, const json*>> pairs;  // d_k -> (unscaled, scaled)
  for (const json* r : select(*e, [](const json&) { return true; })) {
    auto& slot = pairs[(*r)["params"]["d_k"].get<double>()];
    ((*r)["params"]["scale"] == "none" ? slot.first : slot.second) = r;
  }
  // A d_k measured one way only compares nothing.
  const auto complete = [&](const json* r) {
    const auto& pair = pairs.at((*r)["params"]["d_k"].get<double>());
    return pair.first && pair.second;
  };
  Records all;
  for (const json* r : select(*e, [](const json&) { return true; }))
    if (complete(r)) all.push_back(r);
  std::vector<std::string> larger;
  double last_participation = 1;
  for (const auto& [d_k, pair] : pairs) {
    if (!pair.first || !pair.second) continue;
    const json &u = *pair.first, &s = *pair.second;
    // "Larger" only when the intervals are separated.
    const bool bigger =
        number_in(u["jacobian_fro2"]["ci95"][0]) > number_in(s["jacobian_fro2"]["ci95"][1]);
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
  c.source = cited(*e, all);
}

void claim_scaled_never_saturates(Inputs& in, Claim& c) {
  const json* e = in.experiment("claim9-scaled-entropy");
  if (!e) return;
  c.header = {"N", "d_k", "entropy [95% CI]", "H / ln N", "ln N - 1/2", "max weight"};
  // Stated thresholds: not saturated = normalised entropy >= 0.8 at every d_k; "for any d_k"
  // without qualification = the entropy varies by at most 0.1 nats across d_k.
  bool saturated = false;
  std::vector<std::string> varying;
  Records all;
  for (const auto& [n, rs] : by_n(*e, [](const json&) { return true; })) {
    double lo = 1e300, hi = -1e300;
    for (const json* r : rs) {
      const double h = value((*r)["entropy"]);
      lo = std::min(lo, h), hi = std::max(hi, h);
      saturated = saturated || number_in((*r)["entropy_normalised"]) < 0.8;
      c.rows.push_back({number(n), number((*r)["params"]["d_k"]), with_ci((*r)["entropy"]),
                        num_text((*r)["entropy_normalised"]), number(std::log(n) - 0.5),
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
  c.source = cited(*e, all);
}

// ---- claim 10: the training experiments (configs/training.json) -----------------------------

// Every training experiment of the files, each group of its records (e.g. per optimiser)
// compared at each d_k: unscaled against 1/sqrt(d_k).
void claim_training(Inputs& in, Claim& c) {
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
  for (const auto& [e, file] : in.of_kind("training")) {
    cited_experiments += (cited_experiments.empty() ? "experiment `" : ", `") +
                         (*e)["name"].get<std::string>() + "` of " + file;
    std::string fixed;
    for (const auto& [title, records] :
         report::group_records((*e)["records"], "d_k", "scale", fixed)) {
      const auto pairs = report::unscaled_vs_scaled(records);
      if (pairs.empty()) continue;
      const std::string name =
          (*e)["name"].get<std::string>() + (title.empty() ? "" : " (" + title + ")");
      std::vector<std::pair<double, bool>> worse;
      for (const auto& p : pairs) {
        const json &u = *p.none, &k = *p.scaled;
        worse.emplace_back(p.d_k, p.verdict.worse);
        slower = slower || p.verdict.slower;
        if (p.verdict.better) better_at.push_back(name + " d_k = " + number(p.d_k));
        if (p.verdict.less_stable) less_stable_at.push_back(name + " d_k = " + number(p.d_k));
        nonfinite += u["nonfinite_steps"]["total"].get<std::int64_t>() +
                     k["nonfinite_steps"]["total"].get<std::int64_t>();
        c.rows.push_back({name, number(p.d_k), with_ci(u["steps_to_target"]["censored_mean"]),
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
}

// ---- claims 11-13: the stability experiments (configs/stability.json) ----------------------

// One d_k of one record group of a stability experiment: its records by scheme.
struct SweepCell {
  std::string name;  // experiment (group) d_k = ..., for tables and reasons
  double d_k = 0;
  std::vector<std::pair<std::string, const json*>> scheme;  // in the config's order
  const json* at(const std::string& s) const {
    const auto it = std::find_if(scheme.begin(), scheme.end(),
                                 [&](const auto& entry) { return entry.first == s; });
    return it == scheme.end() ? nullptr : it->second;
  }
};

struct Sweeps {
  std::vector<SweepCell> cells;
  std::string cited;  // the experiments, for the claims' sources
};

// Whether a stability record ran with a soft-cap or a sink (records from before issue 39 lack
// both: they ran without).
bool modified(const json& record) {
  const json& p = record["params"];
  return p.value("softcap", 0.0) != 0 || p.value("sink", std::string("none")) != "none";
}

// Experiments that vary the modifiers answer claims 15-16; claims 11-13 compare scale schemes
// and read the others.
bool varies_modifiers(const json& experiment) {
  const auto& rs = experiment["records"];
  return std::any_of(rs.begin(), rs.end(), [](const json& r) { return modified(r); });
}

Sweeps stability_sweeps(Inputs& in) {
  Sweeps out;
  for (const auto& [e, file] : in.of_kind("stability")) {
    if (varies_modifiers(*e)) continue;
    out.cited += (out.cited.empty() ? "experiment `" : ", `") + (*e)["name"].get<std::string>() +
                 "` of " + file;
    std::string fixed;
    for (const auto& [title, records] :
         report::group_records((*e)["records"], "d_k", "scale", fixed)) {
      std::map<double, SweepCell> by_d_k;
      for (const json* r : records) {
        const double d_k = (*r)["params"]["d_k"].get<double>();
        SweepCell& c = by_d_k[d_k];
        c.d_k = d_k;
        c.name = (*e)["name"].get<std::string>() + (title.empty() ? "" : " (" + title + ")") +
                 " d_k = " + number(d_k);
        c.scheme.emplace_back((*r)["params"]["scale"].get<std::string>(), r);
      }
      for (auto& [d_k, c] : by_d_k) out.cells.push_back(std::move(c));
    }
  }
  return out;
}

namespace sa = stability_analysis;

std::string rates_that_train(const json& record) {
  const auto rates = sa::trainable_rates(record);
  return std::to_string(rates.size()) + " of " + std::to_string(record["learning_rates"].size()) +
         (rates.empty() ? "" : " (" + number(rates.front()) + " to " + number(rates.back()) + ")");
}

std::string difference_text(const std::optional<sa::Difference>& d) {
  if (!d) return "-";
  return number(d->mean) + " [" + number(d->low) + ", " + number(d->high) + "]";
}

// "holds" when every cell shows it, "with qualification" when some do, else "does not hold".
Verdict verdict_of(std::size_t shown, std::size_t cells) {
  return shown == 0       ? Verdict::does_not_hold
         : shown == cells ? Verdict::holds
                          : Verdict::holds_with_qualification;
}

void claim_lr_range(Inputs& in, Claim& c) {
  const Sweeps sweeps = stability_sweeps(in);
  c.header = {"cell", "rates that train: unscaled", "1/sqrt(d_k)", "widest of the other schemes",
              "LR sensitivity: unscaled minus 1/sqrt(d_k), paired [95% CI]"};
  std::vector<std::string> narrower, not_narrower;
  std::size_t cells = 0;
  for (const auto& cell : sweeps.cells) {
    const json *none = cell.at("none"), *scaled = cell.at("sqrt_dk");
    if (!none || !scaled) continue;
    ++cells;
    std::size_t widest = 0;
    std::string widest_name = "-";
    for (const auto& [name, r] : cell.scheme)
      if (name != "none" && name != "sqrt_dk" && sa::trainable_rates(*r).size() >= widest)
        widest = sa::trainable_rates(*r).size(), widest_name = name + ": " + rates_that_train(*r);
    const std::size_t n_none = sa::trainable_rates(*none).size(),
                      n_scaled = sa::trainable_rates(*scaled).size();
    (n_none < n_scaled ? narrower : not_narrower)
        .push_back(cell.name + " (" + std::to_string(n_none) + " vs " + std::to_string(n_scaled) +
                   " rates)");
    c.rows.push_back({cell.name, rates_that_train(*none), rates_that_train(*scaled), widest_name,
                      difference_text(sa::sensitivity_difference(*none, *scaled))});
  }
  // Stated threshold: a rate trains when more than half of its seeds reach the target accuracy
  // (sa::rate_trains); "narrower" is fewer such rates of the shared grid than 1/sqrt(d_k) has.
  c.verdict = verdict_of(narrower.size(), cells);
  c.reason = narrower.empty() ? "unscaled attention trains at as many learning rates of the grid "
                                "as 1/sqrt(d_k) or more in every cell: " +
                                    join(not_narrower)
                              : "unscaled attention trains at fewer learning rates of the grid "
                                "than 1/sqrt(d_k) in " +
                                    join(narrower);
  if (!narrower.empty() && !not_narrower.empty()) c.reason += "; not in " + join(not_narrower);
  c.source = sweeps.cited +
             " (scale none and sqrt_dk; a rate trains when more than half of its "
             "seeds reach the target accuracy)";
}

void claim_logit_growth(Inputs& in, Claim& c) {
  const Sweeps sweeps = stability_sweeps(in);
  c.header = {"cell",
              "scale",
              "smallest rate where logits grow ≥ 10× and softmax saturates",
              "there: largest logit init → peak, lowest entropy",
              "at the largest rate",
              "trains there?"};
  const std::vector<std::string> unbounded = {"none", "sqrt_dk", "dk", "log_n"};
  std::vector<std::string> saturating, never, bounded_lower, bounded_not_lower, qk_saturates,
      trains_saturated;
  for (const auto& cell : sweeps.cells) {
    const json* none = cell.at("none");
    if (!none) continue;
    const double n_keys = (*none)["n_keys"].get<double>();
    std::optional<double> unbounded_peak_at_top;  // the smallest over unbounded schemes
    for (const auto& [name, r] : cell.scheme) {
      const json& rates = (*r)["learning_rates"];
      std::optional<std::size_t> first;
      for (std::size_t i = 0; i < rates.size() && !first; ++i) {
        const auto g = sa::logit_growth(rates[i]);
        if (g.factor() >= sa::kGrowthFactor && sa::saturates(g, n_keys)) first = i;
      }
      const auto top = sa::logit_growth(rates.back());
      const bool is_unbounded =
          std::find(unbounded.begin(), unbounded.end(), name) != unbounded.end();
      if (is_unbounded)
        unbounded_peak_at_top = std::min(unbounded_peak_at_top.value_or(top.peak), top.peak);
      const std::string from = first ? " from rate " + rates[*first]["learning_rate"].dump() : "";
      if (name == "none") (first ? saturating : never).push_back(cell.name + from);
      if (name == "qk_norm" && first) qk_saturates.push_back(cell.name + from);
      if (first && sa::rate_trains(rates[*first]))
        trains_saturated.push_back(cell.name + " " + name);
      std::string there = "-", trains = "-";
      if (first) {
        const auto g = sa::logit_growth(rates[*first]);
        there = number(g.initial) + " → " + number(g.peak) + ", " + number(g.lowest_entropy);
        trains = sa::rate_trains(rates[*first]) ? "yes" : "no";
      }
      c.rows.push_back(
          {cell.name, name, first ? rates[*first]["learning_rate"].dump() : "none", there,
           number(top.initial) + " → " + number(top.peak) + ", " + number(top.lowest_entropy),
           trains});
    }
    if (const json* qk = cell.at("qk_norm"); qk && unbounded_peak_at_top) {
      const double qk_peak = sa::logit_growth((*qk)["learning_rates"].back()).peak;
      (qk_peak < *unbounded_peak_at_top ? bounded_lower : bounded_not_lower)
          .push_back(cell.name + " (" + number(qk_peak) + " vs " + number(*unbounded_peak_at_top) +
                     ")");
    }
  }
  // Stated thresholds (sa::kGrowthFactor, sa::kSaturatedEntropyShare): logits grow when their
  // peak is 10x their initial value; softmax saturates when some block's mean entropy falls
  // below 0.1 ln N. "Holds" when unscaled logits do both in every cell, QK-norm's peak logit at
  // the largest rate stays below every unbounded scheme's, and QK-norm never saturates; qualified
  // when only some of that.
  c.verdict = saturating.empty() ? Verdict::does_not_hold
              : never.empty() && bounded_not_lower.empty() && qk_saturates.empty()
                  ? Verdict::holds
                  : Verdict::holds_with_qualification;
  c.reason = saturating.empty()
                 ? "unscaled logits never grew 10x with a saturated softmax at any rate of the grid"
                 : "unscaled logits grow at least 10x and some block's attention entropy falls "
                   "below 0.1 ln N in " +
                       join(saturating);
  if (!never.empty()) c.reason += "; at no rate of the grid in " + join(never);
  if (!bounded_lower.empty())
    c.reason +=
        "; at the largest rate QK-norm's peak logit stays below every unbounded scheme's in " +
        join(bounded_lower);
  if (!bounded_not_lower.empty()) c.reason += "; but not in " + join(bounded_not_lower);
  if (!qk_saturates.empty())
    c.reason +=
        "; QK-norm bounds the logits only through its learned gains, and saturates too in " +
        join(qk_saturates);
  if (!trains_saturated.empty())
    c.reason +=
        "; at the smallest saturating rate some runs still train (recall needs sharp "
        "attention), so saturation alone is not failure: " +
        join(trains_saturated);
  c.source = sweeps.cited + " (the mean curves of the largest logit and the entropy per block)";
}

void claim_qk_norm(Inputs& in, Claim& c) {
  const Sweeps sweeps = stability_sweeps(in);
  c.header = {"cell",
              "LR sensitivity: 1/sqrt(d_k) [95% CI]",
              "QK-norm [95% CI]",
              "1/sqrt(d_k) minus QK-norm, paired [95% CI]",
              "rates that train: 1/sqrt(d_k)",
              "QK-norm"};
  std::vector<std::string> less, unresolved, more;
  std::size_t cells = 0;
  for (const auto& cell : sweeps.cells) {
    const json *scaled = cell.at("sqrt_dk"), *qk = cell.at("qk_norm");
    if (!scaled || !qk) continue;
    ++cells;
    const auto d = sa::sensitivity_difference(*scaled, *qk);
    const std::string text = cell.name + " (" + difference_text(d) + ")";
    (d && d->low > 0 ? less : d && d->high < 0 ? more : unresolved).push_back(text);
    c.rows.push_back({cell.name, with_ci((*scaled)["sensitivity"]), with_ci((*qk)["sensitivity"]),
                      difference_text(d), rates_that_train(*scaled), rates_that_train(*qk)});
  }
  // Stated threshold: less sensitive when the paired 95 % interval of the per-seed difference
  // of sensitivities (seed t of both schemes saw the same data) lies above 0.
  c.verdict = more.empty()   ? verdict_of(less.size(), cells)
              : less.empty() ? Verdict::does_not_hold
                             : Verdict::holds_with_qualification;
  c.reason = less.empty() ? "QK-norm is not resolvably less sensitive than 1/sqrt(d_k) in any cell"
                          : "QK-norm is resolvably less sensitive in " + join(less);
  if (!unresolved.empty()) c.reason += "; unresolved (interval contains 0) in " + join(unresolved);
  if (!more.empty()) c.reason += "; resolvably more sensitive in " + join(more);
  c.source = sweeps.cited + " (scale sqrt_dk and qk_norm; differences per seed)";
}

// ---- claims 15-16: soft-cap and sink in the stability experiments (configs/modifiers.json) ---

// The record of `e` whose parameters equal r's but for `key`, which is `value`; null if none.
const json* partner(const json& e, const json& r, const std::string& key, const json& value) {
  for (const auto& other : e["records"]) {
    json want = r["params"];
    want[key] = value;
    if (other["params"] == want) return &other;
  }
  return nullptr;
}

// "d_k = 32, scale none, sink learned": a record's cell, without the parameter compared.
std::string cell_name(const json& e, const json& r, const std::string& compared) {
  std::string s = e["name"].get<std::string>() + " d_k = " + r["params"]["d_k"].dump() +
                  ", scale " + report::label(r["params"]["scale"]);
  for (const char* key : {"softcap", "sink"})
    if (key != compared && r["params"].contains(key))
      s += std::string(", ") + key + " " + report::label(r["params"][key]);
  return s;
}

// Every record of the stability experiments that vary the modifiers, with its experiment; the
// experiments cited in `cited`.
void for_each_modifier_record(Inputs& in, std::string& cited,
                              const std::function<void(const json& e, const json& r)>& visit) {
  for (const auto& [e, file] : in.of_kind("stability")) {
    if (!varies_modifiers(*e)) continue;
    cited +=
        (cited.empty() ? "experiment `" : ", `") + (*e)["name"].get<std::string>() + "` of " + file;
    for (const auto& r : (*e)["records"]) visit(*e, r);
  }
}

std::string trained_text(const json& rate) {
  return rate["trained"]["count"].dump() + "/" + rate["trained"]["runs"].dump() + " · " +
         rate["diverged"]["count"].dump() + "/" + rate["diverged"]["runs"].dump();
}

void claim_softcap(Inputs& in, Claim& c) {
  c.header = {"cell",
              "learning rate",
              "no cap: logit init → peak, H min",
              "trained · diverged",
              "soft-capped: peak (cap)",
              "H min",
              "trained · diverged",
              "bounded and stable"};
  std::string cited;
  std::vector<std::string> kept, lost;
  for_each_modifier_record(in, cited, [&](const json& e, const json& r) {
    const json& p = r["params"];
    // With a learned sink the largest logit read off the probes may be the sink's.
    if (!(p.value("softcap", 0.0) > 0) || p.value("sink", std::string("none")) != "none") return;
    const json* base = partner(e, r, "softcap", 0);
    if (!base) return;
    const double cap = p["softcap"], n_keys = r["n_keys"];
    const json &capped = r["learning_rates"], &plain = (*base)["learning_rates"];
    for (std::size_t i = 0; i < plain.size() && i < capped.size(); ++i) {
      const auto g = sa::logit_growth(plain[i]);
      if (!(g.factor() >= sa::kGrowthFactor && sa::saturates(g, n_keys))) continue;
      const auto h = sa::logit_growth(capped[i]);
      // Stated thresholds: bounded when the peak logit stays at or below the cap (up to fp32
      // rounding); stable when more than half the seeds train and none diverges.
      const bool bounded = h.peak <= cap * (1 + 1e-6);
      const bool stable = sa::rate_trains(capped[i]) && sa::none_diverged(capped[i]);
      const std::string where =
          cell_name(e, r, "softcap") + " at " + number(capped[i]["learning_rate"].get<double>());
      (bounded && stable ? kept : lost).push_back(where);
      c.rows.push_back(
          {cell_name(e, r, "softcap"), number(capped[i]["learning_rate"].get<double>()),
           number(g.initial) + " → " + number(g.peak) + ", " + number(g.lowest_entropy),
           trained_text(plain[i]), number(h.peak) + " (" + number(cap) + ")",
           number(h.lowest_entropy), trained_text(capped[i]),
           bounded && stable ? "yes"
           : bounded         ? "bounded, not stable"
                             : "no"});
    }
  });
  c.verdict = verdict_of(kept.size(), kept.size() + lost.size());
  c.reason = kept.empty()
                 ? "at no rate where the unbounded logits grow 10x and saturate does the "
                   "soft-capped model stay bounded and train without divergence"
                 : "bounded and stable where the unbounded logits saturate in " + join(kept);
  if (!kept.empty() && !lost.empty()) c.reason += "; not in " + join(lost);
  if (kept.empty() && !lost.empty()) c.reason += ": " + join(lost);
  c.source = cited +
             " (soft-cap > 0 beside soft-cap 0, no sink; saturates: logits grow 10x and some "
             "block's entropy falls below 0.1 ln N; stable: more than half the seeds train, none "
             "diverges)";
}

void claim_sink(Inputs& in, Claim& c) {
  c.header = {"cell",
              "learning rate",
              "learned sink: H min",
              "W_Q, W_K gradient kept (last / first)",
              "trained · diverged",
              "no sink: H min",
              "gradient kept",
              "falls without saturating"};
  std::string cited;
  std::vector<std::string> kept, lost;
  for_each_modifier_record(in, cited, [&](const json& e, const json& r) {
    if (r["params"].value("sink", std::string("none")) != "learned") return;
    const json* base = partner(e, r, "sink", "none");
    if (!base) return;
    const double n_keys = r["n_keys"];
    const json &sunk = r["learning_rates"], &plain = (*base)["learning_rates"];
    for (std::size_t i = 0; i < sunk.size() && i < plain.size(); ++i) {
      const auto g = sa::logit_growth(sunk[i]);
      // Stated thresholds: the entropy "falls" where some block's mean entropy (the sink an
      // outcome) goes below 0.1 ln N; the gradient is "kept" while the held-out W_Q, W_K
      // gradient norm at the end is at least 0.1 of its value at step 0.
      if (!sa::saturates(g, n_keys)) continue;
      const double share = sa::gradient_kept(sunk[i]);
      const bool ok = share >= sa::kGradientKeptShare;
      const std::string where =
          cell_name(e, r, "sink") + " at " + number(sunk[i]["learning_rate"].get<double>());
      (ok ? kept : lost).push_back(where + " (" + number(share) + ")");
      c.rows.push_back({cell_name(e, r, "sink"), number(sunk[i]["learning_rate"].get<double>()),
                        number(g.lowest_entropy), number(share), trained_text(sunk[i]),
                        number(sa::logit_growth(plain[i]).lowest_entropy),
                        number(sa::gradient_kept(plain[i])), ok ? "yes" : "no"});
    }
  });
  c.verdict = verdict_of(kept.size(), kept.size() + lost.size());
  c.reason = kept.empty()
                 ? "wherever the entropy with a learned sink falls below 0.1 ln N, the W_Q, W_K "
                   "gradient ends below 0.1 of its initial norm"
                 : "the entropy falls below 0.1 ln N and the W_Q, W_K gradient keeps at least 0.1 "
                   "of its initial norm in " +
                       join(kept);
  if (!lost.empty()) c.reason += (kept.empty() ? ": " : "; it does not in ") + join(lost);
  c.source = cited +
             " (sink learned beside none at the same scale, d_k and soft-cap; a gradient that "
             "falls because the task is learnt counts as not kept too: compare the no-sink column)";
}

// ---- claim 14: the precision experiments (configs/precision.json) ---------------------------

// Stated thresholds: unscaled attention "loses accuracy" at a d_k when it has non-finite rows, or
// when its O error (the relative RMS against fp64) is at least kLossFactor times the scaled
// one's with disjoint 95 % intervals. X is the smallest d_k from which on (every larger d_k
// measured too) it does; Y the largest upper bound of the scaled O error over every d_k.
constexpr double kLossFactor = 2.0;

void claim_half_precision(Inputs& in, Claim& c) {
  c.header = {"kernel (precision)", "d_k",   "O err unscaled [95% CI]",
              "O err 1/sqrt(d_k)",  "ratio", "lse err unscaled / scaled",
              "non-finite rows",    "loses"};
  std::string sources_cited;
  std::vector<std::string> found, missing;
  std::size_t groups = 0;
  bool scaled_nonfinite = false;
  for (const auto& [e, file] : in.of_kind("precision")) {
    sources_cited += (sources_cited.empty() ? "experiment `" : ", `") +
                     (*e)["name"].get<std::string>() + "` of " + file;
    std::string fixed;
    for (const auto& [title, records] :
         report::group_records((*e)["records"], "d_k", "scale", fixed)) {
      // Half precision only: fp32 is not, and int8 K/V (kv-int8) is a scale per row, not a
      // 16-bit format.
      const json& precision = records.front()->at("precision");
      if (precision == "fp32" || precision == "kv-int8") continue;
      std::map<double, std::pair<const json*, const json*>> by_d_k;  // {unscaled, scaled}
      for (const json* r : records) {
        const json& scale = (*r)["params"]["scale"];
        auto& cell = by_d_k[(*r)["params"]["d_k"].get<double>()];
        if (scale == "none") cell.first = r;
        if (scale == "sqrt_dk") cell.second = r;
      }
      const json& first = *records.front();
      // The group's parameters, with the kernel named even where it is the only one.
      const std::string kernel = "kernel " + first["params"]["kernel"].get<std::string>();
      const std::string name =
          (title.find(kernel) == std::string::npos ? kernel + (title.empty() ? "" : ", " + title)
                                                   : title) +
          " (" + first["precision"].get<std::string>() + ")";
      // Y also in units of the precision's unit roundoff, where the record gives it.
      const auto within = [&](double y) {
        return number(y) + (first.contains("unit_roundoff")
                                ? " (" + number(y / number_in(first["unit_roundoff"])) + " u)"
                                : std::string());
      };
      // A null share (not finite) counts as every row.
      const auto nonfinite = [](const json& r) {
        return r["nonfinite_rows"].is_number() ? r["nonfinite_rows"].get<double>() : 1.0;
      };
      double x = 0, y = 0;  // x = 0: no d_k from which on unscaled loses
      std::string lse_at_largest;
      std::size_t compared = 0;
      for (const auto& [d_k, cell] : by_d_k) {
        const auto [none, scaled] = cell;
        if (!none || !scaled) continue;
        ++compared;
        const json& a = (*none)["error"]["total"]["o_rms"];
        const json& b = (*scaled)["error"]["total"]["o_rms"];
        const double nf_none = nonfinite(*none), nf_scaled = nonfinite(*scaled);
        scaled_nonfinite = scaled_nonfinite || nf_scaled > 0;
        const bool finite = a["value"].is_number() && b["value"].is_number();
        const bool loses = nf_none > 0 || (finite && value(a) >= kLossFactor * value(b) &&
                                           a["ci95"][0].is_number() && b["ci95"][1].is_number() &&
                                           number_in(a["ci95"][0]) > number_in(b["ci95"][1]));
        if (b["ci95"][1].is_number()) y = std::max(y, number_in(b["ci95"][1]));
        if (!loses)
          x = 0;
        else if (x == 0)
          x = d_k;
        const std::string lse = shown((*none)["error"]["total"]["lse_rms"]) + " / " +
                                shown((*scaled)["error"]["total"]["lse_rms"]);
        lse_at_largest =
            "; lse error (nats) unscaled / scaled at d_k = " + number(d_k) + ": " + lse;
        c.rows.push_back({name, number(d_k), with_ci(a), with_ci(b),
                          finite ? number(value(a) / value(b)) : "-", lse,
                          number(nf_none) + " / " + number(nf_scaled), yes_no(loses)});
      }
      if (compared == 0) continue;  // no verdict on this group from nothing
      ++groups;
      (x > 0 ? found : missing)
          .push_back(name +
                     (x > 0 ? ": unscaled loses from d_k = " + number(x) +
                                  " on, while 1/sqrt(d_k) keeps the O error within " + within(y)
                            : std::string(": unscaled does not lose up to the largest d_k "
                                          "(1/sqrt(d_k) ") +
                                  "within " + within(y) + ")") +
                     lse_at_largest);
    }
  }
  c.verdict = scaled_nonfinite ? Verdict::does_not_hold : verdict_of(found.size(), groups);
  std::vector<std::string> all = found;
  all.insert(all.end(), missing.begin(), missing.end());
  c.reason = (scaled_nonfinite ? "1/sqrt(d_k) has non-finite rows too; " : std::string()) +
             join(all, "; ") + " (loses: non-finite rows, or an O error at least " +
             number(kLossFactor) + "x the scaled one's with disjoint 95 % CIs)";
  c.source = sources_cited;
}

// ---- the registry ---------------------------------------------------------------------------

// One claim: its number, its text, the config whose run's result file it reads ("" for none),
// what a cell that can test it is (for a claim not tested), and its evaluator, which fills the
// evidence, the verdict, the reason and the source (no rows: nothing could test it). Adding a
// claim is one entry here and its evaluator above; the command line, the Makefile and the
// tests read the rest from this list.
struct Entry {
  int number;
  const char* statement;
  const char* config;
  const char* needs;
  void (*evaluate)(Inputs& in, Claim& c);
};

const Entry kClaims[] = {
    {1,
     "If Q and K have entries with mean 0 and variance 1, each entry of QK^T has mean 0 and "
     "variance d_k.",
     "configs/seeds.json", "records of experiment `claim1-2-variance` with scale none",
     claim_variance_is_d_k},
    {2,
     "Dividing by sqrt(d_k) brings that variance back to 1 for every d_k; dividing by d_k "
     "instead shrinks it to 1/d_k.",
     "configs/seeds.json", "records of experiment `claim1-2-variance` with a scale other than none",
     claim_scaling_restores_unit_variance},
    {3,
     "np.var of the product of two 2 x 2 standard-normal matrices should be d_k = 2, so seeing "
     "1.6 is puzzling.",
     "configs/seeds.json", "a record of experiment `claim3-2x2`", claim_two_by_two},
    {4,
     "NumPy printed np.var(A @ B) = 110.56 for A 1111 x 111, B 111 x 1111, and 0.996 after "
     "dividing by sqrt(111): consistent with variance d_k = 111, and 1 after scaling.",
     "configs/seeds.json", "records of experiment `claim4-1111x111`", claim_numpy_printout},
    {5,
     "It is safe to assume unit-variance queries and keys because inputs are LayerNorm'd and "
     "W_Q, W_K are initialised to preserve variance (Xavier/Glorot).",
     "configs/seeds.json", "records of experiment `claim5-projections`", claim_projections},
    {6, "Without scaling, softmax becomes almost one-hot as d_k grows.", "configs/seeds.json",
     "records of experiment `claim6-saturation` with scale none", claim_saturation},
    {7, "A gap of 4 between two scores already gives an almost one-sided distribution.", "", "",
     claim_gap_of_four},
    {8, "Without scaling, gradients through most positions become very small.",
     "configs/seeds.json",
     "records of experiment `claim8-gradients` unscaled and scaled at the same d_k",
     claim_gradients},
    {9, "Scaling by 1/sqrt(d_k) keeps softmax from saturating, for any d_k.", "configs/seeds.json",
     "records of experiment `claim9-scaled-entropy`", claim_scaled_never_saturates},
    {10, "Without scaling, training becomes slower or less stable.", "configs/training.json",
     "a `training` experiment with scale none and sqrt_dk at the same d_k", claim_training},
    {11, "Without scaling, the range of learning rates that train is narrower.",
     "configs/stability.json",
     "a `stability` experiment with scale none and sqrt_dk at the same d_k", claim_lr_range},
    {12, "Attention logits grow during training until softmax saturates when nothing bounds them.",
     "configs/stability.json", "a `stability` experiment with scale none", claim_logit_growth},
    {13, "QK-norm makes training less sensitive to the learning rate than 1/sqrt(d_k) alone.",
     "configs/stability.json",
     "a `stability` experiment with scale sqrt_dk and qk_norm at the same d_k", claim_qk_norm},
    {14,
     "In half precision, unscaled attention overflows or loses accuracy from some d_k on, while "
     "1/sqrt(d_k) keeps its error bounded.",
     "configs/precision.json",
     "a `precision` experiment of a 16-bit kernel with scale none and sqrt_dk at the same d_k",
     claim_half_precision},
    {15,
     "Logit soft-capping bounds the attention logits and keeps training stable at learning rates "
     "where unbounded logits saturate.",
     "configs/modifiers.json",
     "a `stability` experiment with soft-cap 0 and a soft-cap > 0 at the same scale and d_k, "
     "without a sink, whose unbounded logits saturate at some rate",
     claim_softcap},
    {16, "A learned sink lets a head's attention entropy fall without saturating its gradients.",
     "configs/modifiers.json",
     "a `stability` experiment with sink none and learned at the same scale, d_k and soft-cap, "
     "whose entropy with the sink falls below 0.1 ln N at some rate",
     claim_sink},
};

// "claim 10", "claims 11-13", "claims 1-6, 8, 9".
std::string claim_numbers(const std::vector<int>& numbers) {
  std::string s;
  for (std::size_t i = 0; i < numbers.size();) {
    std::size_t j = i;
    while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1) ++j;
    if (j < i + 2) j = i;  // a range of three or more
    s += (s.empty() ? "" : ", ") + std::to_string(numbers[i]) +
         (j > i ? "-" + std::to_string(numbers[j]) : "");
    i = j + 1;
  }
  return (numbers.size() > 1 ? "claims " : "claim ") + s;
}

// The files as the JSON readers name them.
std::vector<NamedJson> named(const std::vector<Source>& sources) {
  std::vector<NamedJson> files;
  for (const auto& s : sources) files.push_back({s.file, s.result});
  return files;
}

// The same result twice would count its cells twice, or hide that a second file was meant.
void refuse_duplicates(const std::vector<Source>& sources) {
  for (std::size_t j = 0; j < sources.size(); ++j)
    for (std::size_t i = 0; i < j; ++i)
      if (*sources[i].result == *sources[j].result)
        throw InputError(sources[j].file + ": the same result as " + sources[i].file +
                         " (a file given twice); give each result file once");
}

}  // namespace

std::vector<Input> inputs() {
  std::vector<Input> out;
  for (const Entry& e : kClaims) {
    if (*e.config == '\0') continue;
    auto it =
        std::find_if(out.begin(), out.end(), [&](const Input& i) { return i.config == e.config; });
    if (it == out.end()) it = out.insert(out.end(), {e.config, {}});
    it->claims.push_back(e.number);
  }
  return out;
}

std::string inputs_text() {
  std::string s;
  for (const auto& i : inputs())
    s += (s.empty() ? "" : ", ") + i.config + " (" + claim_numbers(i.claims) + ")";
  return s;
}

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::holds:
      return "holds";
    case Verdict::holds_with_qualification:
      return "holds with qualification";
    case Verdict::does_not_hold:
      return "does not hold";
    case Verdict::not_tested:
      return "not tested";
  }
  return "?";
}

std::vector<Claim> evaluate(const std::vector<Source>& sources) {
  refuse_duplicates(sources);
  Inputs in(sources);
  std::vector<Claim> claims;
  for (const Entry& entry : kClaims) {
    Claim c(entry.number, entry.statement);
    const std::string which = "claim " + std::to_string(entry.number);
    try {
      entry.evaluate(in, c);
    } catch (const JsonTypeError& bad) {
      throw type_error_in(named(sources), bad, which + " decides by it");
    } catch (const json::exception& e) {
      throw json_library_error(named(sources), which + " reads a record", e);
    }
    // No verdict from nothing: a claim that compared no cell is not tested.
    if (c.rows.empty()) {
      c.verdict = Verdict::not_tested;
      c.reason = std::string("no comparable cells (needs ") + entry.needs + ", from a run of `" +
                 entry.config + "`)";
      c.header.clear();
      c.source.clear();
    }
    claims.push_back(std::move(c));
  }
  std::vector<std::string> unread;
  for (std::size_t i = 0; i < sources.size(); ++i)
    if (!in.read(i))
      unread.push_back(sources[i].file + ": no claim reads it (the claims read runs of " +
                       inputs_text() + ")");
  if (!unread.empty()) throw InputError::from_lines(unread);
  return claims;
}

std::vector<Claim> evaluate(const json& result, const std::string& file) {
  return evaluate(std::vector<Source>{{&result, file}});
}

std::string markdown(const std::vector<Claim>& claims, const std::vector<std::string>& files) {
  std::string command, runs;
  for (const auto& f : files) command += " " + f;
  for (const auto& input : inputs()) {
    std::vector<int> tested;
    for (const auto& c : claims)
      if (c.verdict != Verdict::not_tested &&
          std::find(input.claims.begin(), input.claims.end(), c.number) != input.claims.end())
        tested.push_back(c.number);
    if (!tested.empty())
      runs += (runs.empty() ? "" : "; ") + claim_numbers(tested) + " from a run of `" +
              input.config + "`";
  }
  std::ostringstream out;
  out << "# Claims about scaled dot-product attention, tested\n\n"
      << "Generated by " << markdown_code("sdpa-bench claims" + command) << " from "
      << (files.size() > 1 ? "those result files" : "that result file") << " alone"
      << (runs.empty() ? "" : " (" + runs + ")")
      << ". Each verdict is computed from the cited records; thresholds are stated in "
      << "`analysis/claims.cpp`.\n\n| claim | verdict |\n|---|---|\n";
  for (const auto& c : claims)
    out << "| " << c.number << ". " << markdown_text(c.statement) << " | **" << to_string(c.verdict)
        << "** |\n";
  for (const auto& c : claims) {
    // The reason and the source name experiments and files: data, escaped like the tables.
    out << "\n## Claim " << c.number << "\n\n> " << markdown_text(c.statement)
        << "\n\n**Verdict: " << to_string(c.verdict) << "**: " << markdown_text(c.reason) << ".\n";
    if (!c.rows.empty())
      out << "\n"
          << report::markdown_table(c.header, c.rows, false)
          << "\nSource: " << markdown_text(c.source) << ".\n";
  }
  return out.str();
}

}  // namespace sdpa::claims
