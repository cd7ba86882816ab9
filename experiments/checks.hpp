// Checks that more than one experiment kind needs beyond the schema. Each returns strings
// "<json path below the experiment>: <message>", as ExperimentKind::check does.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "inputs.hpp"
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

// The JSON path of the value a cell took of a grid parameter.
inline std::string cell_path(const json& params, const json& cell, const std::string& key) {
  const json values = grid_values(params[key]);
  const auto at = std::find(values.begin(), values.end(), cell[key]);
  return grid_path(params, key, std::size_t(at - values.begin()));
}

// A scale the kernels would not receive as it is: outside fp32's normal range it becomes inf
// or 0, or loses precision, when converted. "" when it is inside.
inline std::string scale_range_problem(const json& params, const json& cell, double scale) {
  if (std::abs(scale) >= FLT_MIN && std::abs(scale) <= FLT_MAX) return "";
  char value[64];
  std::snprintf(value, sizeof value, "%g", scale);
  return cell_path(params, cell, "scale") + ": scale " + cell["scale"].dump() +
         (cell["scale"].is_string() ? " is " + std::string(value) : "") + " at d_k " +
         cell["d_k"].dump() + ", outside fp32's normal range [1.18e-38, 3.4e+38], where the " +
         "kernels compute";
}

// The cell check of kinds that draw Q and K and run a kernel on them: the scale, the entries
// and the scores inside fp32's range.
inline std::string attention_range_problem(const json& params, const json& cell, double scale,
                                           const InputSpec& inputs) {
  if (std::string p = scale_range_problem(params, cell, scale); !p.empty()) return p;
  return inputs.fp32_problem(cell["d_k"].get<double>(), scale);
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
