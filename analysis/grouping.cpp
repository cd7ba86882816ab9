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

// A record's parameter, null when the record lacks it (records of one experiment normally
// share their keys, but a file may say otherwise).
const json& param(const json& record, const std::string& key) {
  static const json none;
  const json& params = record["params"];
  const auto it = params.find(key);
  return it == params.end() ? none : *it;
}

std::string machine_of(const json& result) { return result.value("machine_id", std::string("?")); }

std::vector<std::string> machine_ids(const std::vector<const json*>& results) {
  std::vector<std::string> ids;
  for (const json* r : results)
    if (std::find(ids.begin(), ids.end(), machine_of(*r)) == ids.end())
      ids.push_back(machine_of(*r));
  return ids;
}

std::vector<Group> group_records(const json& records, const std::string& row_key,
                                 const std::string& column_key, std::string& fixed) {
  std::vector<std::string> varying;
  const json& first = records.at(0)["params"];
  for (const auto& item : first.items()) {
    // (Not a structured binding: clang 14, which builds the fuzzers, cannot capture one.)
    const std::string& k = item.key();
    const json& v = item.value();
    if (k == row_key || k == column_key) continue;
    const bool varies = std::any_of(records.begin(), records.end(),
                                    [&](const json& r) { return param(r, k) != v; });
    if (varies)
      varying.push_back(k);
    else if (applies(first, k))
      fixed += (fixed.empty() ? "" : ", ") + k + " " + label(v);
  }
  std::vector<Group> groups;
  for (const auto& r : records) {
    std::string title;
    for (const auto& k : varying)
      if (applies(r["params"], k))
        title += (title.empty() ? "" : ", ") + k + " " + label(param(r, k));
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.title == title; });
    if (it == groups.end())
      groups.push_back({title, {&r}});
    else
      it->records.push_back(&r);
  }
  return groups;
}

}  // namespace sdpa::report
