// The fused backward of the flash rung: probabilities are recomputed from the forward's row
// log-sum-exp, p_ij = e^{s_ij - lse_i}, so nothing of size n_q x n_kv is ever stored. Two
// passes keep every output written by one thread (bit-identical on any thread count, no
// atomics): keys in blocks produce dK and dV, query rows produce dQ (and the probes).
// Each pass recomputes the scores and dP = dO V^T it needs.
// Written in plain C++ with `omp simd` loops over d (the baseline ISA's vectors); not yet
// tiled and vectorised with Highway like the forward.
#include <algorithm>
#include <cmath>
#include <vector>

#include "probe_row.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa::detail {
namespace {

constexpr std::int64_t kKeyBlock = 64;

float dot(const float* x, const float* y, std::int64_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t c = 0; c < n; ++c) s += x[c] * y[c];
  return s;
}

// D_i = rowsum(P o dP) = dO_i . O_i, from the forward's output.
std::vector<float> row_dots(const BackwardArgs& a) {
  const Shape& s = a.shape;
  std::vector<float> d(s.rows());
  for (std::int64_t r = 0; r < s.rows(); ++r)
    d[r] = dot(a.d_out + r * s.d_v, a.out + r * s.d_v, s.d_v);
  return d;
}

// dS_ij = p_ij (dP_ij - D_i) for query row r (within head b) and key j.
float score_gradient(const BackwardArgs& a, const std::vector<float>& d, std::int64_t b,
                     std::int64_t r, std::int64_t j, float* p_out) {
  const Shape& s = a.shape;
  const float* k = a.k + (b * s.n_kv + j) * s.d_k;
  const float* v = a.v + (b * s.n_kv + j) * s.d_v;
  const float p = std::exp(a.scale * dot(a.q + r * s.d_k, k, s.d_k) - a.lse[r]);
  *p_out = p;
  return p * (dot(a.d_out + r * s.d_v, v, s.d_v) - d[r]);
}

// Pass 1: each (head, key block) owns its rows of dK and dV.
void keys_pass(const BackwardArgs& a, const std::vector<float>& d) {
  const Shape& s = a.shape;
  const std::int64_t blocks_per_head = (s.n_kv + kKeyBlock - 1) / kKeyBlock;
#pragma omp parallel for num_threads(a.threads) schedule(dynamic, 1)
  for (std::int64_t blk = 0; blk < s.batch_heads * blocks_per_head; ++blk) {
    const std::int64_t b = blk / blocks_per_head, j0 = (blk % blocks_per_head) * kKeyBlock;
    const std::int64_t j1 = std::min(s.n_kv, j0 + kKeyBlock);
    std::fill(a.d_k + (b * s.n_kv + j0) * s.d_k, a.d_k + (b * s.n_kv + j1) * s.d_k, 0.0f);
    std::fill(a.d_v + (b * s.n_kv + j0) * s.d_v, a.d_v + (b * s.n_kv + j1) * s.d_v, 0.0f);
    for (std::int64_t i = 0; i < s.n_q; ++i) {
      const std::int64_t r = b * s.n_q + i, visible = std::min(j1, visible_keys(s, a.causal, i));
      const float* q = a.q + r * s.d_k;
      const float* dout = a.d_out + r * s.d_v;
      for (std::int64_t j = j0; j < visible; ++j) {
        float p;
        const float ds = a.scale * score_gradient(a, d, b, r, j, &p);
        float* dk = a.d_k + (b * s.n_kv + j) * s.d_k;
        float* dv = a.d_v + (b * s.n_kv + j) * s.d_v;
#pragma omp simd
        for (std::int64_t c = 0; c < s.d_k; ++c) dk[c] += ds * q[c];
#pragma omp simd
        for (std::int64_t c = 0; c < s.d_v; ++c) dv[c] += p * dout[c];
      }
    }
  }
}

// Pass 2: each query row owns its dQ row; with probes, its dS row goes through a row buffer
// (O(n_kv) per thread) because participation needs the row's largest |dS| first.
template <bool kProbe>
void queries_pass(const BackwardArgs& a, const std::vector<float>& d) {
  const Shape& s = a.shape;
  std::vector<float> ds_row(kProbe ? s.n_kv : 0);
#pragma omp parallel for num_threads(a.threads) firstprivate(ds_row) schedule(dynamic, 16)
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t b = r / s.n_q, visible = visible_keys(s, a.causal, r % s.n_q);
    float* dq = a.d_q + r * s.d_k;
    std::fill(dq, dq + s.d_k, 0.0f);
    for (std::int64_t j = 0; j < visible; ++j) {
      float p;
      const float ds = score_gradient(a, d, b, r, j, &p);
      const float* k = a.k + (b * s.n_kv + j) * s.d_k;
#pragma omp simd
      for (std::int64_t c = 0; c < s.d_k; ++c) dq[c] += a.scale * ds * k[c];
      if constexpr (kProbe) ds_row[j] = ds;
    }
    if constexpr (kProbe) probe_gradients(*a.probes, r, ds_row.data(), visible);
  }
}

void flash_backward(const BackwardArgs& a) {
  const auto d = row_dots(a);
  keys_pass(a, d);
  if (a.probes)
    queries_pass<true>(a, d);
  else
    queries_pass<false>(a, d);
}

}  // namespace

BackwardFn flash_backward_fn() { return &flash_backward; }

}  // namespace sdpa::detail
