#include "grouping.hpp"

#include <algorithm>

namespace sdpa::report {

std::string label(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

bool applies(const json& params, const std::string& key) {
  if (!params.contains("inputs")) return true;  // a kind without input distributions
  const bool projected = params.value("inputs", std::string("normal")) == "projected";
  if (key == "d_model" || key == "init") return projected;
  if (key == "mean_q" || key == "std_q" || key == "mean_k" || key == "std_k" || key == "alignment")
    return !projected;
  return true;
}

std::vector<Group> group_records(const json& records, const std::string& row_key,
                                 const std::string& column_key, std::string& fixed) {
  std::vector<std::string> varying;
  const json& first = records.at(0)["params"];
  for (auto& [k, v] : first.items()) {
    if (k == row_key || k == column_key) continue;
    const bool varies = std::any_of(records.begin(), records.end(),
                                    [&](const json& r) { return r["params"][k] != v; });
    if (varies) varying.push_back(k);
    else if (applies(first, k)) fixed += (fixed.empty() ? "" : ", ") + k + " " + label(v);
  }
  std::vector<Group> groups;
  for (const auto& r : records) {
    std::string title;
    for (const auto& k : varying)
      if (applies(r["params"], k)) title += (title.empty() ? "" : ", ") + k + " " + label(r["params"][k]);
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.title == title; });
    if (it == groups.end()) groups.push_back({title, {&r}});
    else it->records.push_back(&r);
  }
  return groups;
}

}  // namespace sdpa::report
