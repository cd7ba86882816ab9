// Eigen's own OpenMP GEMM would split products across threads inside a run; parallelism is
// across runs instead, so each product runs in one fixed order on one thread.
#define EIGEN_DONT_PARALLELIZE
#include "stability_model.hpp"

#include <cmath>
#include <limits>
#include <numbers>

#include "scale.hpp"

namespace sdpa::stability {
namespace {

using training::from_heads;
using training::query_rows;
using training::to_heads;

constexpr double kNormEps = 1e-5;  // PyTorch's LayerNorm default

// LayerNorm without bias over consecutive groups of `group` columns of each row (one group per
// row for the residual stream; one per head for qk_norm), times a gain per column. Keeps what
// the backward needs.
struct Normalized {
  Matrix y, x_hat, inv_sigma;  // inv_sigma: rows x groups
};

Normalized layer_norm(const Matrix& x, const Matrix& gain, std::int64_t group) {
  const std::int64_t groups = x.cols() / group;
  Normalized n;
  n.x_hat.resize(x.rows(), x.cols());
  n.inv_sigma.resize(x.rows(), groups);
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    for (std::int64_t g = 0; g < groups; ++g) {
      const auto segment = x.row(r).segment(g * group, group).array();
      const auto centered = segment - segment.mean();
      const double inv = 1 / std::sqrt(centered.square().mean() + kNormEps);
      n.inv_sigma(r, g) = inv;
      n.x_hat.row(r).segment(g * group, group) = centered * inv;
    }
  n.y = n.x_hat.array().rowwise() * gain.row(0).array();
  return n;
}

// d x from d y; writes d gain. Per group: dx = (dx^ - mean(dx^) - x^ mean(dx^ x^)) / sigma with
// dx^ = dy * gain.
Matrix layer_norm_backward(const Normalized& n, const Matrix& gain, const Matrix& d_y,
                           std::int64_t group, Matrix& d_gain) {
  d_gain = (d_y.array() * n.x_hat.array()).colwise().sum();
  const Matrix d_hat = d_y.array().rowwise() * gain.row(0).array();
  Matrix d_x(d_y.rows(), d_y.cols());
  for (Eigen::Index r = 0; r < d_y.rows(); ++r)
    for (Eigen::Index g = 0; g < n.inv_sigma.cols(); ++g) {
      const auto dh = d_hat.row(r).segment(g * group, group).array();
      const auto xh = n.x_hat.row(r).segment(g * group, group).array();
      d_x.row(r).segment(g * group, group) =
          n.inv_sigma(r, g) * (dh - dh.mean() - xh * (dh * xh).mean());
    }
  return d_x;
}

// GELU, exact form x Phi(x), and its derivative Phi(x) + x phi(x).
Matrix gelu(const Matrix& u) {
  return u.unaryExpr(
      [](double x) { return 0.5 * x * (1 + std::erf(x * std::numbers::sqrt2 / 2)); });
}
Matrix gelu_derivative(const Matrix& u) {
  const double inv_sqrt_2pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;
  return u.unaryExpr([=](double x) {
    return 0.5 * (1 + std::erf(x * std::numbers::sqrt2 / 2)) +
           x * inv_sqrt_2pi * std::exp(-x * x / 2);
  });
}

// Rows of x [sequences * n, d] the block's attention reads out: all, or the query rows (last).
Matrix selected_rows(const Matrix& x, std::int64_t n, bool last) {
  return last ? Matrix(query_rows(x, n)) : x;
}

// Adds d_sel (the selected rows' gradient) into d_x.
void add_selected(Matrix& d_x, const Matrix& d_sel, std::int64_t n, bool last) {
  if (!last) {
    d_x += d_sel;
    return;
  }
  for (Eigen::Index b = 0; b < d_sel.rows(); ++b) d_x.row(b * n + n - 1) += d_sel.row(b);
}

// What one block's backward needs from its forward.
struct BlockTape {
  bool last = false;
  Shape shape;
  Normalized attention_norm, q_norm, k_norm, mlp_norm;
  Matrix h_sel, q, k;  // the rows queries come from; projections before qk_norm
  std::vector<float> q_heads, k_heads, v_heads, out, lse, sinks;
  Matrix a, u, z;  // attention output (before W_O); MLP pre-activation and activation
};

// x [sequences * n, d_model] -> the block's output: all rows, or the query rows for the last.
Matrix block_forward(const Parameters& p, std::int64_t l, const Matrix& x, const StackShape& s,
                     const Core& core, BlockTape& t, AttentionStats* stats) {
  const std::int64_t n = s.positions(), heads = s.base.heads, d_k = s.base.d_k;
  const std::int64_t sequences = x.rows() / n;
  t.last = l == s.layers - 1;
  t.attention_norm = layer_norm(x, p.at(l, kAttentionGain), s.base.d_model);
  const Matrix& h = t.attention_norm.y;
  t.h_sel = selected_rows(h, n, t.last);
  t.q = t.h_sel * p.at(l, kWQ);
  t.k = h * p.at(l, kWK);
  const Matrix v = h * p.at(l, kWV);
  const bool qk_norm = core.scheme == Scheme::qk_norm;
  if (qk_norm) {
    t.q_norm = layer_norm(t.q, p.at(l, kQGain), d_k);
    t.k_norm = layer_norm(t.k, p.at(l, kKGain), d_k);
  }

  const std::int64_t n_q = t.last ? 1 : n;
  t.shape = Shape{sequences * heads, n_q, n, d_k, d_k};
  t.q_heads = to_heads(qk_norm ? t.q_norm.y : t.q, n_q, heads, d_k);
  t.k_heads = to_heads(qk_norm ? t.k_norm.y : t.k, n, heads, d_k);
  t.v_heads = to_heads(v, n, heads, d_k);
  t.out.assign(t.shape.out_elements(), 0);
  t.lse.assign(t.shape.rows(), 0);
  RowProbes probes(stats ? t.shape.rows() : 0);
  ForwardArgs fwd{.shape = t.shape,
                  .q = t.q_heads.data(),
                  .k = t.k_heads.data(),
                  .v = t.v_heads.data(),
                  .out = t.out.data()};
  fwd.lse = t.lse.data(), fwd.mask.causal = true, fwd.probes = stats ? &probes : nullptr;
  fwd.scale = float(scheme_scale(core.scheme, double(d_k), double(n)));
  fwd.score_mod.softcap = float(core.softcap);
  if (core.sink) {
    const Matrix& sink = p.at(l, kSink);
    t.sinks.assign(sink.data(), sink.data() + sink.size());  // one per head: b % heads
    fwd.score_mod.sinks = t.sinks;
  }
  core.kernel->forward(fwd);
  if (stats) *stats = attention_stats(probes, t.lse);

  t.a = from_heads(t.out, n_q, heads, d_k);
  const Matrix x1 = selected_rows(x, n, t.last) + t.a * p.at(l, kWO);
  t.mlp_norm = layer_norm(x1, p.at(l, kMlpGain), s.base.d_model);
  t.u = t.mlp_norm.y * p.at(l, kW1);
  t.z = gelu(t.u);
  return x1 + t.z * p.at(l, kW2);
}

// d(block output) -> d(block input); writes the block's parameter gradients into g.
Matrix block_backward(const Parameters& p, std::int64_t l, const Matrix& d_out, const StackShape& s,
                      const Core& core, const BlockTape& t, Parameters& g) {
  const std::int64_t n = s.positions(), heads = s.base.heads, d_k = s.base.d_k;
  const std::int64_t d_model = s.base.d_model;
  // MLP branch.
  g.at(l, kW2) = t.z.transpose() * d_out;
  const Matrix d_u = (d_out * p.at(l, kW2).transpose()).cwiseProduct(gelu_derivative(t.u));
  g.at(l, kW1) = t.mlp_norm.y.transpose() * d_u;
  const Matrix d_x1 =
      d_out + layer_norm_backward(t.mlp_norm, p.at(l, kMlpGain), d_u * p.at(l, kW1).transpose(),
                                  d_model, g.at(l, kMlpGain));
  // Attention branch.
  g.at(l, kWO) = t.a.transpose() * d_x1;
  const auto d_heads = to_heads(d_x1 * p.at(l, kWO).transpose(), t.shape.n_q, heads, d_k);
  std::vector<float> dq(t.q_heads.size()), dk(t.k_heads.size()), dv(t.v_heads.size());
  BackwardArgs bwd{.shape = t.shape,
                   .q = t.q_heads.data(),
                   .k = t.k_heads.data(),
                   .v = t.v_heads.data(),
                   .out = t.out.data(),
                   .lse = t.lse.data(),
                   .d_out = d_heads.data(),
                   .d_q = dq.data(),
                   .d_k = dk.data(),
                   .d_v = dv.data()};
  bwd.scale = float(scheme_scale(core.scheme, double(d_k), double(n))), bwd.mask.causal = true;
  bwd.score_mod.softcap = float(core.softcap);
  std::vector<float> d_sinks(t.sinks.size(), 0.0f);
  if (core.sink) bwd.score_mod.sinks = t.sinks, bwd.d_sinks = d_sinks.data();
  core.kernel->backward(bwd);
  if (core.sink) {
    g.at(l, kSink).resize(1, heads);
    for (std::int64_t h = 0; h < heads; ++h) g.at(l, kSink)(0, h) = d_sinks[h];
  }
  Matrix grad_q = from_heads(dq, t.shape.n_q, heads, d_k);
  Matrix grad_k = from_heads(dk, n, heads, d_k);
  const Matrix grad_v = from_heads(dv, n, heads, d_k);
  if (core.scheme == Scheme::qk_norm) {
    grad_q = layer_norm_backward(t.q_norm, p.at(l, kQGain), grad_q, d_k, g.at(l, kQGain));
    grad_k = layer_norm_backward(t.k_norm, p.at(l, kKGain), grad_k, d_k, g.at(l, kKGain));
  }
  const Matrix& h = t.attention_norm.y;
  g.at(l, kWQ) = t.h_sel.transpose() * grad_q;
  g.at(l, kWK) = h.transpose() * grad_k;
  g.at(l, kWV) = h.transpose() * grad_v;
  Matrix d_h = grad_k * p.at(l, kWK).transpose() + grad_v * p.at(l, kWV).transpose();
  add_selected(d_h, grad_q * p.at(l, kWQ).transpose(), n, t.last);
  Matrix d_x = layer_norm_backward(t.attention_norm, p.at(l, kAttentionGain), d_h, d_model,
                                   g.at(l, kAttentionGain));
  add_selected(d_x, d_x1, n, t.last);
  return d_x;
}

}  // namespace

std::string_view scheme_name(Scheme s) {
  switch (s) {
    case Scheme::none:
      return "none";
    case Scheme::sqrt_dk:
      return "sqrt_dk";
    case Scheme::dk:
      return "dk";
    case Scheme::log_n:
      return "log_n";
    case Scheme::qk_norm:
      return "qk_norm";
  }
  return "";
}

std::optional<Scheme> parse_scheme(std::string_view name) {
  for (const Scheme s : kSchemes)
    if (scheme_name(s) == name) return s;
  return std::nullopt;
}

double scheme_scale(Scheme s, double d_k, double n_keys) {
  if (s == Scheme::qk_norm) return 1 / std::sqrt(d_k);
  return scale_value(json(std::string(scheme_name(s))), d_k, n_keys);
}

AttentionStats attention_stats(const RowProbes& probes, std::span<const float> lse) {
  AttentionStats stats{-std::numeric_limits<double>::infinity(), probes.pooled().entropy_mean};
  for (std::size_t r = 0; r < lse.size(); ++r) {
    const double m = double(lse[r]) + std::log(probes.max_weight[r]);
    stats.max_logit = std::isfinite(m) && !std::isnan(stats.max_logit)
                          ? std::max(stats.max_logit, m)
                          : std::numeric_limits<double>::quiet_NaN();
  }
  return stats;
}

bool is_sink(std::size_t tensor) {
  return tensor >= kGlobals && PerLayer((tensor - kGlobals) % kPerLayer) == kSink;
}

bool is_gain(std::size_t tensor) {
  if (tensor < kGlobals) return tensor == kFinalGain;
  const auto t = PerLayer((tensor - kGlobals) % kPerLayer);
  return t == kAttentionGain || t == kQGain || t == kKGain || t == kMlpGain;
}

Parameters initial_parameters(PhiloxStream& rng, const StackShape& s, const std::string& init,
                              Scheme scheme, bool sink) {
  const std::int64_t d_model = s.base.d_model, width = s.width();
  Parameters p;
  p.tensor.resize(kGlobals + std::size_t(s.layers) * kPerLayer);
  p[kKeyEmbedding] = training::normal_matrix(rng, s.base.vocab, d_model);
  p[kValueEmbedding] = training::normal_matrix(rng, s.base.vocab, d_model);
  for (std::int64_t l = 0; l < s.layers; ++l) {
    p.at(l, kAttentionGain) = Matrix::Ones(1, d_model);
    p.at(l, kWQ) = training::weight_matrix(rng, init, d_model, width);
    p.at(l, kWK) = training::weight_matrix(rng, init, d_model, width);
    p.at(l, kWV) = training::weight_matrix(rng, init, d_model, width);
    p.at(l, kWO) = training::weight_matrix(rng, init, width, d_model);
    if (scheme == Scheme::qk_norm) {
      p.at(l, kQGain) = Matrix::Ones(1, width);
      p.at(l, kKGain) = Matrix::Ones(1, width);
    }
    p.at(l, kMlpGain) = Matrix::Ones(1, d_model);
    p.at(l, kW1) = training::weight_matrix(rng, init, d_model, s.d_ff);
    p.at(l, kW2) = training::weight_matrix(rng, init, s.d_ff, d_model);
    if (sink) p.at(l, kSink) = Matrix::Zero(1, s.base.heads);
  }
  p[kFinalGain] = Matrix::Ones(1, d_model);
  p[kReadout] = training::weight_matrix(rng, init, d_model, s.base.vocab);
  return p;
}

Evaluation evaluate(const Parameters& p, const Batch& batch, const StackShape& s, const Core& core,
                    bool probe) {
  Evaluation e;
  std::vector<BlockTape> tape(s.layers);
  if (probe) e.attention.resize(s.layers);
  Matrix x = training::embed(p[kKeyEmbedding], p[kValueEmbedding], batch);
  for (std::int64_t l = 0; l < s.layers; ++l)
    x = block_forward(p, l, x, s, core, tape[l], probe ? &e.attention[l] : nullptr);
  const Normalized final_norm = layer_norm(x, p[kFinalGain], s.base.d_model);
  Matrix d_logits;
  e.loss = training::cross_entropy(final_norm.y * p[kReadout], batch, d_logits, e.accuracy);

  Parameters& g = e.gradient;
  g.tensor.resize(p.tensor.size());
  g[kReadout] = final_norm.y.transpose() * d_logits;
  Matrix d_x = layer_norm_backward(final_norm, p[kFinalGain], d_logits * p[kReadout].transpose(),
                                   s.base.d_model, g[kFinalGain]);
  for (std::int64_t l = s.layers - 1; l >= 0; --l)
    d_x = block_backward(p, l, d_x, s, core, tape[l], g);
  g[kKeyEmbedding].resize(s.base.vocab, s.base.d_model);
  g[kValueEmbedding].resize(s.base.vocab, s.base.d_model);
  training::embedding_gradient(d_x, batch, g[kKeyEmbedding], g[kValueEmbedding]);
  return e;
}

AdamW::AdamW(const Parameters& like, double weight_decay) : weight_decay_(weight_decay) {
  for (const Matrix& t : like.tensor) {
    first_moment_.tensor.push_back(Matrix::Zero(t.rows(), t.cols()));
    second_moment_.tensor.push_back(Matrix::Zero(t.rows(), t.cols()));
  }
}

void AdamW::step(Parameters& p, const Parameters& gradient, double learning_rate) {
  ++steps_;
  for (std::size_t t = 0; t < p.tensor.size(); ++t)
    if (p.tensor[t].size() > 0)
      training::adam_update(p.tensor[t], first_moment_.tensor[t], second_moment_.tensor[t],
                            gradient.tensor[t], learning_rate, steps_,
                            is_gain(t) || is_sink(t) ? 0.0 : weight_decay_);
}

}  // namespace sdpa::stability
