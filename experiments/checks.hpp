// Checks that more than one experiment kind needs beyond the schema. Each returns strings
// "<json path below the experiment>: <message>", as ExperimentKind::check does.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "grid.hpp"
#include "inputs.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/kernels.hpp"
#include "trials.hpp"

namespace sdpa {

// The names of the kernels on this machine that have a backward.
inline std::vector<std::string> kernels_with_backward() {
  std::vector<std::string> names;
  for (const auto& k : kernel_registry())
    if (k.backward) names.push_back(k.name);
  return names;
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

// Why the cell's kernel cannot run its mask and score modifiers (Kernel::refusal), "" when it can.
inline std::string kernel_refusal_problem(const json& params, const json& cell, const Shape& shape,
                                          const Mask& mask, const ScoreMod& mod) {
  const Kernel* k = find_kernel(cell["kernel"].get<std::string>());
  const std::string why = k ? k->refusal(shape, mask, mod) : "";
  return why.empty() ? ""
                     : cell_path(params, cell, "kernel") + ": kernel " + cell["kernel"].dump() +
                           " refuses this cell: " + why;
}

// The cell's soft-cap and sink by mask_problem's rules (a soft-cap 0 or positive and finite in
// fp32, a sink neither NaN nor +inf), the message at the value's path; "" when both hold.
inline std::string modifier_problem(const json& params, const json& cell,
                                    const ScoreModifiers& mods) {
  for (const auto& [key, mod] : {std::pair{"softcap", ScoreMod{.softcap = mods.softcap}},
                                 std::pair{"sink", ScoreMod{.sinks = mods.sinks}}})
    if (const std::string why = mask_problem({.n_q = 1, .n_kv = 1}, {}, mod); !why.empty())
      return cell_path(params, cell, key) + ": " + why;
  return "";
}

// The cell check of kinds whose cells draw Q and K and run a kernel on them (AttentionCell):
// the scale, the entries and the scores inside fp32's range, and score modifiers that are valid
// and that the cell's kernel runs (entropy, gradient).
inline std::string attention_cell_problem(const json& params, const json& cell) {
  const AttentionCell c(cell);
  if (std::string p = scale_range_problem(params, cell, c.scale); !p.empty()) return p;
  if (std::string p = c.inputs.fp32_problem(double(c.d_k), c.scale); !p.empty()) return p;
  const ScoreModifiers mods(cell);
  if (std::string p = modifier_problem(params, cell, mods); !p.empty()) return p;
  return kernel_refusal_problem(params, cell, {1, c.n_q, c.n_kv, c.d_k, 1},
                                Mask{.causal = cell.value("causal", false)}, mods.score_mod());
}

// Every kernel named in params["kernel"] must have a backward; the message lists those that do.
inline std::vector<std::string> kernels_without_backward(const json& params) {
  std::vector<std::string> problems;
  const json kernels = grid_values(params["kernel"]);
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const Kernel* k = find_kernel(kernels[i].get<std::string>());
    if (k && !k->backward)
      problems.push_back(
          grid_path(params, "kernel", i) + ": kernel " + kernels[i].dump() +
          " has no backward; kernels with one: " + join_quoted(kernels_with_backward()));
  }
  return problems;
}

// The checks of kinds that train on associative recall (training, stability): kernels with a
// backward, at most as many key-value pairs as the smallest vocabulary (a sequence's keys are
// distinct tokens), and a logging interval within the run.
inline std::vector<std::string> recall_training_problems(const json& p) {
  auto problems = kernels_without_backward(p);
  const json vocab = grid_values(p["vocab"]), pairs = grid_values(p["n_pairs"]);
  const std::int64_t smallest_vocab = *std::min_element(vocab.begin(), vocab.end());
  for (std::size_t i = 0; i < pairs.size(); ++i)
    if (pairs[i] > smallest_vocab)
      problems.push_back(grid_path(p, "n_pairs", i) + ": expected at most vocab (" +
                         std::to_string(smallest_vocab) +
                         ": the keys of a sequence are distinct tokens), found " + pairs[i].dump());
  if (p["log_every"] > p["steps"])
    problems.push_back("/log_every: expected at most steps (" + p["steps"].dump() + "), found " +
                       p["log_every"].dump());
  return problems;
}

}  // namespace sdpa
