// Internal: the entry point of every experiment kind, <kind>_experiment(), each defined in its
// kinds/<kind>/experiment.cpp; declared from the list in kinds/kinds.cmake.
#pragma once

#include "sdpa/experiments.hpp"

namespace sdpa {
#define SDPA_KIND(kind) ExperimentKind kind##_experiment();
#include "kind_list.inc"
#undef SDPA_KIND
}  // namespace sdpa
