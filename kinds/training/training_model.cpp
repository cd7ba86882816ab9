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

Matrix normal_matrix(PhiloxStream& rng, std::int64_t rows, std::int64_t cols) {
  std::vector<double> w(rows * cols);
  fill_normal<double>(rng, w);
  return from_vector(w, rows, cols);
}

// Rows (b, position) x columns (head, c) of `x`, [sequences * n, heads * d], to the kernels'
// [sequences * heads, n, d] in fp32, and back.
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

// Inputs [size * positions, d_model]: each sequence's pairs, then its query.
Matrix embed(const Parameters& p, const Batch& batch, const ModelShape& s) {
  const std::int64_t n = s.positions();
  Matrix x(batch.size * n, s.d_model);
  for (std::int64_t b = 0; b < batch.size; ++b) {
    for (std::int64_t j = 0; j < s.n_pairs; ++j)
      x.row(b * n + j) = kPairWeight * (p[kKeyEmbedding].row(batch.keys[b * s.n_pairs + j]) +
                                        p[kValueEmbedding].row(batch.values[b * s.n_pairs + j]));
    x.row(b * n + s.n_pairs) = p[kKeyEmbedding].row(batch.key(b));
  }
  return x;
}

// The adjoint of embed(): scatters the inputs' gradient into the tables, in sequence order.
void embedding_gradient(const Matrix& d_x, const Batch& batch, const ModelShape& s, Parameters& g) {
  const std::int64_t n = s.positions();
  g[kKeyEmbedding] = Matrix::Zero(s.vocab, s.d_model);
  g[kValueEmbedding] = Matrix::Zero(s.vocab, s.d_model);
  for (std::int64_t b = 0; b < batch.size; ++b) {
    for (std::int64_t j = 0; j < s.n_pairs; ++j) {
      g[kKeyEmbedding].row(batch.keys[b * s.n_pairs + j]) += kPairWeight * d_x.row(b * n + j);
      g[kValueEmbedding].row(batch.values[b * s.n_pairs + j]) += kPairWeight * d_x.row(b * n + j);
    }
    g[kKeyEmbedding].row(batch.key(b)) += d_x.row(b * n + s.n_pairs);
  }
}

// The query positions' rows of x: every positions()-th row, starting at the last.
using QueryRows = Eigen::Map<const Matrix, 0, Eigen::OuterStride<>>;
QueryRows query_rows(const Matrix& x, const ModelShape& s) {
  return QueryRows(x.data() + s.n_pairs * s.d_model, x.rows() / s.positions(), s.d_model,
                   Eigen::OuterStride<>(s.positions() * s.d_model));
}

// Mean cross-entropy of the logits against the batch's targets; writes its gradient.
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

}  // namespace

Parameters initial_parameters(PhiloxStream& rng, const ModelShape& s, const std::string& init) {
  Parameters p;
  p[kKeyEmbedding] = normal_matrix(rng, s.vocab, s.d_model);
  p[kValueEmbedding] = normal_matrix(rng, s.vocab, s.d_model);
  const auto weight = [&](std::int64_t fan_in, std::int64_t fan_out) {
    return from_vector(initial_weights(rng, init, fan_in, fan_out), fan_in, fan_out);
  };
  p[kWQ] = weight(s.d_model, s.width());
  p[kWK] = weight(s.d_model, s.width());
  p[kWV] = weight(s.d_model, s.width());
  p[kWO] = weight(s.width(), s.d_model);
  p[kReadout] = weight(s.d_model, s.vocab);
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

Evaluation evaluate(const Parameters& p, const Batch& batch, const ModelShape& s,
                    const AttentionCore& core, RowProbes* probes) {
  const std::int64_t n = s.positions();
  const Matrix x = embed(p, batch, s);
  const Matrix q = query_rows(x, s) * p[kWQ];
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
  g[kWQ] = query_rows(x, s).transpose() * dq;
  g[kWK] = x.transpose() * dk;
  g[kWV] = x.transpose() * dv;
  if (s.learned_embeddings) {
    Matrix d_x = dk * p[kWK].transpose() + dv * p[kWV].transpose();
    const Matrix d_query = dq * p[kWQ].transpose();
    for (std::int64_t b = 0; b < batch.size; ++b) d_x.row(b * n + s.n_pairs) += d_query.row(b);
    embedding_gradient(d_x, batch, s, g);
  }
  return e;
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
    constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
    Matrix& v = second_moment_.tensor[t];
    m = kBeta1 * m + (1 - kBeta1) * g;
    v = kBeta2 * v + (1 - kBeta2) * g.cwiseAbs2();
    const double m_hat = 1 / (1 - std::pow(kBeta1, double(steps_)));
    const double v_hat = 1 / (1 - std::pow(kBeta2, double(steps_)));
    p.tensor[t].array() -= lr * (m.array() * m_hat) / ((v.array() * v_hat).sqrt() + kEps);
  }
}

}  // namespace sdpa::training
