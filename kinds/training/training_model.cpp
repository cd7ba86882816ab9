// Eigen's own OpenMP GEMM would split products across threads inside a seed; parallelism is
// across seeds instead, so each product runs in one fixed order on one thread.
#define EIGEN_DONT_PARALLELIZE
#include "training_model.hpp"

#include <boost/random/uniform_int_distribution.hpp>
#include <cmath>
#include <numeric>

#include "inputs.hpp"

namespace sdpa::training {
namespace {

// A pair's position sums two independent unit-variance embeddings; this keeps it at unit
// variance like the query's position.
const double kPairWeight = 1 / std::sqrt(2.0);

Matrix from_vector(const std::vector<double>& w, std::int64_t rows, std::int64_t cols) {
  return Eigen::Map<const Matrix>(w.data(), rows, cols);
}

}  // namespace

namespace {

StreamKey with_purpose(StreamKey key, std::uint32_t purpose) {
  key.purpose = purpose;
  return key;
}

}  // namespace

RunStreams::RunStreams(const StreamKey& key)
    : init(with_purpose(key, 0)), held_out(with_purpose(key, 1)), data(with_purpose(key, 2)) {}

Matrix normal_matrix(PhiloxStream& rng, std::int64_t rows, std::int64_t cols) {
  std::vector<double> w(rows * cols);
  fill_normal<double>(rng, w);
  return from_vector(w, rows, cols);
}

Matrix weight_matrix(PhiloxStream& rng, const std::string& init, std::int64_t fan_in,
                     std::int64_t fan_out) {
  return from_vector(initial_weights(rng, init, fan_in, fan_out), fan_in, fan_out);
}

Parameters initial_parameters(PhiloxStream& rng, const ModelShape& s, const std::string& init) {
  Parameters p;
  p[kKeyEmbedding] = normal_matrix(rng, s.vocab, s.d_model);
  p[kValueEmbedding] = normal_matrix(rng, s.vocab, s.d_model);
  p[kWQ] = weight_matrix(rng, init, s.d_model, s.width());
  p[kWK] = weight_matrix(rng, init, s.d_model, s.width());
  p[kWV] = weight_matrix(rng, init, s.d_model, s.width());
  p[kWO] = weight_matrix(rng, init, s.width(), s.d_model);
  p[kReadout] = weight_matrix(rng, init, s.d_model, s.vocab);
  return p;
}

Batch sample_batch(PhiloxStream& rng, const ModelShape& s, std::int64_t size) {
  Batch batch{size, s.n_pairs, {}, {}, {}};
  std::vector<std::int32_t> tokens(s.vocab);
  boost::random::uniform_int_distribution<std::int32_t> value(0, std::int32_t(s.vocab - 1));
  boost::random::uniform_int_distribution<std::int32_t> pair(0, std::int32_t(s.n_pairs - 1));
  for (std::int64_t b = 0; b < size; ++b) {
    // Distinct keys: the first n_pairs draws of a Fisher-Yates shuffle.
    std::iota(tokens.begin(), tokens.end(), 0);
    for (std::int64_t j = 0; j < s.n_pairs; ++j) {
      boost::random::uniform_int_distribution<std::int64_t> pick(j, s.vocab - 1);
      std::swap(tokens[j], tokens[pick(rng)]);
      batch.keys.push_back(tokens[j]);
      batch.values.push_back(value(rng));
    }
    batch.query.push_back(pair(rng));
  }
  return batch;
}

Matrix embed(const Matrix& key_table, const Matrix& value_table, const Batch& batch) {
  const std::int64_t pairs = batch.n_pairs, n = pairs + 1;
  Matrix x(batch.size * n, key_table.cols());
  for (std::int64_t b = 0; b < batch.size; ++b) {
    for (std::int64_t j = 0; j < pairs; ++j)
      x.row(b * n + j) = kPairWeight * (key_table.row(batch.keys[b * pairs + j]) +
                                        value_table.row(batch.values[b * pairs + j]));
    x.row(b * n + pairs) = key_table.row(batch.key(b));
  }
  return x;
}

void embedding_gradient(const Matrix& d_x, const Batch& batch, Matrix& d_key_table,
                        Matrix& d_value_table) {
  const std::int64_t pairs = batch.n_pairs, n = pairs + 1;
  d_key_table.setZero();
  d_value_table.setZero();
  for (std::int64_t b = 0; b < batch.size; ++b) {
    for (std::int64_t j = 0; j < pairs; ++j) {
      d_key_table.row(batch.keys[b * pairs + j]) += kPairWeight * d_x.row(b * n + j);
      d_value_table.row(batch.values[b * pairs + j]) += kPairWeight * d_x.row(b * n + j);
    }
    d_key_table.row(batch.key(b)) += d_x.row(b * n + pairs);
  }
}

QueryRows query_rows(const Matrix& x, std::int64_t positions) {
  return QueryRows(x.data() + (positions - 1) * x.cols(), x.rows() / positions, x.cols(),
                   Eigen::OuterStride<>(positions * x.cols()));
}

std::vector<float> to_heads(const Matrix& x, std::int64_t n, std::int64_t heads, std::int64_t d) {
  const std::int64_t sequences = x.rows() / n;
  std::vector<float> out(x.size());
  for (std::int64_t b = 0; b < sequences; ++b)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t c = 0; c < d; ++c)
          out[((b * heads + h) * n + j) * d + c] = float(x(b * n + j, h * d + c));
  return out;
}

Matrix from_heads(const std::vector<float>& x, std::int64_t n, std::int64_t heads, std::int64_t d) {
  const std::int64_t sequences = std::int64_t(x.size()) / (n * heads * d);
  Matrix out(sequences * n, heads * d);
  for (std::int64_t b = 0; b < sequences; ++b)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t c = 0; c < d; ++c)
          out(b * n + j, h * d + c) = x[((b * heads + h) * n + j) * d + c];
  return out;
}

