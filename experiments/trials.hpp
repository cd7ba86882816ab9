// Shared by the experiment kinds: independent trials spread over threads, each with its own
// random stream, gathered in trial order (so statistics do not depend on the thread count),
// and the cell parameters every attention experiment has.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "inputs.hpp"
#include "scale.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/rng.hpp"
#include "sdpa/stats.hpp"

namespace sdpa {

// A config's number as fp32, +-inf beyond its range (the conversion itself would be undefined),
// so that the checks refuse it as not finite rather than the run computing with it.
inline float config_fp32(const json& x) {
  const double v = x.get<double>();
  return std::abs(v) > FLT_MAX ? std::copysign(INFINITY, v) : float(v);
}

// Runs trial(key) for trials 0..n-1 in parallel; result t comes from stream (cell, t).
template <typename Result, typename Trial>
std::vector<Result> run_trials(const CellContext& ctx, std::int64_t n, const Trial& trial) {
  std::vector<Result> results(n);
#pragma omp parallel for num_threads(ctx.threads) schedule(dynamic)
  for (std::int64_t t = 0; t < n; ++t)
    results[t] =
        trial(StreamKey{ctx.seed, ctx.experiment, std::uint32_t(ctx.cell.index), std::uint32_t(t)});
  return results;
}

// One field of every trial's result, in trial order.
template <typename Result>
std::vector<double> column(const std::vector<Result>& results, double Result::*field) {
  std::vector<double> out;
  out.reserve(results.size());
  for (const auto& r : results) out.push_back(r.*field);
  return out;
}

// Mean and 95 % CI across trials, for a statistic without a prediction: trials are
// independent, so the mean has a Student-t interval.
inline json summary(const std::vector<double>& x) {
  return measured(stats::mean(x), stats::mean_ci(x), std::nullopt, "");
}

// The mean of values in [0, 1] across trials (accuracies, shares), with the interval that stays
// inside [0, 1] (stats::wilson_interval_of_mean), where Student's t can pass 1; NaN (a run that
// stopped) makes the mean NaN.
inline json bounded_summary(const std::vector<double>& x) {
  const double m = stats::mean(x);
  json out =
      measured(m, stats::wilson_interval_of_mean(m, std::int64_t(x.size())), std::nullopt, "");
  out["interval"] = "wilson";
  return out;
}

// The memory of a cell of `trials` trials on `threads` threads: `per_trial` bytes for each trial
// running at once, and `result` bytes per trial kept until the cell's statistics are made.
inline double trials_memory(double per_trial, double result, std::int64_t trials, int threads) {
  return per_trial * double(std::min<std::int64_t>(threads, trials)) + result * double(trials);
}

// What a call of params["kernel"] allocates beyond its arguments (Kernel::workspace_bytes).
inline double kernel_workspace(const json& params, const Shape& shape, Pass pass, int threads) {
  return find_kernel(params["kernel"].get<std::string>())->workspace_bytes(shape, pass, threads);
}

// The parameters of a cell that runs attention over N = n_kv keys per query.
struct AttentionCell {
  std::string kernel;
  std::int64_t d_k, n_q, n_kv, trials;
  double scale;
  InputSpec inputs;

  // The axes of a kind whose cells are these, in plan order (entropy, precision).
  inline static const std::vector<std::string> kAxes = {
      "kernel", "inputs",    "init", "d_model", "mean_q", "std_q", "mean_k",
      "std_k",  "alignment", "n_q",  "trials",  "n_kv",   "d_k",   "scale"};

  explicit AttentionCell(const json& p)
      : kernel(p["kernel"]),
        d_k(p["d_k"]),
        n_q(p["n_q"]),
        n_kv(p["n_kv"]),
        trials(p["trials"]),
        scale(scale_value(p["scale"], double(p["d_k"]), double(p["n_kv"]))),
        inputs(InputSpec::from(p)) {}

  theory::ScoreModel model() const { return inputs.score_model(double(d_k), scale, n_q, n_kv); }

  // Bytes one trial of a forward-only kind holds: Q and K in fp32, W_Q and W_K of projected
  // inputs, its kernel's forward workspace (d_v = 1), and `own`, what the kind adds to them.
  double forward_trial_bytes(double own) const {
    return 4.0 * double(n_q + n_kv) * double(d_k) + inputs.weight_bytes(d_k) + own +
           find_kernel(kernel)->workspace_bytes({1, n_q, n_kv, d_k, 1}, Pass::forward, 1);
  }
};

// The score modifiers of the entropy and gradient kinds (issue 39): a soft-cap (0: none) and a
// fixed sink logit every row shares ("none": no sink).
struct ScoreModifiers {
  float softcap = 0;
  std::vector<float> sinks;  // one entry (every head's) or none

  explicit ScoreModifiers(const json& p)
      : softcap(p.contains("softcap") ? config_fp32(p["softcap"]) : 0) {
    if (p.contains("sink") && p["sink"].is_number()) sinks = {config_fp32(p["sink"])};
  }
  ScoreMod score_mod() const { return {.softcap = softcap, .sinks = sinks}; }
  bool none() const { return softcap == 0 && sinks.empty(); }
  float sink() const { return sinks.empty() ? -INFINITY : sinks.front(); }
};

}  // namespace sdpa
