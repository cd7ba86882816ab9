// The registry entries the kernel tests check. Each function once: a best-target alias
// ("flash") runs the same function as its "flash@<isa>" entry, which is checked under that
// name. And the emulated SVE runs exist for that ISA's code paths: tests/CMakeLists.txt sets
// SDPA_ONLY_ISA for them, and they check its entries only. The NEON run of the same build sets
// no filter and checks every entry its CPU runs (the scalar rungs, the NEON entries, Eigen and
// OpenBLAS). The filter is not SDPA_EXPECT_ISA, which every arm64 run sets (the preset's "neon"
// included) to say which best target the run expects.
#pragma once

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "sdpa/kernels.hpp"

inline bool is_best_alias(const sdpa::Kernel& k) {
  if (k.name.find('@') != std::string::npos) return false;
  for (const auto& e : sdpa::kernel_registry())
    if (&e != &k && e.forward == k.forward && e.isa == k.isa &&
        e.name.find('@') != std::string::npos)
      return true;
  return false;
}

inline std::vector<std::reference_wrapper<const sdpa::Kernel>> kernels_under_test() {
  const char* only_isa = std::getenv("SDPA_ONLY_ISA");
  std::vector<std::reference_wrapper<const sdpa::Kernel>> out;
  for (const auto& k : sdpa::kernel_registry())
    if (!is_best_alias(k) && (only_isa == nullptr || k.isa == only_isa)) out.push_back(k);
  return out;
}
