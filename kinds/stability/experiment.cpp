// Experiment `stability`: learning-rate sensitivity of the scale schemes (issue 19). A cell is one
// scale scheme and model (d_k, sizes); it trains the two-block model of stability_model.hpp at
// every learning rate of the grid `learning_rates` from `seeds` seeds (stability_run.hpp) and
// records, per rate: the final loss and accuracy, which runs diverged and when, which trained
// (reached target_accuracy), and the mean curves of the loss, the largest attention logit, the
// attention entropy and the gradient and update norms of W_Q and W_K per block; and over the grid
// the learning-rate sensitivity of Wortsman et al. 2023 with its interval across seeds.
//
// Common random numbers: seed t of every cell of an experiment uses the same streams (the cell
// is not part of the key), so schemes, learning rates and d_k are compared on the same batches
// and held-out set and, where shapes agree, from the same initial weights (initial_parameters
// draws the same under every scheme). Within a cell the seeds stay independent, so the cell's
// intervals are valid; across cells the comparisons are paired.
#include <algorithm>
#include <cmath>
#include <limits>

#include "checks.hpp"
#include "kinds.hpp"
#include "sdpa/sensitivity.hpp"
#include "stability_run.hpp"
#include "trials.hpp"

namespace sdpa {
namespace {

using stability::RunResult;
using stability::RunSpec;

struct StabilityCell {
  RunSpec base;  // every field but the learning rate and the key
  std::vector<double> learning_rates;
  std::int64_t seeds;
  double target_accuracy;

  explicit StabilityCell(const json& p)
      : learning_rates(p["learning_rates"].get<std::vector<double>>()),
        seeds(p["seeds"]),
        target_accuracy(p["target_accuracy"]) {
    base.scheme = *stability::parse_scheme(p["scale"].get<std::string>());
    base.softcap = config_fp32(p["softcap"]);
    base.sink = p["sink"] == "learned";
    base.shape.base = {.d_model = p["d_model"],
                       .d_k = p["d_k"],
                       .heads = p["heads"],
                       .vocab = p["vocab"],
                       .n_pairs = p["n_pairs"]};
    base.shape.layers = p["layers"];
    base.shape.d_ff = p["d_ff"];
    base.kernel = p["kernel"];
    base.init = p["init"];
    base.weight_decay = p["weight_decay"];
    base.warmup_steps = p["warmup_steps"];
    base.cosine_decay = p["cosine_decay"];
    base.batch = p["batch"];
    base.steps = p["steps"];
    base.log_every = p["log_every"];
    base.eval_size = p["eval_size"];
  }

