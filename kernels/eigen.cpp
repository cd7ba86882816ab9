// Registry entries of the Eigen peer: one per instruction set eigen_product.cpp was compiled
// for (see there), each listed only where this CPU has that set, and `eigen` = the best.
#include <vector>

#include "probe_row.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa::detail {

using EigenRowHook = void (*)(const ForwardArgs&, std::int64_t row, const float* scores,
                              std::int64_t visible);
#ifdef SDPA_EIGEN_X86
void eigen_forward_avx512(const ForwardArgs& a, EigenRowHook probe_row);
void eigen_forward_avx2(const ForwardArgs& a, EigenRowHook probe_row);
#else
void eigen_forward_baseline(const ForwardArgs& a, EigenRowHook probe_row);
#endif

namespace {

// Probes live here, in a baseline translation unit: the ISA copies must not instantiate the
// inline helpers that other units share (see eigen_product.cpp).
void probe_row(const ForwardArgs& a, std::int64_t row, const float* scores, std::int64_t visible) {
  probe_scores(*a.probes, row, scores, visible);
}

template <void (*kForward)(const ForwardArgs&, EigenRowHook)>
void eigen_forward(const ForwardArgs& a) {
  kForward(a, a.probes ? &probe_row : nullptr);
  if (a.probes)
    for (std::int64_t r = 0; r < a.shape.rows(); ++r)
      a.probes->nonfinite[r] += count_nonfinite(a.out + r * a.shape.d_v, a.shape.d_v);
}

// The n_q x n_kv score matrix (one, reused for every head) and three vectors of n_q; Eigen's
// GEMM packing buffers, bounded by its cache blocking, are not counted.
double eigen_workspace(const Shape& s, Pass, int) {
  return 4.0 * double(s.n_q) * double(s.n_kv + 3);
}

Kernel eigen_entry(const char* isa, ForwardFn forward) {
  return {
      .name = std::string("eigen@") + isa,
      .family = "eigen",
      .isa = isa,
      .description = std::string("Eigen products + row softmax, n_q x n_kv per head (") + isa + ")",
      .forward = forward,
      .workspace = &eigen_workspace,
      .same_bits_on_any_threads = false};
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
