// What the `training` experiment trains, and how: one attention layer (W_Q, W_K, W_V, W_O, one
// or more heads) and a linear read-out, on associative recall, with SGD (momentum) or Adam.
// softmax(c Q K^T) V and its backward run in one of our kernels (fp32, as training does); the
// projections, the read-out, the cross-entropy and their gradients run in Eigen, in double, so
// the kernel is the only place where precision is lost.
//
// The task: a sequence holds n_pairs (key, value) pairs, keys distinct, values drawn with
// replacement, both from a vocabulary of `vocab` tokens, then a query key; the model predicts
// the value paired with the query. Each pair is one position whose input is
// (E_key[key] + E_value[value]) / sqrt(2), the query's position is E_key[query]: with separate
// key and value tables one layer can match the query against keys and read the value off the
// matched position (pairs spread over two positions need a second layer, an induction head).
// Embeddings are N(0, 1) (PyTorch's nn.Embedding default), so every input has unit variance.
// Only the query's row is read out: the kernel runs with one query row per sequence and head
// against all n_pairs + 1 positions (the query's own included), i.e. the last row of causal
// self-attention.
#pragma once

#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sdpa/kernels.hpp"
#include "sdpa/rng.hpp"

namespace sdpa::training {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct ModelShape {
  std::int64_t d_model = 0, d_k = 0, heads = 1, vocab = 0, n_pairs = 0;
  bool learned_embeddings = true;

  std::int64_t positions() const { return n_pairs + 1; }  // the pairs, then the query
  std::int64_t width() const { return heads * d_k; }      // columns of W_Q, W_K, W_V
};

// The parameters (and their gradients) as one array, so optimisers and checks loop over them.
// A weight W maps rows x to x W: W_Q, W_K, W_V are d_model x width, W_O width x d_model, the
// read-out d_model x vocab, each embedding table vocab x d_model.
enum Tensor { kKeyEmbedding, kValueEmbedding, kWQ, kWK, kWV, kWO, kReadout, kTensors };

struct Parameters {
  std::array<Matrix, kTensors> tensor;

  Matrix& operator[](Tensor t) { return tensor[t]; }
  const Matrix& operator[](Tensor t) const { return tensor[t]; }
};

// The first tensor training updates: fixed embeddings stay as drawn.
inline int first_trained(const ModelShape& s) { return s.learned_embeddings ? kKeyEmbedding : kWQ; }

// An N(0, 1) matrix (PyTorch's nn.Embedding default), and a fan_in x fan_out weight with `init`
// ("glorot" or "pytorch", initial_weights()), drawn from the stream in row-major order.
Matrix normal_matrix(PhiloxStream& rng, std::int64_t rows, std::int64_t cols);
Matrix weight_matrix(PhiloxStream& rng, const std::string& init, std::int64_t fan_in,
                     std::int64_t fan_out);

// Embeddings N(0, 1); weights with `init` ("glorot" or "pytorch", initial_weights()), biases
// omitted.
Parameters initial_parameters(PhiloxStream& rng, const ModelShape& s, const std::string& init);

// A training run's random streams, one per purpose (StreamKey::purpose 0, 1, 2): the initial
// weights, the held-out set and the training batches.
struct RunStreams {
  explicit RunStreams(const StreamKey& key);
  PhiloxStream init, held_out, data;
};

struct Batch {
  std::int64_t size = 0, n_pairs = 0;
  std::vector<std::int32_t> keys, values;  // [size, n_pairs]
  std::vector<std::int32_t> query;         // [size]: which pair is asked for

  std::int32_t key(std::int64_t b) const { return keys[b * n_pairs + query[b]]; }
  std::int32_t target(std::int64_t b) const { return values[b * n_pairs + query[b]]; }
};

Batch sample_batch(PhiloxStream& rng, const ModelShape& s, std::int64_t size);

// Inputs [size * positions, d_model] from the key and value tables: each sequence's pairs, then
// its query. embedding_gradient() is its adjoint: it scatters the inputs' gradient d_x into the
// tables' gradients (sized like the tables), in sequence order.
Matrix embed(const Matrix& key_table, const Matrix& value_table, const Batch& batch);
void embedding_gradient(const Matrix& d_x, const Batch& batch, Matrix& d_key_table,
                        Matrix& d_value_table);

// The query positions' rows of x [size * positions, d_model]: every positions()-th row, starting
// at the last.
using QueryRows = Eigen::Map<const Matrix, 0, Eigen::OuterStride<>>;
QueryRows query_rows(const Matrix& x, std::int64_t positions);

// Rows (b, position) x columns (head, c) of `x`, [sequences * n, heads * d], to the kernels'
// [sequences * heads, n, d] in fp32, and back.
std::vector<float> to_heads(const Matrix& x, std::int64_t n, std::int64_t heads, std::int64_t d);
Matrix from_heads(const std::vector<float>& x, std::int64_t n, std::int64_t heads, std::int64_t d);

// Mean cross-entropy (nats) of the logits [size, vocab] against the batch's targets; writes its
// gradient and the share of rows whose arg-max is the target.
double cross_entropy(const Matrix& logits, const Batch& batch, Matrix& d_logits, double& accuracy);

// The attention core: a kernel with a backward and the scale c it runs with.
struct AttentionCore {
  const Kernel* kernel = nullptr;
  float scale = 1;
};

struct Evaluation {
  double loss = 0;      // mean cross-entropy over the batch (nats)
  double accuracy = 0;  // share of sequences whose arg-max logit is the target
  Parameters gradient;  // d loss / d parameter; empty matrices where not trained
};

// Forward and backward on one batch. The kernel runs on one thread: parallelism is across
// seeds, so results do not depend on the thread count. `probes`, when given, is sized
// size * heads and receives the kernel's per-row attention statistics.
Evaluation evaluate(const Parameters& p, const Batch& batch, const ModelShape& s,
                    const AttentionCore& core, RowProbes* probes = nullptr);

struct OptimizerSpec {
  std::string kind = "adam";  // "adam" or "sgd"
  double learning_rate = 1e-3;
  double momentum = 0.9;  // SGD only
};

// One Adam step (Kingma & Ba) on one tensor w with its moments m, v and gradient g: beta1 0.9,
// beta2 0.999, eps 1e-8 and bias correction for the step-th step (from 1), PyTorch's defaults.
// A weight decay wd != 0 makes it AdamW (Loshchilov & Hutter): decoupled, w *= 1 - lr wd before
// the Adam update, in the order of PyTorch's torch.optim.AdamW; wd = 0 is plain Adam.
void adam_update(Matrix& w, Matrix& m, Matrix& v, const Matrix& g, double lr, std::int64_t step,
                 double weight_decay = 0);

// SGD with momentum in PyTorch's form (v = mu v + g, w -= lr v); Adam (adam_update, no decay).
class Optimizer {
 public:
  Optimizer(const OptimizerSpec& spec, const ModelShape& shape, const Parameters& like);
  void step(Parameters& p, const Parameters& gradient);

 private:
  OptimizerSpec spec_;
  int first_;
  Parameters first_moment_, second_moment_;
  std::int64_t steps_ = 0;
};

}  // namespace sdpa::training
