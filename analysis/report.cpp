#include "sdpa/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "grouping.hpp"
#include "result_schema_text.hpp"
#include "sdpa/input_error.hpp"
#include "sdpa/input_file.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/stability_analysis.hpp"
#include "training_verdict.hpp"

namespace sdpa::report {
namespace {

constexpr int kSchemaVersion = 1;

// A number of a record; null is how a result file stores a non-finite one.
std::string json_number(const json& x) {
  return number(x.is_null() ? std::numeric_limits<double>::quiet_NaN() : x.get<double>());
}

std::string interval(const json& ci) {
  return "[" + json_number(ci[0]) + ", " + json_number(ci[1]) + "]";
}

std::string agreement(const json& m) {
  if (!m.contains("agrees")) return "-";
  return m["agrees"].get<bool>() ? "yes" : "**no**";
}

std::string predicted(const json& m) {
  return m["predicted"].is_null() ? "-" : json_number(m["predicted"]);
}

// A column of a side-by-side table: its heading and how a record fills it.
struct Column {
  std::string heading;
  std::function<std::string(const json& record)> cell;
};

std::string statistic_with_ci(const json& m) {
  return json_number(m["value"]) + " " + interval(m["ci95"]);
}

// "<kind>: <name>[ [machine]][ (<the group's parameters>)]"
std::string table_title(const json& experiment, const std::string& source,
                        const std::string& group) {
  return experiment["kind"].get<std::string>() + ": " + experiment["name"].get<std::string>() +
         source + (group.empty() ? "" : " (" + group + ")");
}

// One table per group of records, one row per value of `row_key`, and for each value of
// `column_key` (a scale scheme) the same columns side by side.
// `tested` names the statistic whose `agrees` the table reports; the note then says how many
// predictions disagree beside how many would by chance alone.
std::vector<Table> side_by_side(const json& experiment, const std::string& source,
                                const std::string& row_key, const std::string& column_key,
                                const std::vector<Column>& columns, const std::string& note,
                                const std::string& tested) {
  std::vector<Table> out;
  if (experiment["records"].empty()) return out;
  std::string fixed;
  for (const auto& [group, records] :
       group_records(experiment["records"], row_key, column_key, fixed)) {
    std::vector<std::string> keys;
    for (const json* r : records) {
      const std::string s = label(param(*r, column_key));
      if (std::find(keys.begin(), keys.end(), s) == keys.end()) keys.push_back(s);
    }
    Table t;
    t.title = table_title(experiment, source, group);
    t.header = {row_key};
    for (const auto& k : keys)
      for (const auto& c : columns) t.header.push_back(k + ": " + c.heading);
    std::map<double, std::vector<std::string>> rows;  // ordered by the row parameter
    for (const json* r : records) {
      const double x = param(*r, row_key).get<double>();
      auto& row = rows[x];
      if (row.empty()) row.assign(1 + columns.size() * keys.size(), "-"), row[0] = number(x);
      const std::size_t k =
          std::find(keys.begin(), keys.end(), label(param(*r, column_key))) - keys.begin();
      for (std::size_t c = 0; c < columns.size(); ++c)
        row[1 + k * columns.size() + c] = columns[c].cell(*r);
    }
    for (auto& [x, row] : rows) t.rows.push_back(row);
    std::size_t predictions = 0, disagreements = 0;
    for (const json* r : records)
      if ((*r)[tested].contains("agrees")) {
        ++predictions;
        disagreements += (*r)[tested]["agrees"].get<bool>() ? 0 : 1;
      }
    t.note = "Fixed: " + fixed + ". " + note;
    if (predictions > 0)
      t.note += " Here " + std::to_string(disagreements) + " of " + std::to_string(predictions) +
                " predictions disagree; about " + number(double(predictions) / 20) +
                " would by chance alone.";
    out.push_back(std::move(t));
  }
  return out;
}

const char* kAgreesNote =
    "agrees = predicted inside the 95 % CI (about one cell in twenty disagrees by chance).";

// Score variance: one row per d_k, each scale scheme side by side.
std::vector<Table> variance_tables(const json& experiment, const std::string& source) {
  const std::vector<Column> columns = {
      {"Var(s) [95% CI]", [](const json& r) { return statistic_with_ci(r["score_variance"]); }},
      {"predicted", [](const json& r) { return predicted(r["score_variance"]); }},
      {"agrees", [](const json& r) { return agreement(r["score_variance"]); }},
  };
  return side_by_side(experiment, source, "d_k", "scale", columns,
                      std::string("Var(s): variance of all entries of all trials (np.var of the "
                                  "stacked products); predicted = E of that statistic. ") +
                          kAgreesNote,
                      "score_variance");
}

// Softmax saturation: entropy beside ln N - sigma^2/2, max weight and overflow, per d_k.
std::vector<Table> entropy_tables(const json& experiment, const std::string& source) {
  const std::vector<Column> columns = {
      {"H [95% CI]", [](const json& r) { return statistic_with_ci(r["entropy"]); }},
      {"ln N - s2/2",
       [](const json& r) {
         // Outside the regime where the formula holds it is shown in parentheses.
         const std::string f = number(r["entropy"]["formula"]);
         return r["entropy"]["predicted"].is_number() ? f : "(" + f + ")";
       }},
      {"agrees", [](const json& r) { return agreement(r["entropy"]); }},
      {"max w", [](const json& r) { return json_number(r["max_weight"]["value"]); }},
      {"rows max w>0.9", [](const json& r) { return json_number(r["rows_max_weight_over_0_9"]); }},
      {"overflow fp32/fp16",
       [](const json& r) {
         return json_number(r["overflow"]["unstable_fp32_rows"]) + " / " +
                json_number(r["overflow"]["unstable_fp16_rows"]);
       }},
  };
  return side_by_side(experiment, source, "d_k", "scale", columns,
                      std::string("H: mean softmax entropy per query row (nats). The prediction "
                                  "ln N - s2/2 holds asymptotically while s2 < 2 ln N; in "
                                  "parentheses where it does not. overflow: fraction of rows "
                                  "whose exp(s) sum overflows without max subtraction. ") +
                          kAgreesNote,
                      "entropy");
}

// Gradients through softmax: the Jacobian's norm beside its bulk asymptote, and participation.
std::vector<Table> gradient_tables(const json& experiment, const std::string& source) {
  const std::vector<Column> columns = {
      {"||J||_F^2 [95% CI]", [](const json& r) { return statistic_with_ci(r["jacobian_fro2"]); }},
      {"bulk theory", [](const json& r) { return predicted(r["jacobian_fro2"]); }},
      {"agrees", [](const json& r) { return agreement(r["jacobian_fro2"]); }},
      {"from dS agrees",
       [](const json& r) { return agreement(r["jacobian_fro2_from_gradients"]); }},
      {"participation", [](const json& r) { return number(r["participation"]["value"]); }},
      {"||c dS||", [](const json& r) { return number(r["score_gradient_norm"]["value"]); }},
      {"dQ rms", [](const json& r) { return number(r["d_q_rms"]["value"]); }},
  };
  return side_by_side(
      experiment, source, "d_k", "scale", columns,
      std::string("||J||_F^2: mean squared Frobenius norm of the softmax Jacobian per row, from "
                  "the identity sum p^2 - 2 sum p^3 + (sum p^2)^2; bulk theory: its asymptote "
                  "e^s2/N - 2 e^3s2/N^2 + e^2s2/N^2 (given while s2 < ln N / 2); 'from dS agrees': "
                  "the same norm read off the "
                  "backward's gradients agrees with the identity. participation: share of keys "
                  "whose |dS_j| exceeds 1e-3 of the row's largest. ||c dS||: gradient norm at "
                  "the raw scores per row. ") +
          kAgreesNote,
      "jacobian_fro2");
}

// ---- training: does scaling make training faster?

std::string steps_to_target(const json& r) {
  const json& t = r["steps_to_target"];
  return (t["median"].is_null() ? "-" : json_number(t["median"])) + " (" + t["reached"].dump() +
         "/" + t["seeds"].dump() + ")";
}

std::string init_to_end(const json& r, const std::string& statistic) {
  return json_number(r[statistic + "_init"]["value"]) + " → " +
         json_number(r[statistic + "_final"]["value"]);
}

// A logged curve's first and last mean.
std::string curve_ends(const json& r, const std::string& curve) {
  const json& mean = r["curves"][curve]["mean"];
  return json_number(mean.front()) + " → " + json_number(mean.back());
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
      row.push_back(json_number(loss["mean"][i]) + " " + interval(loss["ci95"][i]));
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
         // The record's Student-t interval can pass 1; accuracy is bounded (issue 19).
         const json& acc = r["final_accuracy"]["value"];
         if (acc.is_null()) return json_number(acc);
         const auto ci = stats::wilson_interval_of_mean(
             acc.get<double>(), r["steps_to_target"]["seeds"].get<std::int64_t>());
         return json_number(acc) + " " + interval(json{ci.low, ci.high});
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

// Roofline: the ceilings timings are read against, one row per (threads, ISA).
std::vector<Table> roofline_tables(const json& experiment, const std::string& source) {
  Table t;
  t.title = "roofline: " + experiment["name"].get<std::string>() + source;
  t.header = {"isa",    "threads",    "lanes",  "FMA GFLOP/s",
              "median", "triad GB/s", "median", "ridge FLOP/byte"};
  for (const auto& r : experiment["records"]) {
    std::vector<std::string> row = {label(r["params"]["isa"]),
                                    std::to_string(r["threads"].get<int>())};
    if (!r["supported"].get<bool>()) {
      row.insert(row.end(), {"-", "not supported", "-", "-", "-", "-"});
    } else {
      row.insert(row.end(),
                 {std::to_string(r["lanes"].get<int>()), number(r["fma_gflops"]["value"]),
                  number(r["fma_gflops"]["median"]), number(r["triad_gbs"]["value"]),
                  number(r["triad_gbs"]["median"]), number(r["ridge_flops_per_byte"])});
    }
    t.rows.push_back(std::move(row));
  }
  const std::string footprint = number(experiment["params"]["llc_multiple"]);
  t.note =
      "Peak: the best repetition (every disturbance only slows a loop down); median beside "
      "it. FMA: 12 independent multiply-add chains per lane (scalar and sse4 issue a "
      "multiply and an add). Triad: x = y + s z over three arrays of " +
      footprint +
      "x the last-level cache together. Ridge: FLOP per byte at which a kernel stops being "
      "memory-bound.";
  return {std::move(t)};
}

// Timing: one row per cell, in grid order.
std::vector<Table> timing_tables(const json& experiment, const std::string& source) {
  Table t;
  t.title = "timing: " + experiment["name"].get<std::string>() + source;
  t.header = {"kernel", "shape",   "threads",   "direction", "median",
              "95% CI", "GFLOP/s", "% of peak", "CV",        "noisy"};
  for (const auto& r : experiment["records"]) {
    const json& p = r["params"];
    std::vector<std::string> row = {p["kernel"], timing_shape(p),
                                    std::to_string(r["threads"].get<int>()), p["direction"]};
    if (!r.contains("time_s")) {
      row.insert(row.end(), {"not run", "-", "-", "-", "-", "-"});
    } else {
      const json& time = r["time_s"];
      row.insert(row.end(),
                 {duration(time["value"]),
                  "[" + duration(time["ci95"][0]) + ", " + duration(time["ci95"][1]) + "]",
                  number(r["gflops"]["value"]),
                  r["percent_of_peak"].is_null() ? "-" : number(r["percent_of_peak"]),
                  time["cv"].is_null() ? "-" : number(100 * time["cv"].get<double>()) + " %",
                  r["noisy"].get<bool>() ? "**noisy**" : "-"});
    }
    t.rows.push_back(std::move(row));
  }
  t.note =
      "Shape: batch·heads × n_q × n_kv, d_k/d_v. Median of the repetitions (each the mean "
      "time per call over its iterations), its interval from order statistics (distribution "
      "free; [min, max] below 6 repetitions, which covers less than 95 %). % of peak: of "
      "this machine's measured multiply-add peak for the kernel's ISA and thread count "
      "(machine.peak); a scalar kernel can pass 100 % where the compiler vectorises its "
      "loops with the baseline SSE2. Noisy: CV (stddev / mean of the repetitions) above 5 %.";
  return {std::move(t)};
}

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
    std::vector<std::string> row = {json_number(grid[i]["learning_rate"])};
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

using TableMaker = std::vector<Table> (*)(const json& experiment, const std::string& source);

const std::map<std::string, TableMaker>& makers() {
  static const std::map<std::string, TableMaker> m = {
      {"variance", variance_tables}, {"entropy", entropy_tables},     {"gradient", gradient_tables},
      {"training", training_tables}, {"stability", stability_tables}, {"roofline", roofline_tables},
      {"timing", timing_tables}};
  return m;
}

// The tables of one experiment; none for a kind without a table.
std::vector<Table> experiment_tables(const json& experiment, const std::string& source) {
  const auto it = makers().find(experiment["kind"].get<std::string>());
  return it == makers().end() ? std::vector<Table>{} : it->second(experiment, source);
}

}  // namespace

std::string number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  // Whole numbers (sizes, counts) print in full; everything else with 4 significant digits.
  if (x == std::floor(x) && std::abs(x) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", x);
  else
    std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

std::string duration(double seconds) {
  const double a = std::abs(seconds);
  if (a < 1e-6) return number(seconds * 1e9) + " ns";
  if (a < 1e-3) return number(seconds * 1e6) + " µs";
  if (a < 1) return number(seconds * 1e3) + " ms";
  return number(seconds) + " s";
}

std::string timing_shape(const json& p) {
  std::string s = p["batch_heads"].dump() + "×" + p["n_q"].dump() + "×" + p["n_kv"].dump() +
                  ", d " + p["d_k"].dump() + "/" + p["d_v"].dump();
  return p["causal"].get<bool>() ? s + ", causal" : s;
}

json parse_result_file(const std::string& path, const std::string& text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(
        path + ": not a complete JSON document (truncated or corrupt): " + json_error_message(e));
  }
  if (!doc.is_object() || !doc.contains("schema_version") || !doc.contains("experiments"))
    throw InputError(path + ": not an sdpa-bench result file (no schema_version/experiments)");
  if (doc["schema_version"] != kSchemaVersion)
    throw InputError(path + ": /schema_version: expected " + std::to_string(kSchemaVersion) +
                     ", found " + doc["schema_version"].dump() +
                     " (written by another version of sdpa-bench)");
  static const JsonSchema schema(kResultSchemaText);
  auto problems = schema.problems(doc);
  if (!problems.empty()) {
    for (auto& p : problems) p = path + ": " + p;
    throw InputError::from_lines(problems);
  }
  // The schema is the contract the tables rely on; should a file it admits still not make
  // tables, say which experiment rather than fail later.
  const json& experiments = doc["experiments"];
  for (std::size_t i = 0; i < experiments.size(); ++i) {
    try {
      experiment_tables(experiments[i], "");
    } catch (const json::exception& e) {
      throw InputError(path + ": /experiments/" + std::to_string(i) +
                       ": cannot be tabulated: " + json_error_message(e));
    }
  }
  return doc;
}

json read_result_file(const std::string& path) {
  return parse_result_file(path, read_input_file(path, "result file"));
}

std::vector<Table> tables(const std::vector<json>& results) {
  std::vector<Table> out;
  // Titles carry the machine only when the files come from several machines.
  std::vector<std::string> machines;
  for (const auto& result : results) {
    const std::string id = result.value("machine_id", std::string("?"));
    if (std::find(machines.begin(), machines.end(), id) == machines.end()) machines.push_back(id);
  }
  for (const auto& result : results) {
    const std::string source =
        machines.size() > 1 ? " [" + result.value("machine_id", std::string("?")) + "]" : "";
    for (const auto& e : result["experiments"])
      for (auto& t : experiment_tables(e, source)) out.push_back(std::move(t));
  }
  return out;
}

std::string markdown(const std::vector<Table>& tables) {
  std::ostringstream out;
  for (const auto& t : tables) {
    out << "### " << t.title << "\n\n|";
    for (const auto& h : t.header) out << " " << h << " |";
    out << "\n|";
    for (std::size_t i = 0; i < t.header.size(); ++i) out << (i == 0 ? "---|" : "---:|");
    out << "\n";
    for (const auto& row : t.rows) {
      out << "|";
      for (const auto& cell : row) out << " " << cell << " |";
      out << "\n";
    }
    if (!t.note.empty()) out << "\n" << t.note << "\n";
    out << "\n";
  }
  return out.str();
}

namespace {

std::string csv_number(double x) {
  char buf[40];
  if (x == std::floor(x) && std::abs(x) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", x);
  else
    std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

void flatten(const json& v, const std::string& key,
             std::vector<std::pair<std::string, std::string>>& out) {
  const auto field = [&](const std::string& name) { return key.empty() ? name : key + "." + name; };
  if (v.is_object()) {
    for (auto& [k, x] : v.items()) flatten(x, field(k), out);
  } else if (v.is_array() && v.size() == 2 && key.size() >= 4 &&
             key.substr(key.size() - 4) == "ci95") {
    flatten(v[0], key + "_low", out);
    flatten(v[1], key + "_high", out);
  } else if (v.is_number()) {
    out.emplace_back(key, csv_number(v.get<double>()));
  } else if (v.is_string()) {
    out.emplace_back(key, v.get<std::string>());
  } else if (v.is_null()) {
    out.emplace_back(key, "");
  } else {
    out.emplace_back(key, v.dump());  // booleans, and lists such as every repetition's time
  }
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

std::vector<CsvFile> csv_files(const std::vector<ResultFile>& results) {
  struct Sheet {
    std::vector<std::string> columns;
    std::vector<std::map<std::string, std::string>> rows;
  };
  std::vector<std::pair<std::string, Sheet>> sheets;  // in order of first appearance
  for (const auto& file : results) {
    for (const auto& e : file.doc["experiments"]) {
      const std::string name = e["name"].get<std::string>() + ".csv";
      auto it =
          std::find_if(sheets.begin(), sheets.end(), [&](auto& s) { return s.first == name; });
      if (it == sheets.end()) it = sheets.insert(sheets.end(), {name, Sheet{}});
      Sheet& sheet = it->second;
      for (const auto& r : e["records"]) {
        std::vector<std::pair<std::string, std::string>> fields;
        if (results.size() > 1) {
          fields.emplace_back("machine_id", file.doc.value("machine_id", std::string()));
          fields.emplace_back("file", file.path);
        }
        flatten(r, "", fields);
        std::map<std::string, std::string> row;
        for (auto& [k, v] : fields) {
          if (std::find(sheet.columns.begin(), sheet.columns.end(), k) == sheet.columns.end())
            sheet.columns.push_back(k);
          row[k] = v;
        }
        sheet.rows.push_back(std::move(row));
      }
    }
  }
  std::vector<CsvFile> out;
  for (const auto& [name, sheet] : sheets) {
    std::ostringstream text;
    for (std::size_t c = 0; c < sheet.columns.size(); ++c)
      text << (c ? "," : "") << csv_field(sheet.columns[c]);
    text << "\n";
    for (const auto& row : sheet.rows) {
      for (std::size_t c = 0; c < sheet.columns.size(); ++c) {
        auto it = row.find(sheet.columns[c]);
        text << (c ? "," : "") << (it == row.end() ? "" : csv_field(it->second));
      }
      text << "\n";
    }
    out.push_back({name, text.str()});
  }
  return out;
}

std::string index_markdown(const std::vector<ResultFile>& results,
                           const std::vector<std::string>& plot_names,
                           const std::vector<CsvFile>& csvs) {
  std::ostringstream out;
  std::vector<json> docs;
  out << "# sdpa-bench results\n\nGenerated by `sdpa-bench report` from these result files "
         "alone; regenerate with the command in README.md (a test checks these tables match "
         "the files byte for byte).\n\n| file | machine | config sha256 | seed | started |\n"
         "|---|---|---|---|---|\n";
  for (const auto& r : results) {
    out << "| `" << r.path << "` | " << r.doc.value("machine_id", std::string("?")) << " | "
        << r.doc["config"]["sha256"].get<std::string>().substr(0, 12) << " | "
        << r.doc["seed"].dump() << " | " << r.doc["started_at"].get<std::string>() << " |\n";
    docs.push_back(r.doc);
  }
  out << "\n" << markdown(tables(docs));
  if (!plot_names.empty()) {
    out << "## Plots\n\n";
    for (const auto& p : plot_names) out << "![" << p << "](plots/" << p << ".svg)\n\n";
  }
  if (!csvs.empty()) {
    out << "## CSV (one row per record)\n\n";
    for (const auto& c : csvs) out << "- [" << c.name << "](csv/" << c.name << ")\n";
  }
  return out.str();
}

}  // namespace sdpa::report
