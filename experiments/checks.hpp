// Checks that more than one experiment kind needs beyond the schema. Each returns strings
// "<json path below the experiment>: <message>", as ExperimentKind::check does.
#pragma once

#include <string>
#include <vector>

#include "grid.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa {

// The names of the kernels on this machine that have a backward.
inline std::vector<std::string> kernels_with_backward() {
  std::vector<std::string> names;
  for (const auto& k : kernel_registry())
    if (k.backward) names.push_back(k.name);
  return names;
}

// Every kernel named in params["kernel"] must have a backward; the message lists those that do.
inline std::vector<std::string> kernels_without_backward(const json& params) {
  std::vector<std::string> problems;
  const json kernels = grid_values(params["kernel"]);
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const Kernel* k = find_kernel(kernels[i].get<std::string>());
    if (k && !k->backward)
      problems.push_back(grid_path(params, "kernel", i) + ": kernel " + kernels[i].dump() +
                         " has no backward; kernels with one: " +
                         join_quoted(kernels_with_backward()));
  }
  return problems;
}

}  // namespace sdpa
