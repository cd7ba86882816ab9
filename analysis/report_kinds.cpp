// The registry of the reading side: one entry per kind of kinds/kinds.cmake, each from its
// kinds/<kind>/report.cpp. experiments/kinds.cpp is the writing side's registry, made from the
// same list; a test checks the two against each other.
#include <stdexcept>

#include "kind_report.hpp"

namespace sdpa::report {

const std::vector<KindReport>& kind_reports() {
  static const std::vector<KindReport> kinds = [] {
    std::vector<KindReport> all = {
#define SDPA_KIND(kind) kind##_report(),
#include "kind_list.inc"
#undef SDPA_KIND
    };
    // A kind that makes no tables would print nothing for its records: stop at once instead.
    for (const auto& k : all)
      if (k.name.empty() || !k.tables)
        throw std::logic_error("the reading side of kind \"" + k.name + "\" makes no tables");
    return all;
  }();
  return kinds;
}

const KindReport* find_kind_report(const std::string& name) {
  for (const auto& k : kind_reports())
    if (k.name == name) return &k;
  return nullptr;
}

std::vector<std::string> kind_names() {
  std::vector<std::string> names;
  for (const auto& k : kind_reports()) names.push_back(k.name);
  return names;
}

}  // namespace sdpa::report
