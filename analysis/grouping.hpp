// Internal to sdpa_analysis: how records of one experiment are grouped into tables and plots.
#pragma once

#include <string>
#include <vector>

#include "sdpa/record.hpp"

namespace sdpa::report {

// A parameter value as a table shows it: strings bare, numbers as JSON writes them.
std::string label(const json& v);

// Parameters that mean something for this record: projection settings only for projected
// inputs, normal-distribution settings only for normal ones.
bool applies(const json& params, const std::string& key);

// A record's parameter, null when the record lacks it.
const json& param(const json& record, const std::string& key);

// A record's statistic by its field name, or by a JSON pointer ("/error/total/o_rms") for one
// nested below the record's top level.
inline const json& statistic_at(const json& record, const std::string& name) {
  return name.starts_with('/') ? record[json::json_pointer(name)] : record[name];
}
// Whether a record holds that statistic: a cell not run (a kernel that refuses it, an ISA this
// CPU lacks) holds none.
inline bool has_statistic(const json& record, const std::string& name) {
  return name.starts_with('/') ? record.contains(json::json_pointer(name)) : record.contains(name);
}

struct Group {
  std::string title;  // the parameters that vary between groups
  std::vector<const json*> records;
};

// A result file's machine id.
std::string machine_of(const json& result);
// The machine ids of result files, in order of first appearance: tables and plots name the
// machine only when there are several.
std::vector<std::string> machine_ids(const std::vector<const json*>& results);

// Records grouped by every parameter except the row and column parameters, so each group is
// one table (or plot) with rows by `row_key` and column groups (series) by `column_key`.
// Parameters with one value across the experiment are appended to `fixed`.
std::vector<Group> group_records(const json& records, const std::string& row_key,
                                 const std::string& column_key, std::string& fixed);

}  // namespace sdpa::report
