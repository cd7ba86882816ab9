// Experiment `entropy`: does softmax saturate as d_k grows when scores are not scaled? Runs any
// kernel with its probes (entropy, max weight, score moments per row, computed inside the
// kernel, so N is limited by time, not by an N x N matrix) and prints each statistic beside
// ln N - sigma^2 / 2. Also counts rows that would overflow without max subtraction: derived
// from the fp32 lse for fp32 and fp16, and measured with the unstable softmax really held in fp16
// (half_softmax.hpp), which should confirm the derived fp16 share.
#include <cfloat>
#include <cmath>
#include <vector>

#include "checks.hpp"
#include "half_softmax.hpp"
#include "kinds.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/stats.hpp"
#include "trials.hpp"

namespace sdpa {
namespace {

// exp overflows past these: ln(FLT_MAX) for fp32, ln(65504) for fp16 (docs/theory.md,
// "Overflow without max subtraction").
const double kLnMaxFp32 = std::log(double(FLT_MAX));  // 88.72
const double kLnMaxFp16 = std::log(65504.0);          // 11.09

// One trial's pooled view of its rows.
struct TrialRows {
  double entropy = 0, max_weight = 0, effective_keys = 0, score_variance = 0;
  std::int64_t rows_over_0_9 = 0, nonfinite_rows = 0, fp32_overflow_rows = 0,
               fp16_overflow_rows = 0, fp16_measured_overflow_rows = 0;
};

TrialRows run_trial(const AttentionCell& c, const ScoreModifiers& mods, const Kernel& kernel,
                    const StreamKey& key) {
  PhiloxStream rng(key);
  const Shape shape{1, c.n_q, c.n_kv, c.d_k, 1};
  std::vector<float> q(shape.q_elements()), k(shape.k_elements());
  c.inputs.sample(rng, c.n_q, c.n_kv, c.d_k, q, k);
  std::vector<float> v(shape.v_elements(), 0.0f), out(shape.out_elements()), lse(shape.rows());
  RowProbes probes(shape.rows());
  ForwardArgs args{.shape = shape, .q = q.data(), .k = k.data(), .v = v.data(), .out = out.data()};
  args.lse = lse.data();
  args.scale = float(c.scale);
  args.score_mod = mods.score_mod();
  args.probes = &probes;
  kernel.forward(args);

  TrialRows t;
  const auto pooled = probes.pooled();
  const double m = double(c.n_q) * double(c.n_kv), mean = pooled.score_sum / m;
  t.score_variance = pooled.score_sumsq / m - mean * mean;
  t.entropy = pooled.entropy_mean;
  t.max_weight = pooled.max_weight_mean;
  t.nonfinite_rows = pooled.nonfinite_rows;
  for (std::int64_t r = 0; r < shape.rows(); ++r) {
    t.effective_keys += std::exp(probes.entropy[r]) / double(shape.rows());
    t.rows_over_0_9 += probes.max_weight[r] > 0.9 ? 1 : 0;
    // Without max subtraction the row sum of e^s is e^lse: it overflows where lse does
    // (NaN or inf lse, from a kernel that already overflowed, counts too).
    t.fp32_overflow_rows += !(lse[r] <= kLnMaxFp32) ? 1 : 0;
    t.fp16_overflow_rows += !(lse[r] <= kLnMaxFp16) ? 1 : 0;
  }
  t.fp16_measured_overflow_rows = fp16_overflowing_rows(q.data(), k.data(), c.n_q, c.n_kv, c.d_k,
                                                        args.scale, mods.softcap, mods.sink());
  return t;
}

double fraction(const std::vector<TrialRows>& trials, std::int64_t TrialRows::*field, double rows) {
  double sum = 0;
  for (const auto& t : trials) sum += double(t.*field);
  return sum / (rows * double(trials.size()));
}

json run_entropy_cell(const CellContext& ctx) {
  const AttentionCell c(ctx.cell.params);
  const ScoreModifiers mods(ctx.cell.params);
  const Kernel& kernel = *find_kernel(c.kernel);
  const auto trials = run_trials<TrialRows>(
      ctx, c.trials, [&](const StreamKey& key) { return run_trial(c, mods, kernel, key); });

  const auto model = c.model();
  const double sigma2 = theory::score_variance(model);
  const double ln_n = std::log(double(c.n_kv));
  // Rows share keys, so rows of one trial are not independent: intervals come from the
  // spread of per-trial means across independent trials.
  const auto entropy = column(trials, &TrialRows::entropy);
  // The theory is of plain softmax: a soft-cap or a sink leaves it without a prediction.
  const bool gaussian_theory =
      c.inputs.independent_scores() && model.mean_q == 0 && model.mean_k == 0 && mods.none();
  const double predicted = theory::entropy_bulk(sigma2, double(c.n_kv));

  json r;
  r["scale_value"] = c.scale;
  r["sigma2"] = sigma2;
  r["saturation_sigma2"] = 2 * ln_n;
  r["regime"] = sigma2 <= 1 ? "bulk" : sigma2 < 2 * ln_n ? "transition" : "frozen";
  r["formula_valid"] = sigma2 < 2 * ln_n;  // asymptotically (N -> infinity, Gaussian logits)
  // The formula is recorded everywhere, with the measured gap; it is a prediction (with an
  // `agrees`) only inside its regime.
  const bool in_regime = gaussian_theory && sigma2 < 2 * ln_n;
  r["entropy"] = measured(stats::mean(entropy), stats::mean_ci(entropy),
                          in_regime ? std::optional(predicted) : std::nullopt, "asymptotic");
  r["entropy"]["formula"] = predicted;
  r["entropy"]["gap"] = stats::mean(entropy) - predicted;
  r["entropy_normalised"] = stats::mean(entropy) / ln_n;
  r["ln_n"] = ln_n;
  const auto max_weight = column(trials, &TrialRows::max_weight);
  r["max_weight"] = measured(stats::mean(max_weight), stats::mean_ci(max_weight), std::nullopt, "");
  const auto keys = column(trials, &TrialRows::effective_keys);
  r["effective_keys"] = measured(stats::mean(keys), stats::mean_ci(keys), std::nullopt, "");
  const auto variances = column(trials, &TrialRows::score_variance);
  r["score_variance"] =
      measured(stats::mean(variances), stats::mean_ci(variances),
               c.inputs.independent_scores() && c.inputs.kind == "normal" && mods.softcap == 0
                   ? std::optional(theory::expected_sample_variance(model))
                   : std::nullopt,
               "exact");
  const double rows = double(c.n_q);
  r["rows_max_weight_over_0_9"] = fraction(trials, &TrialRows::rows_over_0_9, rows);

  // The largest of M Gaussian scores is about sigma sqrt(2 ln M): exp overflows once that
  // passes ln(max). Unscaled (c = 1, unit inputs) that is d_k ~ 88.7^2 / (2 ln M). A soft-cap
  // maps the largest score to c tanh(s / c), which never passes c.
  const double scores = double(c.trials) * rows * double(c.n_kv);
  const double largest = std::sqrt(sigma2 * 2 * std::log(scores));
  const double expected_max =
      mods.softcap > 0 ? mods.softcap * std::tanh(largest / mods.softcap) : largest;
  r["overflow"] = {
      {"nonfinite_rows", fraction(trials, &TrialRows::nonfinite_rows, rows)},
      {"unstable_fp32_rows", fraction(trials, &TrialRows::fp32_overflow_rows, rows)},
      {"unstable_fp16_rows", fraction(trials, &TrialRows::fp16_overflow_rows, rows)},
      {"unstable_fp16_measured_rows",
       fraction(trials, &TrialRows::fp16_measured_overflow_rows, rows)},
      {"expected_max_score", expected_max},
      {"predicted_fp32", expected_max > kLnMaxFp32},
      {"predicted_fp16", expected_max > kLnMaxFp16},
  };
  if ((!ctx.cell.params["scale"].is_string() || ctx.cell.params["scale"] == "none") &&
      mods.softcap == 0) {
    // A scale that does not shrink with d_k: sigma^2 grows like d_k, so overflow has an onset.
    const double per_dim = sigma2 / double(c.d_k);
    r["overflow"]["onset_d_k_fp32"] = kLnMaxFp32 * kLnMaxFp32 / (2 * std::log(scores) * per_dim);
    r["overflow"]["onset_d_k_fp16"] = kLnMaxFp16 * kLnMaxFp16 / (2 * std::log(scores) * per_dim);
  }
  return r;
}

}  // namespace

ExperimentKind entropy_experiment() {
  return {
      .name = "entropy",
      .description =
          "softmax entropy, max weight and overflow vs d_k, N, the scale scheme, a "
          "soft-cap and a sink",
      .axes = {"kernel", "inputs", "init", "d_model", "mean_q", "std_q", "mean_k", "std_k",
               "alignment", "n_q", "trials", "n_kv", "d_k", "softcap", "sink", "scale"},
      .run_cell = run_entropy_cell,
      .memory_bytes =
          [](const json& p, int threads) {
            const AttentionCell c(p);
            // Per trial, beside Q, K, W and the workspace: V (d_v = 1), output, lse and probes;
            // per trial kept: TrialRows and their columns.
            const double own = 4.0 * double(c.n_kv) + 64.0 * double(c.n_q);
            return trials_memory(c.forward_trial_bytes(own), 96.0, c.trials, threads);
          },
      .check = nullptr,
      .cell_check = attention_cell_problem,
  };
}

}  // namespace sdpa
