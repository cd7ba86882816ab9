// Internal to sdpa_analysis: what the kinds' tables are made of (kinds/<kind>/report.cpp). Cells
// are formatted one way for every kind (report::number: 4 significant digits).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "grouping.hpp"
#include "sdpa/report.hpp"

namespace sdpa::report {

// "[low, high]" of a ci95 pair.
std::string interval(const json& ci);
// A statistic m's value and its interval: "1.003 [0.996, 1.01]".
std::string statistic_with_ci(const json& m);
// A statistic's prediction, "-" where it has none.
std::string predicted(const json& m);
// Whether the prediction lies in the interval: "yes", "**no**", or "-" without a prediction.
std::string agreement(const json& m);

// "<kind>: <name>[ [machine]][ (<the group's parameters>)]"
std::string table_title(const json& experiment, const std::string& source,
                        const std::string& group);

// A column of a side-by-side table: its heading and how a record fills it.
struct Column {
  std::string heading;
  std::function<std::string(const json& record)> cell;
};

// One table per group of records (grouping.hpp), one row per value of `row_key`, and for each
// value of `column_key` (a scale scheme) the same columns side by side. `tested` names the
// statistic (a field or a JSON pointer: statistic_at) whose `agrees` the table reports; the note
// then says how many predictions disagree beside how many would by chance alone.
std::vector<Table> side_by_side(const json& experiment, const std::string& source,
                                const std::string& row_key, const std::string& column_key,
                                const std::vector<Column>& columns, const std::string& note,
                                const std::string& tested);

inline constexpr const char* kAgreesNote =
    "agrees = predicted inside the 95 % CI (about one cell in twenty disagrees by chance).";

}  // namespace sdpa::report
