// The registry of experiment kinds (the writing side): one entry per kind of kinds/kinds.cmake,
// each from its kinds/<kind>/experiment.cpp. analysis/report_kinds.cpp is the reading side's
// registry, made from the same list; a test checks the two against each other.
#include "kinds.hpp"

namespace sdpa {

const std::vector<ExperimentKind>& experiment_kinds() {
  static const std::vector<ExperimentKind> kinds = {
#define SDPA_KIND(kind) kind##_experiment(),
#include "kind_list.inc"
#undef SDPA_KIND
  };
  return kinds;
}

const ExperimentKind* find_experiment_kind(const std::string& name) {
  for (const auto& k : experiment_kinds())
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace sdpa
