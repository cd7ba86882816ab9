// Naming Highway targets and reaching one target's copy of an exported function, so a rung can
// register an entry per instruction set (simd@avx2, simd@avx512, ...) besides the best one.
// Include after hwy/highway.h, from the HWY_ONCE part of a foreach_target translation unit.
// Every such unit of sdpa_kernels is compiled with the same HWY_DISABLED_TARGETS (CMake), so
// HWY_TARGETS, which these inline functions read, is the same in all of them.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "hwy/highway.h"
#include "hwy/targets.h"
#include "sdpa/kernels.hpp"

namespace sdpa::detail {

// The suite's ISA names: avx512 (Highway's AVX3), avx512-dl (AVX3_DL), avx2, sse4, scalar
// (Highway's EMU128/SCALAR fallback), sve-256 and sve2-128 (SVE at 256 bits, e.g. Neoverse V1;
// SVE2 at 128 bits, e.g. Neoverse N2 and V2); other targets by Highway's name in lower case
// (neon, ...).
inline std::string isa_name(std::int64_t target) {
  switch (target) {
    case HWY_AVX3:
      return "avx512";
    case HWY_AVX3_DL:
      return "avx512-dl";
    case HWY_SVE_256:
      return "sve-256";
    case HWY_SVE2_128:
      return "sve2-128";
    case HWY_EMU128:
    case HWY_SCALAR:
      return "scalar";
    default:
      break;
  }
  std::string name = hwy::TargetName(target);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

inline bool is_fallback_target(std::int64_t target) {
  return target == HWY_EMU128 || target == HWY_SCALAR;
}

template <class Fn>
struct TargetFn {
  std::int64_t target;
  std::string isa;
  Fn fn;
};

// Each target compiled into HWY_EXPORT's table that this CPU supports, best first, with that
// target's copy of the function. hwy::ChosenTarget maps a target to its slot in the table the
// same way HWY_DYNAMIC_DISPATCH does for the best one.
template <class Fn, std::size_t N>
std::vector<TargetFn<Fn>> supported_targets(Fn const (&table)[N]) {
  std::vector<TargetFn<Fn>> out;
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::ChosenTarget chosen;
    chosen.Update(target);
    out.push_back({target, isa_name(target), table[chosen.GetIndex()]});
  }
  return out;
}

// The registry entries of a Highway rung: `family` on the best target, then `family@isa` for
// each SIMD target, so instruction sets can be compared on one machine. The scalar fallback
// gets an entry of its own only where no SIMD target runs.
inline std::vector<Kernel> per_target_kernels(const std::string& family,
                                              const std::string& description,
                                              const std::vector<TargetFn<ForwardFn>>& targets,
                                              WorkspaceFn workspace) {
  std::vector<Kernel> out;
  for (const auto& t : targets) {
    if (is_fallback_target(t.target) && !out.empty()) continue;
    Kernel k{.name = family + "@" + t.isa,
             .family = family,
             .isa = t.isa,
             .description = description + " (" + t.isa + ")",
             .forward = t.fn,
             .workspace = workspace};
    if (out.empty()) {  // the best target comes first
      Kernel best = k;
      best.name = family;
      out.push_back(best);
    }
    if (!is_fallback_target(t.target)) out.push_back(k);
  }
  return out;
}

// Makes the entry of a micro-kernel written for one instruction set (chosen by CPUID: flash-bf16's
// vdpbf16ps) the family's best: the first entry becomes it under the family's name, and
// family@isa follows it.
inline void put_native_first(std::vector<Kernel>& entries, const std::string& isa,
                             const std::string& description, ForwardFn forward) {
  Kernel k = entries.front();
  k.name = k.family + "@" + isa;
  k.isa = isa;
  k.description = description;
  k.forward = forward;
  entries.front() = k;
  entries.front().name = k.family;
  entries.insert(entries.begin() + 1, k);
}

}  // namespace sdpa::detail
