// Experiment `training`: does scaling make training faster? Trains the one-layer attention model
// of training_model.hpp on associative recall from several seeds per cell and records, across
// seeds: loss, accuracy and the gradient norms of W_Q and W_K every log_every steps on a fixed
// held-out set; the steps each seed needs to reach a target accuracy; attention entropy and
// max weight (kernel probes) at initialisation and at the end; and steps whose loss or gradient
// was not finite. The report compares the scale schemes from these records.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "checks.hpp"
#include "kinds.hpp"
#include "scale.hpp"
#include "sdpa/stats.hpp"
#include "sdpa/theory.hpp"
#include "training_model.hpp"
#include "trials.hpp"

namespace sdpa {
namespace {

struct TrainingCell {
  std::string kernel, init;
  training::ModelShape shape;
  training::OptimizerSpec optimizer;
  std::int64_t batch, steps, log_every, seeds, eval_size;
  double target_accuracy, scale;

  explicit TrainingCell(const json& p)
      : kernel(p["kernel"]),
        init(p["init"]),
        shape{.d_model = p["d_model"],
              .d_k = p["d_k"],
              .heads = p["heads"],
              .vocab = p["vocab"],
              .n_pairs = p["n_pairs"],
              .learned_embeddings = p["embeddings"] == "learned"},
        optimizer{
            .kind = p["optimizer"], .learning_rate = p["learning_rate"], .momentum = p["momentum"]},
        batch(p["batch"]),
        steps(p["steps"]),
        log_every(p["log_every"]),
        seeds(p["seeds"]),
        eval_size(p["eval_size"]),
        target_accuracy(p["target_accuracy"]),
        scale(scale_value(p["scale"], double(p["d_k"]), double(shape.positions()))) {}

