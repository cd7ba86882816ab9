// Each variant file contributes its registry entries here; registry.cpp lists them in ladder
// order. Adding a kernel means adding a file and one line in each of these two places.
// A family returns only the entries this CPU can run (Highway targets it supports, Eigen copies
// whose instruction set it has).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sdpa/kernels.hpp"

namespace sdpa::detail {
std::vector<Kernel> reference_kernels();
std::vector<Kernel> naive_kernels();
std::vector<Kernel> blocked_kernels();
std::vector<Kernel> simd_kernels();
std::vector<Kernel> flash_kernels();
std::vector<Kernel> flash_bf16_kernels();
std::vector<Kernel> flash_kv_kernels();
std::vector<Kernel> flash_kv_int8_kernels();
std::vector<Kernel> eigen_kernels();
std::vector<Kernel> blas_kernels();
std::vector<Kernel> ggml_kernels();  // none when the build has no ggml (cmake/ggml.cmake)
// The names of entries a peer would register in a build made with it, and why this build was
// made without it (none when it was): kernel_elsewhere's second case.
struct AbsentKernel {
  std::string name, why;
};
std::vector<AbsentKernel> ggml_absent_kernels();
// The fused backward of flash compiled for `isa` (a Highway target's name), null if none.
BackwardFn flash_backward_fn(std::string_view isa);
// What flash's backward allocates on `threads` threads: every query block packed once per call
// (Q and dO in blocks of whole query tiles), one part of dQ per key range, and each thread's
// tile scratch.
double flash_backward_workspace_bytes(const Shape& shape, int threads);
// flash-bf16's native backward (vdpbf16ps) compiled for Highway target `target`, null where
// that target has none; and what it allocates in all: flash's backward's, and its operands laid
// out as its products read them.
BackwardFn flash_bf16_native_backward(std::int64_t target);
double flash_bf16_backward_workspace_bytes(const Shape& shape, int threads);
}  // namespace sdpa::detail
