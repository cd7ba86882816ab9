// Internal: one entry point per experiment kind, each defined in its own file.
#pragma once

#include "sdpa/experiments.hpp"

namespace sdpa {
ExperimentKind variance_experiment();
ExperimentKind entropy_experiment();
ExperimentKind gradient_experiment();
ExperimentKind training_experiment();
ExperimentKind stability_experiment();
ExperimentKind roofline_experiment();
ExperimentKind timing_experiment();
}  // namespace sdpa
