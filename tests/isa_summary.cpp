// One line per instruction-set path the suite knows (sdpa/peak.hpp's ISAs): "checked" where this
// host runs it, with the registry entries the kernel tests (which check every entry this host
// registers, tests/kernels_under_test.hpp) ran on it; "not available on this host" elsewhere, so
// a test log says which native paths were verified and which were not. `make test` prints it last.
#include <cstdio>
#include <string>

#include "kernels_under_test.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/peak.hpp"

int main() {
  std::printf("ISA paths of the kernel tests on this host:\n");
  for (const std::string& isa : sdpa::peak::known_isas()) {
    std::string entries;
    int count = 0;
    for (const auto& k : sdpa::kernel_registry())
      if (k.isa == isa && !is_best_alias(k) && count++ < 4)
        entries += (entries.empty() ? "" : ", ") + k.name;
    if (count > 4) entries += ", ... (" + std::to_string(count) + " entries)";
    if (sdpa::peak::isa_supported(isa))
      std::printf("  %-12s checked%s%s\n", isa.c_str(), entries.empty() ? "" : ": ",
                  entries.c_str());
    else
      std::printf("  %-12s not available on this host: not checked\n", isa.c_str());
  }
  return 0;
}