  // 0, log_every, 2 log_every, ... and the last step.
  std::vector<std::int64_t> logged_steps() const {
    std::vector<std::int64_t> out;
    for (std::int64_t s = 0; s < steps; s += log_every) out.push_back(s);
    out.push_back(steps);
    return out;
  }
};

// One seed's training run, at each logged step where a vector.
struct SeedRun {
  std::vector<double> loss, accuracy, grad_norm_w_q, grad_norm_w_k;
  double entropy_init = 0, entropy_final = 0, max_weight_init = 0, max_weight_final = 0;
  std::optional<std::int64_t> steps_to_target;
  std::int64_t nonfinite_steps = 0;
};

// Appends one logged step to the run: the held-out evaluation's loss, accuracy and gradient
// norms of W_Q and W_K, and the attention statistics its kernel call left in `probes`.
void log_step(SeedRun& run, std::int64_t step, const TrainingCell& c, const training::Evaluation& e,
              const RowProbes& probes) {
  run.loss.push_back(e.loss);
  run.accuracy.push_back(e.accuracy);
  run.grad_norm_w_q.push_back(e.gradient[training::kWQ].norm());
  run.grad_norm_w_k.push_back(e.gradient[training::kWK].norm());
  if (!run.steps_to_target && e.accuracy >= c.target_accuracy) run.steps_to_target = step;
  const auto pooled = probes.pooled();
  if (step == 0)
    run.entropy_init = pooled.entropy_mean, run.max_weight_init = pooled.max_weight_mean;
  run.entropy_final = pooled.entropy_mean, run.max_weight_final = pooled.max_weight_mean;
}

SeedRun train_seed(const TrainingCell& c, const training::AttentionCore& core, StreamKey key) {
  training::RunStreams rng(key);
  auto params = training::initial_parameters(rng.init, c.shape, c.init);
  const auto held_out = training::sample_batch(rng.held_out, c.shape, c.eval_size);
  training::Optimizer optimizer(c.optimizer, c.shape, params);
  RowProbes probes(held_out.size * c.shape.heads);
  SeedRun run;
  for (std::int64_t step = 0;; ++step) {
    if (step % c.log_every == 0 || step == c.steps)
      log_step(run, step, c, training::evaluate(params, held_out, c.shape, core, &probes), probes);
    if (step == c.steps) break;
    const auto e = training::evaluate(params, training::sample_batch(rng.data, c.shape, c.batch),
                                      c.shape, core);
    bool finite = std::isfinite(e.loss);
    for (int t = training::first_trained(c.shape); t < training::kTensors; ++t)
      finite = finite && e.gradient.tensor[t].allFinite();
    // Skipped, as mixed-precision trainers skip steps with inf/NaN gradients: one bad batch
    // does not poison the weights, and the count measures how often it happens.
    if (!finite) {
      ++run.nonfinite_steps;
      continue;
    }
    optimizer.step(params, e.gradient);
  }
  return run;
}

std::vector<double> column_at(const std::vector<SeedRun>& runs,
                              std::vector<double> SeedRun::*series, std::size_t i) {
  std::vector<double> out;
  out.reserve(runs.size());
  for (const auto& r : runs) out.push_back((r.*series)[i]);
  return out;
}

// Mean and 95 % CI across seeds at each logged step.
json series(const std::vector<SeedRun>& runs, std::vector<double> SeedRun::*field) {
  json mean = json::array(), ci = json::array();
  for (std::size_t i = 0; i < (runs.front().*field).size(); ++i) {
    const auto x = column_at(runs, field, i);
    const auto interval = stats::mean_ci(x);
    mean.push_back(stats::mean(x));
    ci.push_back({interval.low, interval.high});
  }
  return {{"mean", mean}, {"ci95", ci}};
}

// The median of the seeds' steps, a seed that never reached the target counting as infinitely
// slow: null when half of the seeds or more did not reach it.
json median_steps(const std::vector<SeedRun>& runs) {
  std::vector<double> x;
  x.reserve(runs.size());
  for (const auto& r : runs)
    x.push_back(r.steps_to_target ? double(*r.steps_to_target)
                                  : std::numeric_limits<double>::infinity());
  std::sort(x.begin(), x.end());
  const std::size_t n = x.size();
  const double median = n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
  return std::isfinite(median) ? json(median) : json(nullptr);
}

json steps_to_target(const std::vector<SeedRun>& runs, const TrainingCell& c) {
  json per_seed = json::array();
  std::vector<double> censored;  // a seed that never reached it counts as `steps`
  std::int64_t reached = 0;
  for (const auto& r : runs) {
    per_seed.push_back(r.steps_to_target ? json(*r.steps_to_target) : json(nullptr));
    censored.push_back(double(r.steps_to_target.value_or(c.steps)));
    reached += r.steps_to_target ? 1 : 0;
  }
  return {{"target_accuracy", c.target_accuracy},
          {"per_seed", per_seed},
          {"reached", reached},
          {"seeds", c.seeds},
          {"median", median_steps(runs)},
          {"censored_mean", summary(censored)}};
}

json run_training_cell(const CellContext& ctx) {
  const TrainingCell c(ctx.cell.params);
  const training::AttentionCore core{find_kernel(c.kernel), float(c.scale)};
  // Each seed is one trial: its own streams for initialisation, data and held-out set.
  const auto runs = run_trials<SeedRun>(
      ctx, c.seeds, [&](const StreamKey& key) { return train_seed(c, core, key); });

  // Logits at initialisation (theory::score_variance): unit-variance inputs through W_Q, W_K.
  const double n_keys = double(c.shape.positions());
  const double sd = std::sqrt(
      theory::projected_variance(c.init, double(c.shape.d_model), double(c.shape.width())));
  const double sigma2 =
      theory::score_variance({double(c.shape.d_k), c.scale, 0, sd, 0, sd, 1, c.shape.positions()});

  json r;
  r["scale_value"] = c.scale;
  r["sigma2_init"] = sigma2;
  r["saturation_sigma2"] = 2 * std::log(n_keys);
  const std::size_t last = c.logged_steps().size() - 1;
  r["final_loss"] = summary(column_at(runs, &SeedRun::loss, last));
  r["final_accuracy"] = bounded_summary(column_at(runs, &SeedRun::accuracy, last));
  r["steps_to_target"] = steps_to_target(runs, c);
  r["entropy_init"] = summary(column(runs, &SeedRun::entropy_init));
  r["entropy_final"] = summary(column(runs, &SeedRun::entropy_final));
  r["max_weight_init"] = summary(column(runs, &SeedRun::max_weight_init));
  r["max_weight_final"] = summary(column(runs, &SeedRun::max_weight_final));
  std::int64_t nonfinite = 0;
  std::vector<double> hit;  // 1 for a seed with a non-finite step: its share has a CI
  for (const auto& run : runs)
    nonfinite += run.nonfinite_steps, hit.push_back(run.nonfinite_steps > 0 ? 1 : 0);
  r["nonfinite_steps"] = {{"total", nonfinite},
                          {"seeds", std::count(hit.begin(), hit.end(), 1.0)},
                          {"seed_fraction", bounded_summary(hit)}};
  r["curves"] = {{"step", c.logged_steps()},
                 {"loss", series(runs, &SeedRun::loss)},
                 {"accuracy", series(runs, &SeedRun::accuracy)},
                 {"grad_norm_w_q", series(runs, &SeedRun::grad_norm_w_q)},
                 {"grad_norm_w_k", series(runs, &SeedRun::grad_norm_w_k)}};
  return r;
}

std::vector<std::string> check_training(const json& p) { return recall_training_problems(p); }

}  // namespace

ExperimentKind training_experiment() {
  return {
      .name = "training",
      .description =
          "one attention layer trained on associative recall: speed and stability vs "
          "d_k and scale",
      .axes = {"kernel", "optimizer", "learning_rate", "init", "embeddings", "d_model", "heads",
               "vocab", "n_pairs", "batch", "d_k", "scale"},
      .run_cell = run_training_cell,
      .memory_bytes =
          [](const json& p, int threads) {
            const TrainingCell c(p);
            const double d_model = double(c.shape.d_model), width = double(c.shape.width());
            const double vocab = double(c.shape.vocab), n = double(c.shape.positions());
            const std::int64_t sequences = std::max(c.eval_size, c.batch);
            // Per seed: parameters, gradient and two optimiser moments; inputs, K, V, their
            // kernel copies and gradients for the larger of the two batches, and the
            // kernel's workspace on it (training_model.cpp's shape). Seeds run in parallel.
            const double params = 2 * vocab * d_model + 4 * d_model * width + d_model * vocab;
            const Shape core{sequences * c.shape.heads, 1, c.shape.positions(), c.shape.d_k,
                             c.shape.d_k};
            const double seed = 8.0 * 4 * params +
                                8.0 * 4 * double(sequences) * n * (d_model + 3 * width) +
                                std::max(kernel_workspace(p, core, Pass::forward, 1),
                                         kernel_workspace(p, core, Pass::backward, 1));
            return trials_memory(seed, 0, c.seeds, threads);
          },
      .check = check_training,
      .cell_check =
          [](const json& params, const json& cell) {
            return scale_range_problem(params, cell, TrainingCell(cell).scale);
          },
  };
}

}  // namespace sdpa
