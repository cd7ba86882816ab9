// Experiment `variance`: does each entry of S = c Q K^T have the variance theory says, and
// what does a user who calls np.var on one product see? Scores come from any kernel through
// its probes (row sums and sums of squares), so the same numbers can be measured on every
// variant.
#include <cmath>
#include <vector>

#include "checks.hpp"
#include "kinds.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/rng.hpp"
#include "sdpa/stats.hpp"
#include "sdpa/theory.hpp"
#include "trials.hpp"

namespace sdpa {
namespace {

// What one trial (one product) contributes.
struct TrialMoments {
  double mean = 0;          // mean of the m entries
  double second = 0;        // mean of their squares
  double aligned_mean = 0;  // over the aligned pairs (q_i, k_i), when alignment > 0
  double aligned_variance = 0;
};

TrialMoments run_trial(const AttentionCell& c, const Kernel& kernel, const StreamKey& key) {
  PhiloxStream rng(key);
  const Shape shape{1, c.n_q, c.n_kv, c.d_k, 1};
  std::vector<float> q(shape.q_elements()), k(shape.k_elements());
  c.inputs.sample(rng, c.n_q, c.n_kv, c.d_k, q, k);
  std::vector<float> v(shape.v_elements(), 0.0f), out(shape.out_elements());
  RowProbes probes(shape.rows());
  ForwardArgs args{.shape = shape, .q = q.data(), .k = k.data(), .v = v.data(), .out = out.data()};
  args.scale = float(c.scale);
  args.probes = &probes;
  kernel.forward(args);

  const auto pooled = probes.pooled();
  const double m = double(c.n_q) * double(c.n_kv);
  TrialMoments t{pooled.score_sum / m, pooled.score_sumsq / m};
  if (c.inputs.alignment > 0) {
    std::vector<double> dots(c.n_q);
    for (std::int64_t i = 0; i < c.n_q; ++i) {
      double dot = 0;
      for (std::int64_t j = 0; j < c.d_k; ++j) dot += double(q[i * c.d_k + j]) * k[i * c.d_k + j];
      dots[i] = c.scale * dot;
    }
    t.aligned_mean = stats::mean(dots);
    t.aligned_variance = stats::variance(dots);
  }
  return t;
}

json run_variance_cell(const CellContext& ctx) {
  const AttentionCell c(ctx.cell.params);
  const Kernel& kernel = *find_kernel(c.kernel);
  const auto trials = run_trials<TrialMoments>(
      ctx, c.trials, [&](const StreamKey& key) { return run_trial(c, kernel, key); });

  const auto means = column(trials, &TrialMoments::mean);
  std::vector<double> sample_variances, deviations;
  for (const auto& t : trials) sample_variances.push_back(t.second - t.mean * t.mean);  // np.var(S)
  const double grand_mean = stats::mean(means);
  // Each trial's mean squared deviation from the pooled mean: their average is np.var of all
  // products stacked, and their spread across independent trials gives its interval.
  for (const auto& t : trials)
    deviations.push_back(t.second - 2 * grand_mean * t.mean + grand_mean * grand_mean);

  const auto model = c.model();
  // Aligned pairs differ from the other entries: no common per-entry prediction then.
  const bool independent = c.inputs.independent_scores();
  auto if_independent = [&](double x) { return independent ? std::optional(x) : std::nullopt; };
  // Projected inputs share W within a trial, so entries of one product covary in ways the
  // closed forms ignore: their per-product predictions are left out, the pooled one is
  // approximate (exact as trials grow).
  const bool projected = c.inputs.kind == "projected";
  auto if_plain = [&](double x) {
    return independent && !projected ? std::optional(x) : std::nullopt;
  };

  json record;
  record["scale_value"] = c.scale;
  record["entries_per_trial"] = c.n_q * c.n_kv;
  record["score_mean"] = measured(grand_mean, stats::mean_ci(means),
                                  if_independent(theory::score_mean(model)), "exact");
  record["score_variance"] =
      measured(stats::mean(deviations), stats::mean_ci(deviations),
               if_independent(projected ? theory::score_variance(model)
                                        : theory::expected_pooled_variance(model, c.trials)),
               projected ? "approximate" : "exact");
  record["score_variance"]["per_entry_predicted"] = theory::score_variance(model);

  json sv = measured(stats::mean(sample_variances), stats::mean_ci(sample_variances),
                     if_plain(theory::expected_sample_variance(model)), "exact");
  const bool spread_theory = independent && !projected && model.mean_q == 0 && model.mean_k == 0;
  sv["stddev"] =
      measured(stats::stddev(sample_variances), stats::stddev_ci(sample_variances),
               spread_theory ? std::optional(theory::sample_variance_stddev(model)) : std::nullopt,
               "approximate");
  sv["q05"] = stats::quantile(sample_variances, 0.05);
  sv["q50"] = stats::quantile(sample_variances, 0.50);
  sv["q95"] = stats::quantile(sample_variances, 0.95);
  sv["cdf_at"] = json::array();
  for (const auto& x : ctx.cell.params["cdf_at"])
    sv["cdf_at"].push_back({{"x", x}, {"fraction", stats::fraction_at_most(sample_variances, x)}});
  record["sample_variance"] = sv;

  if (c.inputs.alignment > 0) {
    const auto a_means = column(trials, &TrialMoments::aligned_mean);
    const auto a_vars = column(trials, &TrialMoments::aligned_variance);
    const bool unit =
        model.mean_q == 0 && model.mean_k == 0 && model.std_q == 1 && model.std_k == 1;
    auto if_unit = [&](double x) { return unit ? std::optional(x) : std::nullopt; };
    record["aligned_score_mean"] = measured(
        stats::mean(a_means), stats::mean_ci(a_means),
        if_unit(theory::aligned_mean(double(c.d_k), c.scale, c.inputs.alignment)), "exact");
    record["aligned_score_variance"] = measured(
        stats::mean(a_vars), stats::mean_ci(a_vars),
        if_unit(theory::aligned_variance(double(c.d_k), c.scale, c.inputs.alignment)), "exact");
  }
  return record;
}

std::vector<std::string> check_variance(const json& e) {
  std::vector<std::string> problems;
  const json alignments = grid_values(e["alignment"]);
  const bool aligned = std::any_of(alignments.begin(), alignments.end(),
                                   [](const json& a) { return a.get<double>() > 0; });
  const json n_q = grid_values(e["n_q"]), n_kv = grid_values(e["n_kv"]);
  if (aligned && (n_q != n_kv || n_q.size() > 1))
    problems.push_back(
        "/alignment: aligned inputs pair query i with key i, so n_q and n_kv must be one and the "
        "same value; found n_q " +
        n_q.dump() + " and n_kv " + n_kv.dump());
  if (aligned) {
    for (const auto& n : n_q)
      if (n.get<int>() < 2)
        problems.push_back("/n_q: aligned inputs need n_q >= 2 to measure a variance, found " +
                           n.dump());
  }
  return problems;
}

}  // namespace

ExperimentKind variance_experiment() {
  return {
      .name = "variance",
      .description = "mean and variance of the entries of S = c Q K^T, and of np.var(S)",
      .axes = {"kernel", "inputs", "init", "d_model", "n_q", "n_kv", "mean_q", "std_q", "mean_k",
               "std_k", "alignment", "trials", "d_k", "scale"},
      .renamed = {{"n_k", "n_kv"}},  // its name before every kind said n_kv
      .run_cell = run_variance_cell,
      .memory_bytes =
          [](const json& p, int threads) {
            const AttentionCell c(p);
            // Per trial, beside Q, K, W and the workspace: V (d_v = 1), the output, probes and
            // aligned dot products; per trial kept: its moments and their columns.
            const double own = 4.0 * double(c.n_kv + c.n_q) + 64.0 * double(c.n_q);
            return trials_memory(c.forward_trial_bytes(own), 96.0, c.trials, threads);
          },
      .check = check_variance,
      .cell_check = attention_cell_problem,
  };
}

}  // namespace sdpa