  // Rate-major: run (rate r, seed t) at r * seeds + t.
  std::vector<RunSpec> runs(const CellContext& ctx) const {
    std::vector<RunSpec> out;
    for (const double rate : learning_rates)
      for (std::int64_t t = 0; t < seeds; ++t) {
        RunSpec run = base;
        run.learning_rate = rate;
        run.key = {.seed = ctx.seed, .experiment = ctx.experiment, .trial = std::uint32_t(t)};
        out.push_back(run);
      }
    return out;
  }
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

json optional_step(const std::optional<std::int64_t>& step) {
  return step ? json(*step) : json(nullptr);
}

// k of n runs, with its Wilson interval (a share stays inside [0, 1]).
json proportion(std::int64_t k, std::int64_t n) {
  const auto ci = stats::wilson_interval(k, n);
  return {{"count", k},
          {"runs", n},
          {"value", n ? double(k) / double(n) : kNaN},
          {"ci95", {ci.low, ci.high}},
          {"interval", "wilson"}};
}

// A series' mean over the runs that logged step i (a run that stopped logs fewer steps).
json mean_curve(std::span<const RunResult> runs, std::size_t steps,
                const std::function<const std::vector<double>&(const RunResult&)>& series) {
  json out = json::array();
  for (std::size_t i = 0; i < steps; ++i) {
    std::vector<double> x;
    for (const auto& r : runs)
      if (i < r.step.size()) x.push_back(series(r)[i]);
    out.push_back(x.empty() ? kNaN : stats::mean(x));
  }
  return out;
}

// The records of one learning rate's seeds.
json rate_record(double rate, std::span<const RunResult> runs, const StabilityCell& c,
                 std::size_t steps) {
  std::vector<double> final_loss, capped, accuracy;
  json diverged_at = json::array(), nonfinite_at = json::array();
  std::int64_t diverged = 0, trained = 0;
  for (const auto& r : runs) {
    final_loss.push_back(r.final_loss);
    // Wortsman et al.'s min(l, l0), a run that blew up counting as l0.
    capped.push_back(std::isfinite(r.final_loss) ? std::min(r.final_loss, r.initial_loss)
                                                 : r.initial_loss);
    accuracy.push_back(r.final_accuracy);
    diverged += r.diverged ? 1 : 0;
    trained += r.final_accuracy >= c.target_accuracy ? 1 : 0;  // NaN never trained
    diverged_at.push_back(optional_step(r.diverged_at));
    nonfinite_at.push_back(optional_step(r.nonfinite_at));
  }
  json reached = json::array();
  for (std::size_t i = 0; i < steps; ++i)
    reached.push_back(std::count_if(runs.begin(), runs.end(),
                                    [&](const RunResult& r) { return i < r.step.size(); }));
  json layers = json::array();
  for (std::size_t l = 0; l < runs.front().layer.size(); ++l) {
    using Series = std::vector<double> stability::LayerSeries::*;
    json layer;
    for (const auto& [name, field] :
         {std::pair<const char*, Series>{"max_logit", &stability::LayerSeries::max_logit},
          {"entropy", &stability::LayerSeries::entropy},
          {"grad_norm_w_q", &stability::LayerSeries::grad_norm_w_q},
          {"grad_norm_w_k", &stability::LayerSeries::grad_norm_w_k},
          {"update_norm_w_q", &stability::LayerSeries::update_norm_w_q},
          {"update_norm_w_k", &stability::LayerSeries::update_norm_w_k}})
      layer[name] = mean_curve(
          runs, steps,
          [&, f = field ](const RunResult& r) -> const auto& { return r.layer[l].*f; });
    if (!runs.front().layer[l].sink.empty())
      layer["sink"] = mean_curve(
          runs, steps, [&](const RunResult& r) -> const auto& { return r.layer[l].sink; });
    layers.push_back(layer);
  }
  json final_per_seed = final_loss;  // NaN is written as null
  return {{"learning_rate", rate},
          {"final_loss", summary(final_loss)},
          {"final_loss_per_seed", final_per_seed},
          {"capped_final_loss", summary(capped)},
          {"final_accuracy", bounded_summary(accuracy)},
          {"diverged", proportion(diverged, std::int64_t(runs.size()))},
          {"diverged_at", diverged_at},
          {"nonfinite_at", nonfinite_at},
          {"trained", proportion(trained, std::int64_t(runs.size()))},
          {"curves",
           {{"reached", reached},
            {"loss", mean_curve(
                         runs, steps, [](const RunResult& r) -> const auto& { return r.loss; })},
            {"accuracy",
             mean_curve(
                 runs, steps, [](const RunResult& r) -> const auto& { return r.accuracy; })},
            {"layers", layers}}}};
}

json run_stability_cell(const CellContext& ctx) {
  const StabilityCell c(ctx.cell.params);
  const auto specs = c.runs(ctx);
  const auto results = stability::train_runs(specs, ctx.threads);
  const auto seeds = std::size_t(c.seeds);
  const std::size_t steps = c.base.logged_steps().size();

  // A seed's runs share their initial weights and held-out set, hence l0.
  std::vector<double> initial(seeds);
  std::vector<std::vector<double>> final_losses(seeds);
  for (std::size_t t = 0; t < seeds; ++t) {
    initial[t] = results[t].initial_loss;
    for (std::size_t r = 0; r < c.learning_rates.size(); ++r)
      final_losses[t].push_back(results[r * seeds + t].final_loss);
  }
  const auto sensitivity = stats::lr_sensitivity_across_seeds(final_losses, initial);

  json rates = json::array();
  for (std::size_t r = 0; r < c.learning_rates.size(); ++r)
    rates.push_back(
        rate_record(c.learning_rates[r], std::span(results).subspan(r * seeds, seeds), c, steps));
  const auto& shape = c.base.shape;
  json record;
  record["scale_value"] =
      stability::scheme_scale(c.base.scheme, double(shape.base.d_k), double(shape.positions()));
  record["n_keys"] = shape.positions();
  record["step"] = c.base.logged_steps();
  json sens = measured(sensitivity.mean, sensitivity.ci, std::nullopt, "");
  sens["per_seed"] = sensitivity.per_seed;
  record["sensitivity"] = sens;
  json l0 = summary(initial);
  l0["per_seed"] = initial;
  record["initial_loss"] = l0;
  record["learning_rates"] = rates;
  return record;
}

std::vector<std::string> check_stability(const json& p) {
  auto problems = recall_training_problems(p);
  if (p["warmup_steps"] >= p["steps"])
    problems.push_back("/warmup_steps: expected fewer than steps (" + p["steps"].dump() +
                       "), found " + p["warmup_steps"].dump());
  const auto rates = p["learning_rates"].get<std::vector<double>>();
  for (std::size_t i = 1; i < rates.size(); ++i)
    if (rates[i] <= rates[i - 1])
      problems.push_back(
          "/learning_rates/" + std::to_string(i) + ": expected increasing learning rates, found " +
          p["learning_rates"][i].dump() + " after " + p["learning_rates"][i - 1].dump());
  return problems;
}

// A soft-cap neither 0 nor positive and finite, or a kernel that refuses the cell's soft-cap or
// learned sink (Kernel::refusal).
std::string stability_cell_problem(const json& params, const json& cell) {
  const ScoreModifiers mods(cell);  // the soft-cap; a learned sink is no number
  if (std::string p = modifier_problem(params, cell, mods); !p.empty()) return p;
  const std::int64_t heads = cell["heads"], n = std::int64_t(cell["n_pairs"]) + 1;
  const std::vector<float> sinks(cell["sink"] == "learned" ? std::size_t(heads) : 0, 0.0f);
  return kernel_refusal_problem(params, cell, {heads, n, n, cell["d_k"], cell["d_k"]},
                                Mask{.causal = true}, {.softcap = mods.softcap, .sinks = sinks});
}

}  // namespace

ExperimentKind stability_experiment() {
  return {
      .name = "stability",
      .description =
          "a two-block Transformer trained over a grid of learning rates per scale scheme "
          "(none, sqrt_dk, dk, log_n, qk_norm), soft-cap and sink: learning-rate sensitivity, "
          "divergence, logit growth",
      .axes = {"kernel", "init", "d_model", "heads", "layers", "d_ff", "vocab", "n_pairs", "batch",
               "weight_decay", "d_k", "softcap", "sink", "scale"},
      .run_cell = run_stability_cell,
      .memory_bytes =
          [](const json& p, int threads) {
            const double d_model = p["d_model"], width = double(p["heads"]) * double(p["d_k"]);
            const double vocab = p["vocab"], d_ff = p["d_ff"], layers = p["layers"];
            const double rows =
                std::max(double(p["eval_size"]), double(p["batch"])) * (double(p["n_pairs"]) + 1);
            // Per run: parameters, gradient, two moments and a copy; per block the activations
            // the backward keeps (inputs, norms, Q, K, V, kernel copies, the MLP's hidden layer).
            // Runs (rates x seeds) go in parallel; each keeps its logged series until the end.
            const double params =
                3 * vocab * d_model + layers * (4 * d_model * width + 2 * d_model * d_ff);
            const double run =
                8.0 * 5 * params + 8.0 * layers * rows * (4 * d_model + 6 * width + 2 * d_ff);
            const double logged = double(p["steps"]) / double(p["log_every"]) + 2;
            const double kept = 8.0 * logged * (3 + 6 * layers);
            const auto runs = std::int64_t(p["learning_rates"].size()) * std::int64_t(p["seeds"]);
            return trials_memory(run, kept, runs, threads);
          },
      .check = check_stability,
      .cell_check = stability_cell_problem,
  };
}

}  // namespace sdpa
