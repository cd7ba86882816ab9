// The "blas" peer, as a BLAS user writes attention: S = s Q K^T and O = P V with OpenBLAS's
// cblas_sgemm, a plain row softmax between them (the mask and score modifiers applied to the
// materialised scores, detail::logits_in_place). Materialises the scores of one K/V head at a
// time: the query rows of its group's heads are stacked into one product, and the scores live
// in cached scratch (cached_scratch.hpp). OpenBLAS picks its own kernels for the CPU (isa
// "openblas") and runs a.threads threads.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cached_scratch.hpp"
#include "probe_row.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa {
namespace {

// The scores of one K/V head's stacked rows, then l per row.
std::int64_t blas_workspace_floats(const Shape& s) { return detail::peer_rows(s) * (s.n_kv + 1); }

thread_local detail::CachedScratch t_scratch;

template <bool kProbe>
void blas_forward(const ForwardArgs& a) {
  const Shape& s = a.shape;
  const std::int64_t rows = detail::peer_rows(s);
  openblas_set_num_threads(a.threads);
  float* const p = t_scratch.floats(blas_workspace_floats(s));
  float* const l = p + rows * s.n_kv;
  for (std::int64_t kv = 0; kv < s.kv_batch_heads(); ++kv) {
    const float* q = a.q + kv * rows * s.d_k;
    const float* k = a.k + kv * s.n_kv * s.d_k;
    const float* v = a.v + kv * s.n_kv * s.d_v;
    float* out = a.out + kv * rows * s.d_v;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(s.n_kv), int(s.d_k),
                a.scale, q, int(s.d_k), k, int(s.d_k), 0.0f, p, int(s.n_kv));
#pragma omp parallel for num_threads(a.threads) schedule(static)
    for (std::int64_t i = 0; i < rows; ++i) {
      float* row = p + i * s.n_kv;
      float sink;
      const KeyRange keys = detail::logits_in_place(a, kv * rows + i, row, sink);
      const std::int64_t n = keys.size();
      if constexpr (kProbe)
        detail::probe_scores(*a.probes, kv * rows + i, row + keys.begin, n, sink);
      const float m = n ? std::max(sink, *std::max_element(row + keys.begin, row + keys.end)) : 0;
      float sum = n ? std::exp(sink - m) : 0.0f;
      for (std::int64_t j = keys.begin; j < keys.end; ++j) sum += row[j] = std::exp(row[j] - m);
      std::fill(row, row + keys.begin, 0.0f);
      std::fill(row + keys.begin + n, row + s.n_kv, 0.0f);
      l[i] = sum;
      // A row that sees no key: output 0, lse the sink's (-inf without one).
      if (a.lse) a.lse[kv * rows + i] = n ? m + std::log(sum) : sink;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(s.d_v), int(s.n_kv), 1.0f,
                p, int(s.n_kv), v, int(s.d_v), 0.0f, out, int(s.d_v));
    for (std::int64_t i = 0; i < rows; ++i) {
      const float inv = l[i] > 0 ? 1.0f / l[i] : 0.0f;
      for (std::int64_t c = 0; c < s.d_v; ++c) out[i * s.d_v + c] *= inv;
      if constexpr (kProbe)
        a.probes->nonfinite[kv * rows + i] += detail::count_nonfinite(out + i * s.d_v, s.d_v);
    }
  }
}

void blas_dispatch(const ForwardArgs& a) {
  if (a.probes)
    blas_forward<true>(a);
  else
    blas_forward<false>(a);
}

// The probabilities of one K/V head's stacked rows and their sums, kept between calls of one
// shape (cached_scratch.hpp). OpenBLAS's own buffers are allocated once, when the library
// starts, not per call.
double blas_workspace(const Shape& s, Pass, int) {
  return sizeof(float) * double(blas_workspace_floats(s));
}

}  // namespace

std::vector<Kernel> detail::blas_kernels() {
  return {{.name = "blas",
           .family = "blas",
           .isa = "openblas",
           .description =
               "OpenBLAS cblas_sgemm products + row softmax, scores of one K/V head at a time",
           .forward = &blas_dispatch,
           .workspace = &blas_workspace,
           .same_bits_on_any_threads = false}};
}

}  // namespace sdpa
