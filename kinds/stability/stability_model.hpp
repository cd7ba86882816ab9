// The model of the learning-rate stability study (issue 19): a stack of pre-norm Transformer
// blocks where training can go unstable, trained on the associative recall of
// training_model.hpp. Each block is
//   x <- x + W_O attention(LN(x))        x <- x + W_2 GELU(W_1 LN(x))
// and the query position's output goes through a final LN and a linear read-out to the vocab.
// LN is LayerNorm with a learnable gain and no bias (eps 1e-5, PyTorch's default); GELU is the
// exact erf form (PyTorch's nn.GELU default). Attention is causal self-attention over the
// sequence's positions; the last block needs only the query rows (nothing reads the others), so
// it runs the kernel with one query row per sequence and head, as the one-layer model does.
//
// How attention logits are bounded is the scale scheme: a scale c with s = c q.k (none: 1;
// sqrt_dk: 1/sqrt(d_k); dk: 1/d_k, muP; log_n: ln N / sqrt(d_k), N the sequence length, the
// suite's scale_value()), or qk_norm: q and k each go through a LayerNorm over the d_k channels
// of each head, with a learnable gain per head and channel and no bias, before s = q.k / sqrt(d_k)
// (Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion Parameters"; Wortsman et al.
// 2023 call it qk-layernorm). LayerNorm rather than RMSNorm because that is what both papers
// train with; the normalised q, k have |q| = |k| = sqrt(d_k) per head, so |s| <= g_q g_k sqrt(d_k)
// and only the gains can grow the logits.
//
// Two score modifiers (issue 39) bound or relieve the logits beside the scheme: a soft-cap
// c tanh(s / c) on the scaled logits (Gemma 2; with scheme none it replaces 1/sqrt(d_k) as what
// bounds them), and a learned sink, one logit per head and block that joins each row's softmax
// denominator without a value (gpt-oss), starting at 0 and trained like a gain (no decay) from the
// kernel's d_sinks.
//
// softmax(c Q K^T) V and its backward run in one of the suite's kernels (fp32, as training does),
// with causal masking; everything else runs in Eigen in double, on the calling thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../training/training_model.hpp"  // the task, its batches and helpers
#include "sdpa/kernels.hpp"
#include "sdpa/rng.hpp"

namespace sdpa::stability {

using training::Batch;
using training::Matrix;

enum class Scheme { none, sqrt_dk, dk, log_n, qk_norm };
inline constexpr Scheme kSchemes[] = {Scheme::none, Scheme::sqrt_dk, Scheme::dk, Scheme::log_n,
                                      Scheme::qk_norm};
std::string_view scheme_name(Scheme s);
// The scheme of a name ("none", "sqrt_dk", "dk", "log_n", "qk_norm"); nullopt for another.
std::optional<Scheme> parse_scheme(std::string_view name);
// The scale c of the scaled product: 1/sqrt(d_k) for qk_norm, scale_value() for the others.
double scheme_scale(Scheme s, double d_k, double n_keys);

// The task's sizes (vocab, n_pairs) and the model's: d_model, heads of width d_k (d_v = d_k),
// `layers` blocks, MLP hidden width d_ff. Embeddings are always learned here.
struct StackShape {
  training::ModelShape base;  // d_model, d_k, heads, vocab, n_pairs
  std::int64_t layers = 2, d_ff = 0;

  std::int64_t positions() const { return base.positions(); }
  std::int64_t width() const { return base.width(); }
};

// The parameters as one list of tensors (globals first, then each layer's), so the optimiser and
// the checks loop over them. A weight W maps rows x to x W; a gain is 1 x width. The qk_norm gains
// are empty (0 x 0) under the other schemes, and the sinks (1 x heads) without a learned sink:
// nothing trains or decays them.
enum Global { kKeyEmbedding, kValueEmbedding, kFinalGain, kReadout, kGlobals };
enum PerLayer {
  kAttentionGain,
  kWQ,
  kWK,
  kWV,
  kWO,
  kQGain,
  kKGain,
  kMlpGain,
  kW1,
  kW2,
  kSink,
  kPerLayer
};

struct Parameters {
  std::vector<Matrix> tensor;

  static std::size_t index(std::int64_t layer, PerLayer t) {
    return kGlobals + std::size_t(layer) * kPerLayer + t;
  }
  Matrix& operator[](Global t) { return tensor[t]; }
  const Matrix& operator[](Global t) const { return tensor[t]; }
  Matrix& at(std::int64_t layer, PerLayer t) { return tensor[index(layer, t)]; }
  const Matrix& at(std::int64_t layer, PerLayer t) const { return tensor[index(layer, t)]; }
};

// Normalisation gains (1 x width rows) are not weight-decayed, as in nanoGPT's and most LLM
// recipes' parameter groups.
bool is_gain(std::size_t tensor);
// Nor are the learned sinks (gpt-oss keeps them out of weight decay too).
bool is_sink(std::size_t tensor);

// Embeddings N(0, 1), weights with `init` ("glorot" or "pytorch"), gains 1, learned sinks 0. The
// draws do not depend on the scheme or the modifiers (qk_norm's gains and the sinks take none), so
// runs of one stream key start from the same weights under every scheme and learning rate.
Parameters initial_parameters(PhiloxStream& rng, const StackShape& s, const std::string& init,
                              Scheme scheme, bool sink = false);

// The attention core: a kernel with a backward, the scheme and the modifiers.
struct Core {
  const Kernel* kernel = nullptr;
  Scheme scheme = Scheme::sqrt_dk;
  double softcap = 0;  // 0: none
  bool sink = false;   // a learned sink per head and block
};

// One block's attention over a batch, from the kernel's probes: the largest logit s = c q.k (after
// the soft-cap) over every row, head and visible key (a row's is lse + ln(max weight), exactly,
// since the max weight is e^{m - lse}; with a sink, the sink's logit counts among the row's), and
// the mean of the rows' entropies (nats; the sink counts as one more outcome). The last block's
// rows are the query rows; earlier blocks' are all causal rows, the first of which sees one key
// (entropy 0).
struct AttentionStats {
  double max_logit = 0, entropy = 0;
};
// From a forward's probes and lse (one per row); NaN max logit if a row's is not finite.
AttentionStats attention_stats(const RowProbes& probes, std::span<const float> lse);

struct Evaluation {
  double loss = 0;                        // mean cross-entropy over the batch (nats)
  double accuracy = 0;                    // share of sequences whose arg-max logit is the target
  Parameters gradient;                    // d loss / d parameter, shaped like the parameters
  std::vector<AttentionStats> attention;  // per block, when probed
};

// Forward and backward on one batch, on the calling thread (the kernel too).
Evaluation evaluate(const Parameters& p, const Batch& batch, const StackShape& s, const Core& core,
                    bool probe = false);

// AdamW (Loshchilov & Hutter) as torch.optim.AdamW with its defaults: beta1 0.9, beta2 0.999,
// eps 1e-8, bias correction, decoupled decay w *= 1 - lr wd before the Adam update
// (training::adam_update); PyTorch's default wd is 0.01. Gains and sinks are not decayed.
class AdamW {
 public:
  AdamW(const Parameters& like, double weight_decay);
  void step(Parameters& p, const Parameters& gradient, double learning_rate);

 private:
  double weight_decay_;
  Parameters first_moment_, second_moment_;
  std::int64_t steps_ = 0;
};

}  // namespace sdpa::stability
