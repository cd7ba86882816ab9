// The registry of experiment kinds: adding a kind means one file and one line here.
#include "kinds.hpp"

namespace sdpa {

const std::vector<ExperimentKind>& experiment_kinds() {
  static const std::vector<ExperimentKind> kinds = {
      variance_experiment(), entropy_experiment(),  gradient_experiment(),
      training_experiment(), stability_experiment(), roofline_experiment(), timing_experiment(),
  };
  return kinds;
}

const ExperimentKind* find_experiment_kind(const std::string& name) {
  for (const auto& k : experiment_kinds())
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace sdpa
