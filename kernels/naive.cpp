// Rung 1: fp32 loops as a textbook writes them. One row of scores at a time, dot products in
// the order written, softmax with or without max subtraction. Slow on purpose: the baseline
// that every faster rung must match.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "probe_row.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa {
namespace {

// kStable = false is the beginner's softmax, exp(s) / sum exp(s): it overflows to inf (and the
// weights to NaN) once a logit (or the sink) passes ~88.7 in fp32. Kept for the overflow study.
// Each row's logits and sink come from sdpa/mask.hpp's RowLogits over the keys its mask shows.
template <bool kStable, bool kProbe>
void naive_forward(const ForwardArgs& a) {
  const Shape& s = a.shape;
  std::vector<float> p(s.n_kv);
#pragma omp parallel for num_threads(a.threads) firstprivate(p) schedule(static)
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t kv = s.kv_head(r / s.n_q), i = r % s.n_q;
    const KeyRange keys = a.mask.visible(s, i);
    const std::int64_t first = keys.begin, n = keys.size();
    const RowLogits row = row_logits(s, a.score_mod, a.scale, r / s.n_q, i);
    const float* q = a.q + r * s.d_k;
    const float* k = a.k + (kv * s.n_kv + first) * s.d_k;
    const float* v = a.v + (kv * s.n_kv + first) * s.d_v;
    float* o = a.out + r * s.d_v;

    float m = row.sink;
    for (std::int64_t j = 0; j < n; ++j) {
      float dot = 0;
      for (std::int64_t c = 0; c < s.d_k; ++c) dot += q[c] * k[j * s.d_k + c];
      p[j] = row.logit(dot, first + j);
      m = std::max(m, p[j]);
    }
    if constexpr (kProbe) detail::probe_scores(*a.probes, r, p.data(), n, row.sink);
    const float shift = kStable ? m : 0.0f;
    float l = std::exp(row.sink - shift);
    for (std::int64_t j = 0; j < n; ++j) {
      p[j] = std::exp(p[j] - shift);
      l += p[j];
    }
    for (std::int64_t c = 0; c < s.d_v; ++c) o[c] = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const float w = p[j] / l;
      for (std::int64_t c = 0; c < s.d_v; ++c) o[c] += w * v[j * s.d_v + c];
    }
    // A row that sees no key: output 0, lse the sink's (-inf without one).
    if (a.lse) a.lse[r] = n ? shift + std::log(l) : row.sink;
    if constexpr (kProbe) {
      // What the beginner's softmax actually produced: inf / inf weights and NaN outputs.
      for (std::int64_t j = 0; j < n; ++j) p[j] /= l;
      a.probes->nonfinite[r] +=
          detail::count_nonfinite(p.data(), n) + detail::count_nonfinite(o, s.d_v);
    }
  }
}

