#include "sdpa/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

#include "result_schema_text.hpp"
#include "sdpa/input_error.hpp"
#include "sdpa/input_file.hpp"
#include "sdpa/json_schema.hpp"

namespace sdpa::report {
namespace {

constexpr int kSchemaVersion = 1;

// A number of a result file; null stands for a value that was not finite (JSON has no NaN).
std::string number_of(const json& v) { return v.is_null() ? "nan" : number(v.get<double>()); }

std::string interval(const json& ci) {
  return "[" + number_of(ci[0]) + ", " + number_of(ci[1]) + "]";
}

std::string agreement(const json& m) {
  if (!m.contains("agrees")) return "-";
  return m["agrees"].get<bool>() ? "yes" : "**no**";
}

std::string predicted(const json& m) {
  return m["predicted"].is_null() ? "-" : number_of(m["predicted"]);
}

std::string label(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Parameters that mean something for this record: projection settings only for projected
// inputs, normal-distribution settings only for normal ones.
bool applies(const json& params, const std::string& key) {
  const auto inputs = params.find("inputs");
  const bool projected = inputs != params.end() && *inputs == "projected";
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

struct Group {
  std::string title;  // the parameters that vary between groups
  std::vector<const json*> records;
};

// Records grouped by every parameter except the row and column parameters, so each group is
// one table with rows by `row_key` and column groups by `column_key`. Parameters with one
// value across the experiment go into `fixed`.
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

// A column of a side-by-side table: its heading and how a record fills it.
struct Column {
  std::string heading;
  std::function<std::string(const json& record)> cell;
};

std::string statistic_with_ci(const json& m) {
  return number_of(m["value"]) + " " + interval(m["ci95"]);
}

// One table per group of records, one row per value of `row_key`, and for each value of
// `column_key` (a scale scheme) the same columns side by side.
std::vector<Table> side_by_side(const json& experiment, const std::string& source,
                                const std::string& row_key, const std::string& column_key,
                                const std::vector<Column>& columns, const std::string& note) {
  std::vector<Table> out;
  if (experiment["records"].empty()) return out;
  std::string fixed;
  for (const auto& [group, records] :
       group_records(experiment["records"], row_key, column_key, fixed)) {
    std::vector<std::string> keys;
    for (const json* r : records) {
      const std::string s = label(param(*r, column_key));
      if (std::find(keys.begin(), keys.end(), s) == keys.end()) keys.push_back(s);
    }
    Table t;
    t.title = experiment["kind"].get<std::string>() + ": " + experiment["name"].get<std::string>() +
              source + (group.empty() ? "" : " (" + group + ")");
    t.header = {row_key};
    for (const auto& k : keys)
      for (const auto& c : columns) t.header.push_back(k + ": " + c.heading);
    std::map<double, std::vector<std::string>> rows;  // ordered by the row parameter
    for (const json* r : records) {
      const double x = param(*r, row_key).get<double>();
      auto& row = rows[x];
      if (row.empty()) row.assign(1 + columns.size() * keys.size(), "-"), row[0] = number(x);
      const std::size_t k =
          std::find(keys.begin(), keys.end(), label(param(*r, column_key))) - keys.begin();
      for (std::size_t c = 0; c < columns.size(); ++c)
        row[1 + k * columns.size() + c] = columns[c].cell(*r);
    }
    for (auto& [x, row] : rows) t.rows.push_back(row);
    t.note = "Fixed: " + fixed + ". " + note;
    out.push_back(std::move(t));
  }
  return out;
}

const char* kAgreesNote =
    "agrees = predicted inside the 95 % CI (about one cell in twenty disagrees by chance).";

// Score variance: one row per d_k, each scale scheme side by side.
std::vector<Table> variance_tables(const json& experiment, const std::string& source) {
  const std::vector<Column> columns = {
      {"Var(s) [95% CI]", [](const json& r) { return statistic_with_ci(r["score_variance"]); }},
      {"predicted", [](const json& r) { return predicted(r["score_variance"]); }},
      {"agrees", [](const json& r) { return agreement(r["score_variance"]); }},
  };
  return side_by_side(experiment, source, "d_k", "scale", columns,
                      std::string("Var(s): variance of all entries of all trials (np.var of the "
                                  "stacked products); predicted = E of that statistic. ") +
                          kAgreesNote);
}

// Softmax saturation: entropy beside ln N - sigma^2/2, max weight and overflow, per d_k.
std::vector<Table> entropy_tables(const json& experiment, const std::string& source) {
  const std::vector<Column> columns = {
      {"H [95% CI]", [](const json& r) { return statistic_with_ci(r["entropy"]); }},
      {"ln N - s2/2",
       [](const json& r) {
         // A prediction outside the regime where the formula holds is shown in parentheses.
         const std::string p = predicted(r["entropy"]);
         return r["formula_valid"].get<bool>() || p == "-" ? p : "(" + p + ")";
       }},
      {"agrees", [](const json& r) { return agreement(r["entropy"]); }},
      {"max w", [](const json& r) { return number_of(r["max_weight"]["value"]); }},
      {"rows max w>0.9", [](const json& r) { return number_of(r["rows_max_weight_over_0_9"]); }},
      {"overflow fp32/fp16",
       [](const json& r) {
         return number_of(r["overflow"]["unstable_fp32_rows"]) + " / " +
                number_of(r["overflow"]["unstable_fp16_rows"]);
       }},
  };
  return side_by_side(experiment, source, "d_k", "scale", columns,
                      std::string("H: mean softmax entropy per query row (nats). The prediction "
                                  "ln N - s2/2 holds asymptotically while s2 < 2 ln N; in "
                                  "parentheses where it does not. overflow: fraction of rows "
                                  "whose exp(s) sum overflows without max subtraction. ") +
                          kAgreesNote);
}

using TableMaker = std::vector<Table> (*)(const json& experiment, const std::string& source);

const std::map<std::string, TableMaker>& makers() {
  static const std::map<std::string, TableMaker> m = {{"variance", variance_tables},
                                                      {"entropy", entropy_tables}};
  return m;
}

// The tables of one experiment; none for a kind without a table.
std::vector<Table> experiment_tables(const json& experiment, const std::string& source) {
  const auto it = makers().find(experiment["kind"].get<std::string>());
  return it == makers().end() ? std::vector<Table>{} : it->second(experiment, source);
}

}  // namespace

std::string number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

json parse_result_file(const std::string& path, const std::string& text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(
        path + ": not a complete JSON document (truncated or corrupt): " + json_error_message(e));
  }
  if (!doc.is_object() || !doc.contains("schema_version") || !doc.contains("experiments"))
    throw InputError(path + ": not an sdpa-bench result file (no schema_version/experiments)");
  if (doc["schema_version"] != kSchemaVersion)
    throw InputError(path + ": /schema_version: expected " + std::to_string(kSchemaVersion) +
                     ", found " + doc["schema_version"].dump() +
                     " (written by another version of sdpa-bench)");
  static const JsonSchema schema(kResultSchemaText);
  auto problems = schema.problems(doc);
  if (!problems.empty()) {
    for (auto& p : problems) p = path + ": " + p;
    throw InputError::from_lines(problems);
  }
  // The schema is the contract the tables rely on; should a file it admits still not make
  // tables, say which experiment rather than fail later.
  const json& experiments = doc["experiments"];
  for (std::size_t i = 0; i < experiments.size(); ++i) {
    try {
      experiment_tables(experiments[i], "");
    } catch (const json::exception& e) {
      throw InputError(path + ": /experiments/" + std::to_string(i) +
                       ": cannot be tabulated: " + json_error_message(e));
    }
  }
  return doc;
}

json read_result_file(const std::string& path) {
  return parse_result_file(path, read_input_file(path, "result file"));
}

std::vector<Table> tables(const std::vector<json>& results) {
  std::vector<Table> out;
  for (const auto& result : results) {
    const std::string source =
        results.size() > 1 ? " [" + result.value("machine_id", std::string("?")) + "]" : "";
    for (const auto& e : result["experiments"])
      for (auto& t : experiment_tables(e, source)) out.push_back(std::move(t));
  }
  return out;
}

std::string markdown(const std::vector<Table>& tables) {
  std::ostringstream out;
  for (const auto& t : tables) {
    out << "### " << t.title << "\n\n|";
    for (const auto& h : t.header) out << " " << h << " |";
    out << "\n|";
    for (std::size_t i = 0; i < t.header.size(); ++i) out << (i == 0 ? "---|" : "---:|");
    out << "\n";
    for (const auto& row : t.rows) {
      out << "|";
      for (const auto& cell : row) out << " " << cell << " |";
      out << "\n";
    }
    if (!t.note.empty()) out << "\n" << t.note << "\n";
    out << "\n";
  }
  return out.str();
}

}  // namespace sdpa::report
