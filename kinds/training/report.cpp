// The reading side of `training`: tables and plots of the records kinds/training/experiment.cpp
// writes (their contract: record.schema.json beside it). Per d_k and
// scale scheme: speed to the target, final quality, attention statistics and stability; the
// verdict of unscaled against sqrt_dk; held-out loss against step, as tables and plots.
#include <map>
#include <optional>

#include "kind_report.hpp"
#include "tables.hpp"
#include "training_verdict.hpp"

namespace sdpa::report {
namespace {

// ---- training: does scaling make training faster?

std::string steps_to_target(const json& r) {
  const json& t = r["steps_to_target"];
  return (t["median"].is_null() ? "-" : number(t["median"])) + " (" + t["reached"].dump() + "/" +
         t["seeds"].dump() + ")";
}

std::string init_to_end(const json& r, const std::string& statistic) {
  return number(r[statistic + "_init"]["value"]) + " → " + number(r[statistic + "_final"]["value"]);
}

// A logged curve's first and last mean.
std::string curve_ends(const json& r, const std::string& curve) {
  const json& mean = r["curves"][curve]["mean"];
  return number(mean.front()) + " → " + number(mean.back());
}

// Records of one group keyed by (d_k, scale label).
using Cells = std::map<std::pair<double, std::string>, const json*>;
Cells by_d_k_and_scale(const std::vector<const json*>& records) {
  Cells cells;
  for (const json* r : records)
    cells[{(*r)["params"]["d_k"].get<double>(), label((*r)["params"]["scale"])}] = r;
  return cells;
}

// The verdict per d_k and the d_k it starts from, where the group has "none" and "sqrt_dk".
std::optional<Table> verdict_table(const std::string& title,
                                   const std::vector<const json*>& records) {
  Table t;
  t.title = title + ": unscaled vs sqrt_dk";
  t.header = {"d_k",
              "none: steps [95% CI]",
              "sqrt_dk: steps [95% CI]",
              "none: final loss [95% CI]",
              "sqrt_dk: final loss [95% CI]",
              "unscaled vs sqrt_dk"};
  std::vector<std::pair<double, bool>> slower, worse;
  for (const ScalePair& p : unscaled_vs_scaled(records)) {
    slower.emplace_back(p.d_k, p.verdict.slower);
    worse.emplace_back(p.d_k, p.verdict.worse);
    t.rows.push_back({number(p.d_k),
                      statistic_with_ci((*p.none)["steps_to_target"]["censored_mean"]),
                      statistic_with_ci((*p.scaled)["steps_to_target"]["censored_mean"]),
                      statistic_with_ci((*p.none)["final_loss"]),
                      statistic_with_ci((*p.scaled)["final_loss"]), p.verdict.text});
  }
  if (t.rows.empty()) return std::nullopt;
  t.rows.push_back({"verdict", "", "", "", "",
                    "unscaled slower to target: " + onset(slower) + "; worse: " + onset(worse)});
  t.note =
      "steps: mean steps to the target accuracy across seeds, a seed that never reached it "
      "counted as the step budget (so a lower bound where some did not). A difference is "
      "reported only where the two 95 % CIs do not overlap (a conservative test); 'worse' means "
      "slower, higher final loss or non-finite steps in more seeds, and better in none of these.";
  return t;
}

// Plot data: held-out loss against step, one column per scale scheme, at one d_k.
Table loss_curve_table(const std::string& title, const std::vector<const json*>& records,
                       double d_k) {
  Table t;
  t.title = title + ": held-out loss vs step at d_k = " + number(d_k) + " (plot data)";
  t.header = {"step"};
  std::vector<const json*> columns;  // in the config's order of scale schemes
  for (const json* r : records)
    if ((*r)["params"]["d_k"] == d_k)
      columns.push_back(r), t.header.push_back(label((*r)["params"]["scale"]) + ": loss [95% CI]");
  const json& steps = (*columns.front())["curves"]["step"];
  for (std::size_t i = 0; i < steps.size(); ++i) {
    std::vector<std::string> row = {steps[i].dump()};
    for (const json* r : columns) {
      const json& loss = (*r)["curves"]["loss"];
      row.push_back(number(loss["mean"][i]) + " " + interval(loss["ci95"][i]));
    }
    t.rows.push_back(std::move(row));
  }
  t.note =
      "Mean cross-entropy (nats) on each seed's held-out set across seeds; one line per "
      "scale scheme.";
  return t;
}

// Per d_k and scale: speed, final quality, attention statistics and stability; then the
// verdict of unscaled against sqrt_dk and the loss curves at the smallest and largest d_k.
std::vector<Table> training_tables(const json& experiment, const std::string& source) {
  const std::vector<Column> columns = {
      {"s2 init", [](const json& r) { return number(r["sigma2_init"]); }},
      {"steps to target (reached)", [](const json& r) { return steps_to_target(r); }},
      {"final loss [95% CI]", [](const json& r) { return statistic_with_ci(r["final_loss"]); }},
      {"final acc [Wilson 95%]",
       [](const json& r) {
         const json& acc = r["final_accuracy"];
         return acc["value"].is_null() ? number(acc["value"]) : statistic_with_ci(acc);
       }},
      {"H init → end", [](const json& r) { return init_to_end(r, "entropy"); }},
      {"max w init → end", [](const json& r) { return init_to_end(r, "max_weight"); }},
      {"‖∇W_Q‖ init → end", [](const json& r) { return curve_ends(r, "grad_norm_w_q"); }},
      {"non-finite (seeds)",
       [](const json& r) {
         return r["nonfinite_steps"]["total"].dump() + " (" + seeds_with_nonfinite(r) + ")";
       }},
  };
  auto out = side_by_side(
      experiment, source, "d_k", "scale", columns,
      "s2 init: predicted variance of the logits c q.k at initialisation (softmax condenses past "
      "2 ln N). steps to target: median first logged step whose held-out accuracy reaches the "
      "target (- when half the seeds or more never did), with how many seeds reached it. H, max "
      "w: attention entropy (nats) and largest weight of the query row, mean over held-out "
      "sequences and heads. final loss: Student-t interval across seeds; final acc: Wilson score "
      "interval of the mean across seeds (stats::wilson_interval_of_mean), which stays inside "
      "[0, 1]. ‖∇W_Q‖: Frobenius norm of the held-out loss's gradient in W_Q. "
      "non-finite: training steps whose loss or gradient was inf/NaN "
      "(skipped), in how many seeds. Intervals are across seeds.",
      "final_loss");
  if (experiment["records"].empty()) return out;
  std::string fixed;
  for (const auto& [group, records] : group_records(experiment["records"], "d_k", "scale", fixed)) {
    const std::string title = table_title(experiment, source, group);
    if (auto verdict = verdict_table(title, records)) out.push_back(std::move(*verdict));
    const Cells cells = by_d_k_and_scale(records);
    const double smallest = cells.begin()->first.first, largest = cells.rbegin()->first.first;
    out.push_back(loss_curve_table(title, records, smallest));
    if (largest != smallest) out.push_back(loss_curve_table(title, records, largest));
  }
  return out;
}

// Training: held-out loss against step, one line per scale scheme, at the smallest and the
// largest d_k of each group, side by side.
std::vector<plots::Panel> loss_panels(const std::vector<const json*>& records) {
  double smallest = 0, largest = 0;
  for (const json* r : records) {
    const double d_k = (*r)["params"]["d_k"];
    if (r == records.front() || d_k < smallest) smallest = d_k;
    if (r == records.front() || d_k > largest) largest = d_k;
  }
  std::vector<double> shown = {smallest};
  if (largest != smallest) shown.push_back(largest);
  std::vector<plots::Panel> panels;
  for (const double d_k : shown) {
    plots::Panel panel{.title = "d_k = " + number(d_k),
                       .xlabel = "training step",
                       .ylabel = "held-out loss (nats), mean across seeds",
                       .logx = false,  // linear y too: a band whose low end is <= 0 has no log
                       .bands = true};
    for (const json* r : records) {
      if ((*r)["params"]["d_k"].get<double>() != d_k) continue;
      plots::Series series{.title = "c = " + label((*r)["params"]["scale"])};
      const json& steps = (*r)["curves"]["step"];
      const json& loss = (*r)["curves"]["loss"];
      for (std::size_t i = 0; i < steps.size(); ++i)
        series.rows.push_back(steps[i].dump() + " " + plots::data(loss["mean"][i]) + " " +
                              plots::data(loss["ci95"][i][0]) + " " +
                              plots::data(loss["ci95"][i][1]) + " NaN");
      panel.series.push_back(std::move(series));
    }
    panels.push_back(std::move(panel));
  }
  return panels;
}

// Held-out loss against step, one figure per group of records: the smallest and the largest
// d_k side by side.
std::vector<plots::Figure> loss_figures(const json& experiment, const std::string& name,
                                        const std::string& title) {
  std::string fixed;
  const auto groups = group_records(experiment["records"], "d_k", "scale", fixed);
  std::vector<plots::Figure> figures;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string suffix = plots::group_suffix(g, groups.size());
    const std::string group = plots::group_label(groups[g]);
    figures.push_back({name + "-loss" + suffix, title + ": held-out loss vs step" + group,
                       loss_panels(groups[g].records)});
  }
  return figures;
}

}  // namespace

KindReport training_report() {
  return {.name = "training", .tables = training_tables, .figures = loss_figures};
}

}  // namespace sdpa::report