// The textbook backward in fp32, one K/V head per thread (dK and dV sum over the rows of every
// query head of its group, in order). Weights are recomputed from the forward's lse,
// p_j = exp(z_j - lse) with z_j the logit, instead of being stored, and rowsum(P o dP) is
// dO_i . O_i from the forward's output. dS passes through the soft-cap's 1 - tanh^2 and the
// row's scale (times its temperature); a sink's gradient is -p_sink dO_i . O_i.
template <bool kProbe>
void naive_backward_impl(const BackwardArgs& a) {
  const Shape& s = a.shape;
  std::vector<float> ds(s.n_kv);
#pragma omp parallel for num_threads(a.threads) firstprivate(ds) schedule(static)
  for (std::int64_t kv = 0; kv < s.kv_batch_heads(); ++kv) {
    float* dk = a.d_k + kv * s.n_kv * s.d_k;
    float* dv = a.d_v + kv * s.n_kv * s.d_v;
    std::fill(dk, dk + s.n_kv * s.d_k, 0.0f);
    std::fill(dv, dv + s.n_kv * s.d_v, 0.0f);
    for (std::int64_t r = kv * s.group * s.n_q; r < (kv + 1) * s.group * s.n_q; ++r) {
      const std::int64_t i = r % s.n_q;
      const KeyRange keys = a.mask.visible(s, i);
      const std::int64_t first = keys.begin, n = keys.size();
      const RowLogits row = row_logits(s, a.score_mod, a.scale, r / s.n_q, i);
      const float* k = a.k + (kv * s.n_kv + first) * s.d_k;
      const float* v = a.v + (kv * s.n_kv + first) * s.d_v;
      float* dkj = dk + first * s.d_k;
      float* dvj = dv + first * s.d_v;
      const float* q = a.q + r * s.d_k;
      const float* dout = a.d_out + r * s.d_v;
      const float* o = a.out + r * s.d_v;
      float* dq = a.d_q + r * s.d_k;
      float d = 0;
      for (std::int64_t c = 0; c < s.d_v; ++c) d += dout[c] * o[c];
      for (std::int64_t c = 0; c < s.d_k; ++c) dq[c] = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        float dot = 0, dp = 0;
        for (std::int64_t c = 0; c < s.d_k; ++c) dot += q[c] * k[j * s.d_k + c];
        const float capped = row.cap(row.scale * dot);
        const float p = std::exp(capped + row.bias<float>(first + j) - a.lse[r]);
        for (std::int64_t c = 0; c < s.d_v; ++c) {
          dp += dout[c] * v[j * s.d_v + c];
          dvj[j * s.d_v + c] += p * dout[c];
        }
        ds[j] = p * (dp - d) * row.cap_derivative(capped);
        for (std::int64_t c = 0; c < s.d_k; ++c) {
          dq[c] += row.scale * ds[j] * k[j * s.d_k + c];
          dkj[j * s.d_k + c] += row.scale * ds[j] * q[c];
        }
      }
      if constexpr (kProbe) detail::probe_gradients(*a.probes, r, ds.data(), n);
    }
  }
  if (!a.d_sinks || a.score_mod.sinks.empty()) return;
  // The sinks' gradients, -p_sink dO_i . O_i summed over rows in order after the heads: the
  // same bits on any thread count.
  const std::size_t sinks = a.score_mod.sinks.size();
  std::fill(a.d_sinks, a.d_sinks + sinks, 0.0f);
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const float sink = a.score_mod.sinks[(r / s.n_q) % sinks];
    if (!std::isfinite(sink)) continue;
    float d = 0;
    for (std::int64_t c = 0; c < s.d_v; ++c) d += a.d_out[r * s.d_v + c] * a.out[r * s.d_v + c];
    a.d_sinks[(r / s.n_q) % sinks] -= std::exp(sink - a.lse[r]) * d;
  }
}

void naive_backward(const BackwardArgs& a) {
  if (a.probes)
    naive_backward_impl<true>(a);
  else
    naive_backward_impl<false>(a);
}

template <bool kStable>
void naive_dispatch(const ForwardArgs& a) {
  if (a.probes)
    naive_forward<kStable, true>(a);
  else
    naive_forward<kStable, false>(a);
}

// One row of scores (or of dS) per thread, and the master's copy OpenMP's firstprivate starts from.
double naive_workspace(const Shape& s, Pass, int threads) {
  return 4.0 * double(threads + 1) * double(s.n_kv);
}

}  // namespace

std::vector<Kernel> detail::naive_kernels() {
  return {{.name = "naive",
           .family = "naive",
           .isa = "scalar",
           .description = "fp32 textbook loops, one row of scores, max-subtracted softmax",
           .forward = &naive_dispatch<true>,
           .backward = &naive_backward,
           .workspace = &naive_workspace},
          {.name = "naive-unstable",
           .family = "naive",
           .isa = "scalar",
           .description = "naive with exp(s)/sum exp(s), no max subtraction (overflow study)",
           .forward = &naive_dispatch<false>,
           .unstable_softmax = true,
           .workspace = &naive_workspace}};
}

}  // namespace sdpa
