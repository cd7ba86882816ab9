// Registry entries of the Eigen peer: one per instruction set eigen_product.cpp was compiled
// for (see there), each listed only where this CPU has that set, and `eigen` = the best.
#include <array>
#include <iterator>
#include <utility>
#include <vector>

#include "hwy/targets.h"
#include "probe_row.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa::detail {

using EigenRowHook = void (*)(const ForwardArgs&, std::int64_t row, const float* scores,
                              std::int64_t visible);
using EigenForward = void (*)(const ForwardArgs&, EigenRowHook);

// A copy of eigen_product.cpp and the Highway target whose instructions it may use: the copy
// runs where Highway says the CPU supports that target (0: the baseline, runs everywhere).
struct EigenCopy {
  const char* isa;
  std::int64_t hwy_target;
  EigenForward forward;
};

// The copies kernels/CMakeLists.txt compiles for this architecture, best first.
#if HWY_ARCH_X86_64
void eigen_forward_avx512(const ForwardArgs& a, EigenRowHook probe_row);
void eigen_forward_avx2(const ForwardArgs& a, EigenRowHook probe_row);
constexpr EigenCopy kEigenCopies[] = {{"avx512", HWY_AVX3, &eigen_forward_avx512},
                                      {"avx2", HWY_AVX2, &eigen_forward_avx2}};
#elif HWY_ARCH_ARM_A64
void eigen_forward_neon(const ForwardArgs& a, EigenRowHook probe_row);
constexpr EigenCopy kEigenCopies[] = {{"neon", 0, &eigen_forward_neon}};
#else
void eigen_forward_baseline(const ForwardArgs& a, EigenRowHook probe_row);
constexpr EigenCopy kEigenCopies[] = {{"baseline", 0, &eigen_forward_baseline}};
#endif

namespace {

// Probes live here, in a baseline translation unit: the ISA copies must not instantiate the
// inline helpers that other units share (see eigen_product.cpp).
void probe_row(const ForwardArgs& a, std::int64_t row, const float* scores, std::int64_t visible) {
  probe_scores(*a.probes, row, scores, visible);
}

template <std::size_t kCopy>
void eigen_forward(const ForwardArgs& a) {
  kEigenCopies[kCopy].forward(a, a.probes ? &probe_row : nullptr);
  if (a.probes)
    for (std::int64_t r = 0; r < a.shape.rows(); ++r)
      a.probes->nonfinite[r] += count_nonfinite(a.out + r * a.shape.d_v, a.shape.d_v);
}

template <std::size_t... I>
constexpr std::array<ForwardFn, sizeof...(I)> eigen_forwards(std::index_sequence<I...>) {
  return {&eigen_forward<I>...};
}

// The n_q x n_kv score matrix (one, reused for every head) and three vectors of n_q; Eigen's
// GEMM packing buffers, bounded by its cache blocking, are not counted.
double eigen_workspace(const Shape& s, Pass, int) {
  return 4.0 * double(s.n_q) * double(s.n_kv + 3);
}

}  // namespace

std::vector<Kernel> eigen_kernels() {
  static constexpr auto kForwards =
      eigen_forwards(std::make_index_sequence<std::size(kEigenCopies)>());
  std::vector<Kernel> isas;  // best first
  for (std::size_t i = 0; i < std::size(kEigenCopies); ++i) {
    const EigenCopy& copy = kEigenCopies[i];
    if (copy.hwy_target != 0 && (hwy::SupportedTargets() & copy.hwy_target) == 0) continue;
    isas.push_back(
        {.name = std::string("eigen@") + copy.isa,
         .family = "eigen",
         .isa = copy.isa,
         .description =
             std::string("Eigen products + row softmax, n_q x n_kv per head (") + copy.isa + ")",
         .forward = kForwards[i],
         .workspace = &eigen_workspace,
         .same_bits_on_any_threads = false});
  }
  if (isas.empty()) return {};
  Kernel best = isas.front();
  best.name = "eigen";
  isas.insert(isas.begin(), best);
  return isas;
}

}  // namespace sdpa::detail
