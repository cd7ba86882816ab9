// The plan: each experiment's config object, schema defaults filled in, expanded into the
// cross product of its list-valued parameters (the kind's axes, the last varying fastest).
#include <algorithm>
#include <cstdio>

#include "grid.hpp"
#include "sdpa/experiments.hpp"

namespace sdpa {
namespace {

// The experiment's parameters under their current names (ExperimentKind::renamed), and the
// default of each one it does not give, from the kind's schema definition.
json with_defaults(const json& experiment, const ExperimentKind& kind) {
  json filled = json::object();
  for (const auto& item : experiment.items()) {
    const std::string& key = item.key();
    const auto renamed = std::find_if(kind.renamed.begin(), kind.renamed.end(),
                                      [&](const auto& names) { return names.first == key; });
    filled[renamed == kind.renamed.end() ? key : renamed->second] = item.value();
  }
  const json& definition = config_schema()["definitions"][kind.name];
  for (auto& [key, property] : definition["properties"].items())
    if (!filled.contains(key) && property.contains("default")) filled[key] = property["default"];
  return filled;
}

}  // namespace

std::vector<ExperimentPlan> make_plan(const Config& config) {
  std::vector<ExperimentPlan> plans;
  const json& experiments = config.document["experiments"];
  for (std::size_t e = 0; e < experiments.size(); ++e) {
    ExperimentPlan plan;
    plan.index = static_cast<std::uint32_t>(e);
    plan.name = experiments[e]["name"];
    plan.kind = find_experiment_kind(experiments[e]["kind"]);
    plan.params = with_defaults(experiments[e], *plan.kind);

    std::vector<json> values;  // per axis, the list of its values
    double cells = 1;          // (a double: a product of list lengths may pass 2^64)
    for (const auto& axis : plan.kind->axes) {
      values.push_back(grid_values(plan.params[axis]));
      cells *= double(values.back().size());
    }
    if (cells > double(kMaxCells)) {
      char count[32];
      std::snprintf(count, sizeof count, cells < 1e15 ? "%.0f" : "%.3g", cells);
      throw InputError("/experiments/" + std::to_string(e) + ": the grid has " + count +
                       " cells (the product of the lengths of its lists), expected at most " +
                       std::to_string(kMaxCells));
    }
    // Each cell copies the parameters without the axes' lists (it sets its own values in their
    // places): copying the lists into every cell made large grids slow.
    json scalars = plan.params;
    for (const auto& axis : plan.kind->axes) scalars[axis] = nullptr;
    plan.cells.reserve(std::size_t(cells));
    for (std::size_t c = 0; c < std::size_t(cells); ++c) {
      Cell cell{static_cast<std::int64_t>(c), scalars};
      std::size_t rest = c;
      for (std::size_t a = plan.kind->axes.size(); a-- > 0;) {
        cell.params[plan.kind->axes[a]] = values[a][rest % values[a].size()];
        rest /= values[a].size();
      }
      plan.cells.push_back(std::move(cell));
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace sdpa
