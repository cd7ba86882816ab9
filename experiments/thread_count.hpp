// Thread counts in configs: a positive integer, or "all" for the run's threads (-j, else the
// config's `threads`, else every core), so one config fits machines of any size.
#pragma once

#include "sdpa/experiments.hpp"

namespace sdpa {

inline int resolve_threads(const json& value, int run_threads) {
  return value.is_string() ? run_threads : value.get<int>();
}

}  // namespace sdpa
