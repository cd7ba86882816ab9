// The reading side of `stability` (issue 19): tables and plots of the records
// kinds/stability/experiment.cpp writes (their contract: record.schema.json beside it). Per cell
// the learning-rate sensitivity; per d_k the final loss, the shares of runs that trained and that
// diverged, and the largest logit's growth against the learning rate; plots of the final loss
// against the learning rate and of the largest logit and the entropy against step. What they
// compute from the records is sdpa/stability_analysis.hpp, shared with claims 11-13.
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "kind_report.hpp"
#include "sdpa/stability_analysis.hpp"
#include "tables.hpp"

namespace sdpa::report {
namespace {

// The records of one table group of a stability experiment by d_k, each d_k's schemes in the
// order the records come (the config's).
using SchemeRecords = std::vector<std::pair<std::string, const json*>>;
std::map<double, SchemeRecords> by_d_k(const std::vector<const json*>& records) {
  std::map<double, SchemeRecords> out;
  for (const json* r : records)
    out[param(*r, "d_k").get<double>()].emplace_back(label(param(*r, "scale")), r);
  return out;
}

std::string share(const json& p) {
  return p["count"].dump() + "/" + p["runs"].dump() + " " + interval(p["ci95"]);
}

// One table per d_k: a row per learning rate, a column per scheme, `cell` filling it.
Table rate_table(const std::string& title, const SchemeRecords& schemes,
                 const std::function<std::string(const json& rate)>& cell, std::string note) {
  Table t;
  t.title = title;
  t.header = {"learning rate"};
  for (const auto& [scheme, r] : schemes) t.header.push_back(scheme);
  const json& grid = (*schemes.front().second)["learning_rates"];
  for (std::size_t i = 0; i < grid.size(); ++i) {
    std::vector<std::string> row = {number(grid[i]["learning_rate"])};
    for (const auto& [scheme, r] : schemes) {
      const json& rates = (*r)["learning_rates"];
      row.push_back(i < rates.size() ? cell(rates[i]) : "-");
    }
    t.rows.push_back(std::move(row));
  }
  t.note = std::move(note);
  return t;
}

// Learning-rate sensitivity per d_k and scheme; per d_k, final loss, trained and diverged
// shares, and logit growth against the learning rate.
std::vector<Table> stability_tables(const json& experiment, const std::string& source) {
  namespace sa = stability_analysis;
  std::vector<Table> out;
  if (experiment["records"].empty()) return out;
  std::string fixed;
  for (const auto& [group, records] : group_records(experiment["records"], "d_k", "scale", fixed)) {
    const std::string title = table_title(experiment, source, group);
    const auto cells = by_d_k(records);
    Table sens;
    sens.title = title + ": learning-rate sensitivity";
    sens.header = {"d_k", "scale", "LR sensitivity [95% CI]", "rates that train", "l0 [95% CI]"};
    for (const auto& [d_k, schemes] : cells)
      for (const auto& [scheme, r] : schemes) {
        const auto rates = sa::trainable_rates(*r);
        sens.rows.push_back(
            {number(d_k), scheme, statistic_with_ci((*r)["sensitivity"]),
             std::to_string(rates.size()) + " of " + std::to_string((*r)["learning_rates"].size()) +
                 (rates.empty()
                      ? ""
                      : " (" + number(rates.front()) + " to " + number(rates.back()) + ")"),
             statistic_with_ci((*r)["initial_loss"])});
      }
    sens.note =
        "Fixed: " + fixed +
        ". LR sensitivity (Wortsman et al. 2023, sec. 2.2): mean over the learning-rate grid of "
        "min(final loss, l0) minus the best final loss, per seed (a run that blew up counts as "
        "l0), then its mean across seeds with a Student-t interval (lower end raised to 0 when "
        "every seed's value is non-negative); lower is less sensitive. l0: held-out loss at "
        "initialisation. A rate trains when more than half of its seeds reach the target "
        "accuracy.";
    out.push_back(std::move(sens));
    for (const auto& [d_k, schemes] : cells) {
      const std::string at = title + ", d_k = " + number(d_k);
      out.push_back(rate_table(
          at + ": final loss", schemes,
          [](const json& rate) { return statistic_with_ci(rate["capped_final_loss"]); },
          "Held-out loss at the last step, min(final loss, l0) per seed (a run that blew up "
          "counts as l0), mean across seeds [Student-t 95 % CI]."));
      out.push_back(rate_table(
          at + ": runs that trained · diverged", schemes,
          [](const json& rate) { return share(rate["trained"]) + " · " + share(rate["diverged"]); },
          "Trained: runs whose final held-out accuracy reached the target. Diverged: runs with a "
          "non-finite loss or gradient, or whose final held-out loss is above l0. Shares with "
          "their Wilson 95 % score interval (stays inside [0, 1])."));
      out.push_back(rate_table(
          at + ": largest attention logit", schemes,
          [](const json& rate) {
            const auto g = sa::logit_growth(rate);
            return number(g.initial) + " → " + number(g.peak) + " (H min " +
                   number(g.lowest_entropy) + ")";
          },
          "Largest attention logit c q.k over blocks, held-out rows and heads, mean across seeds: "
          "at initialisation → its peak over training; H min: the lowest mean attention entropy "
          "(nats) of any block at any logged step after 0 (ln N is uniform attention)."));
    }
  }
  return out;
}

// Stability: a rate's mean curve of `field` per block, reduced over blocks by `pick` at each
// logged step (null: no seed reached it), as series rows without an interval.
std::vector<std::string> curve_rows(const json& record, const json& rate, const std::string& field,
                                    const std::function<double(double, double)>& pick, bool logy) {
  std::vector<std::string> rows;
  const json& steps = record["step"];
  for (std::size_t i = 0; i < steps.size(); ++i) {
    double y = std::numeric_limits<double>::quiet_NaN();
    for (const auto& layer : rate["curves"]["layers"]) {
      const json& v = layer[field][i];
      if (!v.is_number()) continue;
      y = std::isnan(y) ? v.get<double>() : pick(y, v.get<double>());
    }
    if (logy && !(y > 0)) y = std::numeric_limits<double>::quiet_NaN();  // no log of it
    const std::string x = plots::data(json(y));
    rows.push_back(steps[i].dump() + " " + x + " " + x + " " + x + " NaN");
  }
  return rows;
}

// Stability, per d_k: final loss (min(l, l0), mean across seeds with its CI) against the learning
// rate, one line per scheme; and the largest logit (over blocks) and the lowest entropy (over
// blocks) against step at a stable rate (the largest at which every scheme trains, else the one
// with the lowest mean final loss over the schemes) and at the grid's largest rate.
std::vector<plots::Figure> stability_figures(const std::string& name, const std::string& title,
                                             const std::vector<const json*>& records) {
  namespace sa = stability_analysis;
  std::map<double, std::vector<const json*>> cells;
  for (const json* r : records) cells[(*r)["params"]["d_k"].get<double>()].push_back(r);
  std::vector<plots::Figure> out;
  plots::Figure loss{name + "-final-loss", title + ": final loss vs learning rate", {}};
  for (const auto& [d_k, schemes] : cells) {
    plots::Panel panel{.title = "d_k = " + number(d_k),
                       .xlabel = "learning rate (AdamW peak)",
                       .ylabel = "held-out loss min(l, l0), mean across seeds",
                       .logx = true};
    for (const json* r : schemes) {
      plots::Series series{.title = label((*r)["params"]["scale"])};
      for (const auto& rate : (*r)["learning_rates"]) {
        const json& l = rate["capped_final_loss"];
        series.rows.push_back(rate["learning_rate"].dump() + " " + plots::data(l["value"]) + " " +
                              plots::data(l["ci95"][0]) + " " + plots::data(l["ci95"][1]) + " NaN");
      }
      panel.series.push_back(std::move(series));
    }
    loss.panels.push_back(std::move(panel));
  }
  out.push_back(std::move(loss));
  for (const auto& [d_k, schemes] : cells) {
    const json& grid = (*schemes.front())["learning_rates"];
    std::size_t stable = grid.size(), best = 0;
    double best_loss = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < grid.size(); ++i) {
      double sum = 0;
      bool all_train = true;
      for (const json* r : schemes) {
        const json& rate = (*r)["learning_rates"][i];
        all_train = all_train && sa::rate_trains(rate);
        const json& v = rate["capped_final_loss"]["value"];
        sum += v.is_number() ? v.get<double>() : std::numeric_limits<double>::infinity();
      }
      if (all_train) stable = i;
      if (sum < best_loss) best_loss = sum, best = i;
    }
    if (stable == grid.size()) stable = best;
    const std::size_t unstable = grid.size() - 1;
    plots::Figure f{name + "-logits-dk" + number(d_k),
                    title + ", d_k = " + number(d_k) + ": largest logit and entropy vs step",
                    {}};
    for (const bool logit : {true, false})
      for (const std::size_t i : {stable, unstable}) {
        plots::Panel panel{.title = "learning rate " + grid[i]["learning_rate"].dump() +
                                    (i == unstable ? " (largest)" : " (stable)"),
                           .xlabel = "training step",
                           .ylabel = logit ? "largest attention logit (max over blocks)"
                                           : "attention entropy, nats (min over blocks)",
                           .logx = false,
                           .logy = logit};
        for (const json* r : schemes)
          panel.series.push_back(
              {.title = label((*r)["params"]["scale"]),
               .rows = curve_rows(
                   *r, (*r)["learning_rates"][i], logit ? "max_logit" : "entropy",
                   logit ? [](double a, double b) { return std::max(a, b); }
                         : [](double a, double b) { return std::min(a, b); },
                   logit)});
        f.panels.push_back(std::move(panel));
      }
    out.push_back(std::move(f));
  }
  return out;
}

// The stability figures of one experiment, per group of records.
std::vector<plots::Figure> stability_experiment_figures(const json& experiment,
                                                        const std::string& name,
                                                        const std::string& title) {
  std::string fixed;
  const auto groups = group_records(experiment["records"], "d_k", "scale", fixed);
  std::vector<plots::Figure> out;
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (auto& f : stability_figures(name + plots::group_suffix(g, groups.size()),
                                     title + plots::group_label(groups[g]), groups[g].records))
      out.push_back(std::move(f));
  return out;
}

}  // namespace

KindReport stability_report() {
  return {.name = "stability", .tables = stability_tables, .figures = stability_experiment_figures};
}

}  // namespace sdpa::report