double cross_entropy(const Matrix& logits, const Batch& batch, Matrix& d_logits, double& accuracy) {
  double loss = 0;
  std::int64_t correct = 0;
  d_logits.resize(logits.rows(), logits.cols());
  for (std::int64_t b = 0; b < batch.size; ++b) {
    const auto row = logits.row(b);
    Eigen::Index best = 0;
    const double m = row.maxCoeff(&best);
    const double lse = m + std::log((row.array() - m).exp().sum());
    loss += lse - row(batch.target(b));
    correct += best == batch.target(b) ? 1 : 0;
    d_logits.row(b) = (row.array() - lse).exp();
    d_logits(b, batch.target(b)) -= 1;
  }
  const double n = double(batch.size);
  d_logits /= n;
  accuracy = double(correct) / n;
  return loss / n;
}

Evaluation evaluate(const Parameters& p, const Batch& batch, const ModelShape& s,
                    const AttentionCore& core, RowProbes* probes) {
  const std::int64_t n = s.positions();
  const Matrix x = embed(p[kKeyEmbedding], p[kValueEmbedding], batch);
  const Matrix q = query_rows(x, n) * p[kWQ];
  const Matrix k = x * p[kWK];
  const Matrix v = x * p[kWV];

  // The attention core in the kernel: one query row per sequence and head.
  const Shape shape{batch.size * s.heads, 1, n, s.d_k, s.d_k};
  const auto q_heads = to_heads(q, 1, s.heads, s.d_k);
  const auto k_heads = to_heads(k, n, s.heads, s.d_k);
  const auto v_heads = to_heads(v, n, s.heads, s.d_k);
  std::vector<float> out(shape.out_elements()), lse(shape.rows());
  ForwardArgs fwd{.shape = shape,
                  .q = q_heads.data(),
                  .k = k_heads.data(),
                  .v = v_heads.data(),
                  .out = out.data()};
  fwd.lse = lse.data(), fwd.scale = core.scale, fwd.probes = probes;
  core.kernel->forward(fwd);

  const Matrix a = from_heads(out, 1, s.heads, s.d_k);
  const Matrix y = a * p[kWO];
  Evaluation e;
  Matrix d_logits;
  e.loss = cross_entropy(y * p[kReadout], batch, d_logits, e.accuracy);

  Parameters& g = e.gradient;
  g[kReadout] = y.transpose() * d_logits;
  const Matrix d_y = d_logits * p[kReadout].transpose();
  g[kWO] = a.transpose() * d_y;
  const auto d_out = to_heads(d_y * p[kWO].transpose(), 1, s.heads, s.d_k);

  std::vector<float> d_q(q_heads.size()), d_k(k_heads.size()), d_v(v_heads.size());
  core.kernel->backward(backward_of(fwd, d_out.data(), d_q.data(), d_k.data(), d_v.data()));

  const Matrix dq = from_heads(d_q, 1, s.heads, s.d_k);
  const Matrix dk = from_heads(d_k, n, s.heads, s.d_k);
  const Matrix dv = from_heads(d_v, n, s.heads, s.d_k);
  g[kWQ] = query_rows(x, n).transpose() * dq;
  g[kWK] = x.transpose() * dk;
  g[kWV] = x.transpose() * dv;
  if (s.learned_embeddings) {
    Matrix d_x = dk * p[kWK].transpose() + dv * p[kWV].transpose();
    const Matrix d_query = dq * p[kWQ].transpose();
    for (std::int64_t b = 0; b < batch.size; ++b) d_x.row(b * n + s.n_pairs) += d_query.row(b);
    g[kKeyEmbedding].resize(s.vocab, s.d_model);
    g[kValueEmbedding].resize(s.vocab, s.d_model);
    embedding_gradient(d_x, batch, g[kKeyEmbedding], g[kValueEmbedding]);
  }
  return e;
}

void adam_update(Matrix& w, Matrix& m, Matrix& v, const Matrix& g, double lr, std::int64_t step,
                 double weight_decay) {
  constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
  if (weight_decay != 0) w *= 1 - lr * weight_decay;
  m = kBeta1 * m + (1 - kBeta1) * g;
  v = kBeta2 * v + (1 - kBeta2) * g.cwiseAbs2();
  const double m_hat = 1 / (1 - std::pow(kBeta1, double(step)));
  const double v_hat = 1 / (1 - std::pow(kBeta2, double(step)));
  w.array() -= lr * (m.array() * m_hat) / ((v.array() * v_hat).sqrt() + kEps);
}

Optimizer::Optimizer(const OptimizerSpec& spec, const ModelShape& shape, const Parameters& like)
    : spec_(spec), first_(first_trained(shape)) {
  for (int t = first_; t < kTensors; ++t) {
    first_moment_.tensor[t] = Matrix::Zero(like.tensor[t].rows(), like.tensor[t].cols());
    second_moment_.tensor[t] = Matrix::Zero(like.tensor[t].rows(), like.tensor[t].cols());
  }
}

void Optimizer::step(Parameters& p, const Parameters& gradient) {
  ++steps_;
  const double lr = spec_.learning_rate;
  for (int t = first_; t < kTensors; ++t) {
    Matrix& m = first_moment_.tensor[t];
    const Matrix& g = gradient.tensor[t];
    if (spec_.kind == "sgd") {
      m = spec_.momentum * m + g;
      p.tensor[t] -= lr * m;
      continue;
    }
    adam_update(p.tensor[t], m, second_moment_.tensor[t], g, lr, steps_);
  }
}

}  // namespace sdpa::training
