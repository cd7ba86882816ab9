// Experiment `gradient`: how much gradient passes through softmax as it saturates? Runs a
// kernel's forward and backward with probes and records the softmax Jacobian's norm (from the
// exact identity and from the gradients themselves), its bulk asymptote e^{sigma^2}/N, the
// gradient reaching the raw scores, per-element norms of dQ, dK, dV, and how many keys still
// receive a gradient (participation).
#include <cmath>
#include <vector>

#include "checks.hpp"
#include "kinds.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/stats.hpp"
#include "trials.hpp"

namespace sdpa {
namespace {

struct GradientCell : AttentionCell {
  std::string upstream;
  std::int64_t d_v;
  bool causal;
  ScoreModifiers mods;

  explicit GradientCell(const json& p)
      : AttentionCell(p), upstream(p["upstream"]), d_v(p["d_v"]), causal(p["causal"]), mods(p) {}
};

// One trial's means over its rows.
struct TrialGradients {
  double jacobian_identity = 0;  // ||J||_F^2 = sum p^2 - 2 sum p^3 + (sum p^2)^2 over the keys
  // ||dS_i||^2 / ||dO_i||^2, whose expectation is ||J||_F^2 (dS at the scaled score s: with a
  // soft-cap, through its 1 - tanh^2, so it is then the Jacobian of O in s, not in the logits)
  double jacobian_measured = 0;
  double score_gradient = 0;  // ||scale * dS_i||: the gradient at the raw scores q.k
  double participation = 0;   // share of visible keys with |dS_j| > 1e-3 max |dS|
  double max_weight = 0;
  double d_q = 0, d_k = 0, d_v = 0;  // RMS per element
};

double rms(const std::vector<float>& x) {
  double s = 0;
  for (float v : x) s += double(v) * v;
  return std::sqrt(s / double(x.size()));
}

TrialGradients run_trial(const GradientCell& c, const Kernel& kernel, const StreamKey& key) {
  PhiloxStream rng(key);
  const Shape shape{1, c.n_q, c.n_kv, c.d_k, c.d_v};
  std::vector<float> q(shape.q_elements()), k(shape.k_elements()), v(shape.v_elements());
  std::vector<float> d_out(shape.out_elements(), 1.0f);  // "ones": L = sum of the outputs
  c.inputs.sample(rng, c.n_q, c.n_kv, c.d_k, q, k);
  fill_normal<float>(rng, v);
  if (c.upstream == "normal") fill_normal<float>(rng, d_out);

  std::vector<float> out(shape.out_elements()), lse(shape.rows());
  RowProbes probes(shape.rows());
  ForwardArgs fwd{.shape = shape, .q = q.data(), .k = k.data(), .v = v.data(), .out = out.data()};
  fwd.lse = lse.data(), fwd.scale = float(c.scale), fwd.mask.causal = c.causal,
  fwd.probes = &probes, fwd.score_mod = c.mods.score_mod();
  kernel.forward(fwd);

  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  GradProbes grads(shape.rows());
  BackwardArgs bwd = backward_of(fwd, d_out.data(), dq.data(), dk.data(), dv.data());
  bwd.probes = &grads;
  kernel.backward(bwd);

  TrialGradients t;
  const double rows = double(shape.rows());
  for (std::int64_t r = 0; r < shape.rows(); ++r) {
    // The probes count a sink as one more outcome; the Jacobian is over the keys' weights (the
    // sink has no value), so its weight e^{sink - lse} comes off.
    const double sink = std::exp(double(c.mods.sink()) - double(lse[r]));
    const double p2 = probes.sum_p2[r] - sink * sink, p3 = probes.sum_p3[r] - sink * sink * sink;
    double do2 = 0;
    for (std::int64_t x = 0; x < c.d_v; ++x)
      do2 += double(d_out[r * c.d_v + x]) * d_out[r * c.d_v + x];
    t.jacobian_identity += (p2 - 2 * p3 + p2 * p2) / rows;
    t.jacobian_measured += grads.ds_sumsq[r] / do2 / rows;
    t.score_gradient += std::abs(c.scale) * std::sqrt(grads.ds_sumsq[r]) / rows;
    t.participation +=
        double(grads.participating[r]) / double(std::max<std::int64_t>(1, grads.visible[r])) / rows;
    t.max_weight += probes.max_weight[r] / rows;
  }
  t.d_q = rms(dq), t.d_k = rms(dk), t.d_v = rms(dv);
  return t;
}

json run_gradient_cell(const CellContext& ctx) {
  const GradientCell c(ctx.cell.params);
  const Kernel& kernel = *find_kernel(c.kernel);
  const auto trials = run_trials<TrialGradients>(
      ctx, c.trials, [&](const StreamKey& key) { return run_trial(c, kernel, key); });

  const auto model = c.model();
  const double sigma2 = theory::score_variance(model);
  const double ln_n = std::log(double(c.n_kv));
  const bool gaussian =
      c.inputs.independent_scores() && model.mean_q == 0 && model.mean_k == 0 && c.mods.none();

  json r;
  r["scale_value"] = c.scale;
  r["sigma2"] = sigma2;
  r["saturation_sigma2"] = 2 * ln_n;
  r["regime"] = sigma2 <= 1 ? "bulk" : sigma2 < 2 * ln_n ? "transition" : "frozen";
  const auto identity = column(trials, &TrialGradients::jacobian_identity);
  // Bulk asymptote (theory::jacobian_fro2_bulk), only where it holds, sigma^2 < ln N / 2, and
  // without a causal mask (rows would see different N).
  const bool asymptote = gaussian && !c.causal && sigma2 < ln_n / 2;
  r["jacobian_fro2"] = measured(
      stats::mean(identity), stats::mean_ci(identity),
      asymptote ? std::optional(theory::jacobian_fro2_bulk(sigma2, double(c.n_kv))) : std::nullopt,
      "asymptotic");
  // The same norm read off the backward: E ||dS_i||^2 = ||dO_i||^2 ||J_i||_F^2 for V with
  // i.i.d. unit entries independent of P. Compared trial by trial with the identity, so the
  // interval is that of the paired difference.
  const auto from_gradients = column(trials, &TrialGradients::jacobian_measured);
  std::vector<double> difference;
  for (std::size_t t = 0; t < trials.size(); ++t)
    difference.push_back(from_gradients[t] - identity[t]);
  // Measured - identity = mean(difference): shifting the difference's interval by the identity
  // puts it around the measured value, and "agrees" is then "the difference's CI holds 0".
  const auto diff_ci = stats::mean_ci(difference);
  const double id = stats::mean(identity);
  // With a soft-cap dS carries its derivative: no identity to agree with.
  r["jacobian_fro2_from_gradients"] =
      c.mods.softcap > 0 ? summary(from_gradients)
                         : measured(stats::mean(from_gradients),
                                    {id + diff_ci.low, id + diff_ci.high}, id, "exact");
  r["score_gradient_norm"] = summary(column(trials, &TrialGradients::score_gradient));
  r["participation"] = summary(column(trials, &TrialGradients::participation));
  r["max_weight"] = summary(column(trials, &TrialGradients::max_weight));
  r["d_q_rms"] = summary(column(trials, &TrialGradients::d_q));
  r["d_k_rms"] = summary(column(trials, &TrialGradients::d_k));
  r["d_v_rms"] = summary(column(trials, &TrialGradients::d_v));
  return r;
}

}  // namespace

ExperimentKind gradient_experiment() {
  return {
      .name = "gradient",
      .description =
          "softmax Jacobian norm, score gradients and participation vs d_k, scale, "
          "soft-cap and sink",
      .axes = {"kernel", "upstream", "causal", "inputs", "init", "d_model", "mean_q", "std_q",
               "mean_k", "std_k", "alignment", "n_q", "d_v", "trials", "n_kv", "d_k", "softcap",
               "sink", "scale"},
      .run_cell = run_gradient_cell,
      .memory_bytes =
          [](const json& p, int threads) {
            const GradientCell c(p);
            const Shape shape{1, c.n_q, c.n_kv, c.d_k, c.d_v};
            const double n_q = double(c.n_q), n_kv = double(c.n_kv);
            const double d_k = double(c.d_k), d_v = double(c.d_v);
            // Per trial: Q, K, V, O, dO and their gradients in fp32, lse and probes, W_Q and
            // W_K in double, and the larger workspace of the kernel's two calls (one after the
            // other); per trial kept: TrialGradients and their columns.
            const double trial = 8.0 * (n_q + n_kv) * (d_k + d_v) + 96.0 * n_q +
                                 c.inputs.weight_bytes(c.d_k) +
                                 std::max(kernel_workspace(p, shape, Pass::forward, 1),
                                          kernel_workspace(p, shape, Pass::backward, 1));
            return trials_memory(trial, 128.0, c.trials, threads);
          },
      .check = kernels_without_backward,
      .cell_check = attention_cell_problem,
  };
}

}  // namespace sdpa
