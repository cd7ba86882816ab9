// One training run of the stability study: the model of stability_model.hpp at one scale
// scheme, d_k and learning rate, from one seed, trained with AdamW on associative recall, and
// what a learning-rate sweep records of it. Runs are independent and each computes on one
// thread, so a sweep spreads runs (never a run's arithmetic) over threads and its results do not
// depend on the thread count.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sdpa/rng.hpp"
#include "stability_model.hpp"

namespace sdpa::stability {

struct RunSpec {
  Scheme scheme = Scheme::sqrt_dk;
  double softcap = 0;  // 0: none
  bool sink = false;   // a learned sink per head and block
  StackShape shape;
  std::string kernel = "naive";  // needs a backward
  std::string init = "pytorch";  // weights: "pytorch" (Linear's default) or "glorot"
  double learning_rate = 1e-3;   // peak rate
  double weight_decay = 0.01;    // AdamW's, PyTorch's default
  // Schedule: linear warm-up over the first warmup_steps steps (step t at (t + 1) / warmup_steps
  // of the peak), then the peak, or with cosine_decay a half cosine from the peak down to 0 at
  // `steps`.
  std::int64_t warmup_steps = 0;
  bool cosine_decay = false;
  std::int64_t batch = 32, steps = 200, log_every = 20, eval_size = 128;
  // The run's random streams (training::RunStreams). Give runs that differ only in scheme or
  // learning rate the same key: they then start from the same weights and see the same batches (a
  // paired comparison).
  StreamKey key;

  double learning_rate_at(std::int64_t step) const;
  // 0, log_every, 2 log_every, ... below steps, and steps.
  std::vector<std::int64_t> logged_steps() const;
};

// One block's series, one value per logged step: the largest attention logit and the mean
// attention entropy on the held-out set (AttentionStats); the Frobenius norms of the held-out
// gradient of W_Q and W_K; and of the last update of W_Q and W_K, W_t - W_{t-1}, with weight
// decay included (0 at step 0); with a learned sink, the mean of the block's sink logits.
struct LayerSeries {
  std::vector<double> max_logit, entropy, sink;
  std::vector<double> grad_norm_w_q, grad_norm_w_k, update_norm_w_q, update_norm_w_k;
};

// A run diverges when
//  - a training step's loss or gradient is not finite: the run stops there (no update is
//    applied), diverged_at = nonfinite_at = that step, and the final loss and accuracy are NaN;
//  - or its final held-out loss is above its initial held-out loss l0: diverged_at is then the
//    first logged step from which every logged held-out loss, the last included, is above l0.
// The threshold is Wortsman et al. 2023 ("Small-scale proxies for large-scale Transformer
// training instabilities", sec. 2.2): their learning-rate sensitivity replaces a final loss above
// l0 by l0, counting such a run as no better than not training at all.
struct RunResult {
  double initial_loss = 0;    // held-out loss at step 0 (l0)
  double final_loss = 0;      // held-out loss at the last step; NaN when stopped
  double final_accuracy = 0;  // held-out accuracy at the last step; NaN when stopped
  bool diverged = false;
  std::optional<std::int64_t> diverged_at, nonfinite_at;
  std::vector<std::int64_t> step;      // the logged steps reached (all of them unless stopped)
  std::vector<double> loss, accuracy;  // held-out, per logged step
  std::vector<LayerSeries> layer;      // per block
};

RunResult train_run(const RunSpec& run);

// Every run, spread over `threads` threads; results in the order of `runs`, bit-identical on any
// thread count.
std::vector<RunResult> train_runs(std::span<const RunSpec> runs, int threads);

}  // namespace sdpa::stability
