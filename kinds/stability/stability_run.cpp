#define EIGEN_DONT_PARALLELIZE  // see stability_model.cpp
#include "stability_run.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>

namespace sdpa::stability {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool finite(const Evaluation& e) {
  if (!std::isfinite(e.loss)) return false;
  for (const Matrix& g : e.gradient.tensor)
    if (!g.allFinite()) return false;
  return true;
}

// Appends one logged step: the held-out evaluation's loss, accuracy, attention statistics and
// gradient norms, and the norms of the last update (`update`, per block: W_Q then W_K).
void log_step(RunResult& r, std::int64_t step, const Evaluation& e, const Parameters& p,
              const std::vector<std::array<double, 2>>& update) {
  r.step.push_back(step);
  r.loss.push_back(e.loss);
  r.accuracy.push_back(e.accuracy);
  for (std::size_t l = 0; l < r.layer.size(); ++l) {
    LayerSeries& s = r.layer[l];
    s.max_logit.push_back(e.attention[l].max_logit);
    s.entropy.push_back(e.attention[l].entropy);
    s.grad_norm_w_q.push_back(e.gradient.at(std::int64_t(l), kWQ).norm());
    s.grad_norm_w_k.push_back(e.gradient.at(std::int64_t(l), kWK).norm());
    s.update_norm_w_q.push_back(update[l][0]);
    s.update_norm_w_k.push_back(update[l][1]);
    if (const Matrix& sink = p.at(std::int64_t(l), kSink); sink.size() > 0)
      s.sink.push_back(sink.mean());
  }
}

// The first logged step from which every logged loss is above l0 (NaN counts as above).
std::optional<std::int64_t> start_of_final_rise(const RunResult& r) {
  std::optional<std::int64_t> start;
  for (std::size_t i = r.loss.size(); i-- > 0;) {
    if (r.loss[i] <= r.initial_loss) break;
    start = r.step[i];
  }
  return start;
}

}  // namespace

double RunSpec::learning_rate_at(std::int64_t step) const {
  if (step < warmup_steps) return learning_rate * double(step + 1) / double(warmup_steps);
  if (!cosine_decay) return learning_rate;
  const double progress = double(step - warmup_steps) / double(steps - warmup_steps);
  return learning_rate * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

std::vector<std::int64_t> RunSpec::logged_steps() const {
  std::vector<std::int64_t> out;
  for (std::int64_t s = 0; s < steps; s += log_every) out.push_back(s);
  out.push_back(steps);
  return out;
}

namespace {

const Kernel& kernel_with_backward(const std::string& name) {
  const Kernel* kernel = find_kernel(name);
  if (!kernel || !kernel->backward)
    throw std::invalid_argument("train_run: kernel \"" + name + "\" has no backward");
  return *kernel;
}

}  // namespace

RunResult train_run(const RunSpec& run) {
  const Core core{&kernel_with_backward(run.kernel), run.scheme, run.softcap, run.sink};
  training::RunStreams rng(run.key);
  Parameters params = initial_parameters(rng.init, run.shape, run.init, run.scheme, run.sink);
  const Batch held_out = training::sample_batch(rng.held_out, run.shape.base, run.eval_size);
  AdamW optimizer(params, run.weight_decay);
  RunResult r;
  r.layer.resize(run.shape.layers);
  std::vector<std::array<double, 2>> update(run.shape.layers, {0.0, 0.0});
  const auto logged = [&](std::int64_t step) {
    return step % run.log_every == 0 || step == run.steps;
  };
  for (std::int64_t step = 0;; ++step) {
    if (logged(step)) {
      const Evaluation e = evaluate(params, held_out, run.shape, core, true);
      if (step == 0) r.initial_loss = e.loss;
      log_step(r, step, e, params, update);
    }
    if (step == run.steps) break;
    const Evaluation e = evaluate(
        params, training::sample_batch(rng.data, run.shape.base, run.batch), run.shape, core);
    if (!finite(e)) {
      r.nonfinite_at = r.diverged_at = step;
      r.diverged = true;
      r.final_loss = r.final_accuracy = kNaN;
      return r;
    }
    // Keep W_Q, W_K before an update that leads to a logged step, for the update's norm.
    std::vector<Matrix> before;
    if (logged(step + 1))
      for (std::int64_t l = 0; l < run.shape.layers; ++l)
        before.push_back(params.at(l, kWQ)), before.push_back(params.at(l, kWK));
    optimizer.step(params, e.gradient, run.learning_rate_at(step));
    if (!before.empty())
      for (std::int64_t l = 0; l < run.shape.layers; ++l)
        update[l] = {(params.at(l, kWQ) - before[2 * l]).norm(),
                     (params.at(l, kWK) - before[2 * l + 1]).norm()};
  }
  r.final_loss = r.loss.back();
  r.final_accuracy = r.accuracy.back();
  r.diverged_at = start_of_final_rise(r);
  r.diverged = r.diverged_at.has_value();
  return r;
}

std::vector<RunResult> train_runs(std::span<const RunSpec> runs, int threads) {
  for (const RunSpec& run : runs) kernel_with_backward(run.kernel);  // throws here, not in a thread
  std::vector<RunResult> results(runs.size());
#pragma omp parallel for num_threads(threads) schedule(dynamic)
  for (std::size_t i = 0; i < runs.size(); ++i) results[i] = train_run(runs[i]);
  return results;
}

}  // namespace sdpa::stability
