// Registry entries of the Eigen peer: one per instruction set eigen_product.cpp was compiled
// for (see there), each listed only where this CPU has that set, and `eigen` = the best.
#include <vector>

#include "cached_scratch.hpp"
#include "probe_row.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa::detail {

using EigenRowHook = void (*)(const ForwardArgs&, std::int64_t row, const float* scores,
                              std::int64_t visible);
using EigenForward = void (*)(const ForwardArgs&, EigenRowHook, float* scratch);
#ifdef SDPA_EIGEN_X86
void eigen_forward_avx512(const ForwardArgs& a, EigenRowHook probe_row, float* scratch);
void eigen_forward_avx2(const ForwardArgs& a, EigenRowHook probe_row, float* scratch);
#else
void eigen_forward_baseline(const ForwardArgs& a, EigenRowHook probe_row, float* scratch);
#endif

namespace {

// The layout eigen_product.cpp carves: scores of one K/V head's stacked rows, then shift, l and
// 1/l per row.
std::int64_t eigen_workspace_floats(const Shape& s) { return peer_rows(s) * (s.n_kv + 3); }

// Probes live here, in a baseline translation unit: the ISA copies must not instantiate the
// inline helpers that other units share (see eigen_product.cpp).
void probe_row(const ForwardArgs& a, std::int64_t row, const float* scores, std::int64_t visible) {
  probe_scores(*a.probes, row, scores, visible);
}

// The peer's workspace, one for all its ISA copies.
thread_local CachedScratch t_scratch;

template <EigenForward kForward>
void eigen_forward(const ForwardArgs& a) {
  kForward(a, a.probes ? &probe_row : nullptr, t_scratch.floats(eigen_workspace_floats(a.shape)));
  if (a.probes)
    for (std::int64_t r = 0; r < a.shape.rows(); ++r)
      a.probes->nonfinite[r] += count_nonfinite(a.out + r * a.shape.d_v, a.shape.d_v);
}

Kernel eigen_entry(const char* isa, ForwardFn forward) {
  return {
      .name = std::string("eigen@") + isa,
      .family = "eigen",
      .isa = isa,
      .description = std::string("Eigen products + row softmax, n_q x n_kv per head (") + isa + ")",
      .forward = forward};
}

}  // namespace

std::vector<Kernel> eigen_kernels() {
  std::vector<Kernel> isas;  // best first
#ifdef SDPA_EIGEN_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("fma"))
    isas.push_back(eigen_entry("avx512", &eigen_forward<&eigen_forward_avx512>));
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    isas.push_back(eigen_entry("avx2", &eigen_forward<&eigen_forward_avx2>));
#else
  isas.push_back(eigen_entry("baseline", &eigen_forward<&eigen_forward_baseline>));
#endif
  if (isas.empty()) return {};
  Kernel best = isas.front();
  best.name = "eigen";
  isas.insert(isas.begin(), best);
  return isas;
}

}  // namespace sdpa::detail

double sdpa::eigen_workspace_bytes(const Shape& s) {
  return sizeof(float) * double(detail::eigen_workspace_floats(s));
}
