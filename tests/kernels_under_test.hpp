// The registry entries the kernel tests check. Each function once: a best-target alias
// ("flash") runs the same function as its "flash@<isa>" entry, which is checked under that
// name. And the emulated SVE runs (tests/CMakeLists.txt sets SDPA_EXPECT_ISA for them) exist
// for that ISA's code paths: they check its entries only. The NEON run of the same build checks
// the others (the scalar rungs, the NEON entries, Eigen and OpenBLAS).
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
  const char* only_isa = std::getenv("SDPA_EXPECT_ISA");
  std::vector<std::reference_wrapper<const sdpa::Kernel>> out;
  for (const auto& k : sdpa::kernel_registry())
    if (!is_best_alias(k) && (only_isa == nullptr || k.isa == only_isa)) out.push_back(k);
  return out;
}
