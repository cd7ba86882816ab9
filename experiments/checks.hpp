// Checks that more than one experiment kind needs beyond the schema. Each returns strings
// "<json path below the experiment>: <message>", as ExperimentKind::check does.
#pragma once

#include <string>
#include <vector>

#include "sdpa/experiments.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa {

// A grid parameter's values: the list itself, or the single value as a list of one.
inline json grid_values(const json& value) {
  return value.is_array() ? value : json::array({value});
}

// The JSON path of a grid parameter's i-th value: "/key/i" for a list, "/key" for one value.
inline std::string grid_path(const json& params, const std::string& key, std::size_t i) {
  return "/" + key + (params[key].is_array() ? "/" + std::to_string(i) : "");
}

// Every kernel named in params["kernel"] must have a backward; the message lists those that do.
inline std::vector<std::string> kernels_without_backward(const json& params) {
  std::vector<std::string> problems;
  const json kernels = grid_values(params["kernel"]);
  std::string with_backward;
  for (const auto& k : kernel_registry())
    if (k.backward) with_backward += (with_backward.empty() ? "\"" : ", \"") + k.name + "\"";
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const Kernel* k = find_kernel(kernels[i].get<std::string>());
    if (k && !k->backward)
      problems.push_back(grid_path(params, "kernel", i) + ": kernel " + kernels[i].dump() +
                         " has no backward; kernels with one: " + with_backward);
  }
  return problems;
}

}  // namespace sdpa
