// Each variant file contributes its registry entries here; registry.cpp lists them in ladder
// order. Adding a kernel means adding a file and one line in each of these two places.
#pragma once

#include <vector>

#include "sdpa/kernels.hpp"

namespace sdpa::detail {
std::vector<Kernel> reference_kernels();
std::vector<Kernel> naive_kernels();
}  // namespace sdpa::detail
