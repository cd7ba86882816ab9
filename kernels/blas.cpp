// The "blas" peer, as a BLAS user writes attention: S = s Q K^T and O = P V with OpenBLAS's
// cblas_sgemm, a plain row softmax between them. Materialises n_q x n_kv scores per head.
// OpenBLAS picks its own kernels for the CPU (isa "openblas") and runs a.threads threads.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "probe_row.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa {
namespace {

template <bool kProbe>
void blas_forward(const ForwardArgs& a) {
  const Shape& s = a.shape;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  openblas_set_num_threads(a.threads);
  std::vector<float> p(s.n_q * s.n_kv), l(s.n_q);
  for (std::int64_t b = 0; b < s.batch_heads; ++b) {
    const float* q = a.q + b * s.n_q * s.d_k;
    const float* k = a.k + b * s.n_kv * s.d_k;
    const float* v = a.v + b * s.n_kv * s.d_v;
    float* out = a.out + b * s.n_q * s.d_v;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(s.n_q), int(s.n_kv), int(s.d_k),
                a.scale, q, int(s.d_k), k, int(s.d_k), 0.0f, p.data(), int(s.n_kv));
#pragma omp parallel for num_threads(a.threads) schedule(static)
    for (std::int64_t i = 0; i < s.n_q; ++i) {
      float* row = p.data() + i * s.n_kv;
      const std::int64_t visible = visible_keys(s, a.causal, i);
      if constexpr (kProbe) detail::probe_scores(*a.probes, b * s.n_q + i, row, visible);
      const float m = visible ? *std::max_element(row, row + visible) : 0.0f;
      float sum = 0;
      for (std::int64_t j = 0; j < visible; ++j) sum += row[j] = std::exp(row[j] - m);
      std::fill(row + visible, row + s.n_kv, 0.0f);
      l[i] = sum;
      if (a.lse) a.lse[b * s.n_q + i] = visible ? m + std::log(sum) : -kInf;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(s.n_q), int(s.d_v), int(s.n_kv),
                1.0f, p.data(), int(s.n_kv), v, int(s.d_v), 0.0f, out, int(s.d_v));
    for (std::int64_t i = 0; i < s.n_q; ++i) {
      const float inv = l[i] > 0 ? 1.0f / l[i] : 0.0f;
      for (std::int64_t c = 0; c < s.d_v; ++c) out[i * s.d_v + c] *= inv;
      if constexpr (kProbe)
        a.probes->nonfinite[b * s.n_q + i] += detail::count_nonfinite(out + i * s.d_v, s.d_v);
    }
  }
}

void blas_dispatch(const ForwardArgs& a) {
  if (a.probes)
    blas_forward<true>(a);
  else
    blas_forward<false>(a);
}

// The n_q x n_kv probabilities (one matrix, reused for every head) and the row sums. OpenBLAS's
// own buffers are allocated once, when the library starts, not per call.
double blas_workspace(const Shape& s, Pass, int) {
  return 4.0 * double(s.n_q) * double(s.n_kv + 1);
}

}  // namespace

std::vector<Kernel> detail::blas_kernels() {
  return {{.name = "blas",
           .family = "blas",
           .isa = "openblas",
           .description = "OpenBLAS cblas_sgemm products + row softmax, n_q x n_kv per head",
           .forward = &blas_dispatch,
           .workspace = &blas_workspace,
           .same_bits_on_any_threads = false}};
}

}  // namespace sdpa
