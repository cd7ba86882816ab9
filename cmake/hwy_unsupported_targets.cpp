// Prints "|HWY_<target>" for each Highway target the compiler can build and this host cannot
// run; kernels/CMakeLists.txt adds them to the sanitize build's HWY_DISABLED_TARGETS.
#define HWY_COMPILE_ALL_ATTAINABLE
#include <cstdint>
#include <cstdio>

#include "hwy/targets.h"

int main() {
  const std::int64_t unsupported = HWY_TARGETS & ~hwy::SupportedTargets();
  for (int bit = 0; bit < 63; ++bit)
    if (const std::int64_t target = std::int64_t{1} << bit; unsupported & target)
      std::printf("|HWY_%s", hwy::TargetName(target));
  return 0;
}
