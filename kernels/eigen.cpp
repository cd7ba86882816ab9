// Registry entries of the Eigen peer: one per instruction set eigen_product.cpp was compiled
// for (see there), each listed only where this CPU has that set, and `eigen` = the best.
#include <array>
#include <iterator>
#include <utility>
#include <vector>

#include "cached_scratch.hpp"
#include "hwy/targets.h"
#include "probe_row.hpp"
#include "registry_entries.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa::detail {

// A row's steps between the products, in this baseline unit (eigen_product.cpp says why).
struct EigenRowHooks {
  KeyRange (*logits)(const ForwardArgs&, std::int64_t row, float* scores, float& sink);
  void (*probe)(const ForwardArgs&, std::int64_t row, const float* scores, std::int64_t n,
                float sink);  // null: no probes
};
using EigenForward = void (*)(const ForwardArgs&, const EigenRowHooks&, float* scratch);

// A copy of eigen_product.cpp and the Highway target whose instructions it may use: the copy
// runs where Highway says the CPU supports that target (0: the baseline, runs everywhere).
struct EigenCopy {
  const char* isa;
  std::int64_t hwy_target;
  EigenForward forward;
};

// The copies kernels/CMakeLists.txt compiles for this architecture, best first.
#if HWY_ARCH_X86_64
void eigen_forward_avx512(const ForwardArgs& a, const EigenRowHooks& hooks, float* scratch);
void eigen_forward_avx2(const ForwardArgs& a, const EigenRowHooks& hooks, float* scratch);
constexpr EigenCopy kEigenCopies[] = {{"avx512", HWY_AVX3, &eigen_forward_avx512},
                                      {"avx2", HWY_AVX2, &eigen_forward_avx2}};
#elif HWY_ARCH_ARM_A64
void eigen_forward_neon(const ForwardArgs& a, const EigenRowHooks& hooks, float* scratch);
constexpr EigenCopy kEigenCopies[] = {{"neon", 0, &eigen_forward_neon}};
#else
void eigen_forward_baseline(const ForwardArgs& a, const EigenRowHooks& hooks, float* scratch);
constexpr EigenCopy kEigenCopies[] = {{"baseline", 0, &eigen_forward_baseline}};
#endif

namespace {

// The layout eigen_product.cpp carves: scores of one K/V head's stacked rows, then shift, l,
// 1/l, the sink and an empty row's lse per row.
std::int64_t eigen_workspace_floats(const Shape& s) { return peer_rows(s) * (s.n_kv + 5); }

// Probes live here, in a baseline translation unit: the ISA copies must not instantiate the
// inline helpers that other units share (see eigen_product.cpp).
void probe_row(const ForwardArgs& a, std::int64_t row, const float* scores, std::int64_t n,
               float sink) {
  probe_scores(*a.probes, row, scores, n, sink);
}

// The peer's workspace, one for all its ISA copies.
thread_local CachedScratch t_scratch;

template <std::size_t kCopy>
void eigen_forward(const ForwardArgs& a) {
  const EigenRowHooks hooks{&logits_in_place, a.probes ? &probe_row : nullptr};
  kEigenCopies[kCopy].forward(a, hooks, t_scratch.floats(eigen_workspace_floats(a.shape)));
  if (a.probes)
    for (std::int64_t r = 0; r < a.shape.rows(); ++r)
      a.probes->nonfinite[r] += count_nonfinite(a.out + r * a.shape.d_v, a.shape.d_v);
}

template <std::size_t... I>
constexpr std::array<ForwardFn, sizeof...(I)> eigen_forwards(std::index_sequence<I...>) {
  return {&eigen_forward<I>...};
}

// The scores of one K/V head's stacked rows and three vectors of as many rows, kept between
// calls of one shape (cached_scratch.hpp); Eigen's GEMM packing buffers, bounded by its cache
// blocking, are not counted.
double eigen_workspace(const Shape& s, Pass, int) {
  return sizeof(float) * double(eigen_workspace_floats(s));
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
             std::string("Eigen products + row softmax, scores of one K/V head at a time (") +
             copy.isa + ")",
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
