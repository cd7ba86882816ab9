// Tidy CSV of result files (sdpa/report.hpp): one file per experiment, one row per record, one
// column per field of the records (their layout is each kind's record.schema.json).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "sdpa/escape.hpp"
#include "sdpa/report.hpp"

namespace sdpa::report {

namespace {

void flatten(const json& v, const std::string& key,
             std::vector<std::pair<std::string, std::string>>& out) {
  const auto field = [&](const std::string& name) { return key.empty() ? name : key + "." + name; };
  if (v.is_object()) {
    for (auto& [k, x] : v.items()) flatten(x, field(k), out);
  } else if (v.is_array() && v.size() == 2 && key.size() >= 4 &&
             key.substr(key.size() - 4) == "ci95") {
    flatten(v[0], key + "_low", out);
    flatten(v[1], key + "_high", out);
  } else if (v.is_number()) {
    out.emplace_back(key, number(v.get<double>(), 17));
  } else if (v.is_string()) {
    out.emplace_back(key, v.get<std::string>());
  } else if (v.is_null()) {
    out.emplace_back(key, "");
  } else {
    out.emplace_back(key, v.dump());  // booleans, and lists such as every repetition's time
  }
}

}  // namespace

std::vector<CsvFile> csv_files(const std::vector<ResultFile>& results) {
  struct Sheet {
    std::vector<std::string> columns;
    std::vector<std::map<std::string, std::string>> rows;
  };
  std::vector<std::pair<std::string, Sheet>> sheets;  // in order of first appearance
  const bool any_edited = std::any_of(results.begin(), results.end(),
                                      [](const ResultFile& f) { return edited(f.doc); });
  for (const auto& file : results) {
    for (const auto& e : file.doc["experiments"]) {
      const std::string name = safe_file_name(e["name"].get<std::string>()) + ".csv";
      auto it =
          std::find_if(sheets.begin(), sheets.end(), [&](auto& s) { return s.first == name; });
      if (it == sheets.end()) it = sheets.insert(sheets.end(), {name, Sheet{}});
      Sheet& sheet = it->second;
      for (const auto& r : e["records"]) {
        std::vector<std::pair<std::string, std::string>> fields;
        if (any_edited) fields.emplace_back("edited", edited(file.doc) ? "true" : "false");
        if (results.size() > 1) {
          fields.emplace_back("machine_id", file.doc.value("machine_id", std::string()));
          fields.emplace_back("file", file.path);
        }
        flatten(r, "", fields);
        std::map<std::string, std::string> row;
        for (auto& [k, v] : fields) {
          if (std::find(sheet.columns.begin(), sheet.columns.end(), k) == sheet.columns.end())
            sheet.columns.push_back(k);
          row[k] = v;
        }
        sheet.rows.push_back(std::move(row));
      }
    }
  }
  std::vector<CsvFile> out;
  for (const auto& [name, sheet] : sheets) {
    std::ostringstream text;
    for (std::size_t c = 0; c < sheet.columns.size(); ++c)
      text << (c ? "," : "") << csv_field(sheet.columns[c]);
    text << "\n";
    for (const auto& row : sheet.rows) {
      for (std::size_t c = 0; c < sheet.columns.size(); ++c) {
        auto it = row.find(sheet.columns[c]);
        text << (c ? "," : "") << (it == row.end() ? "" : csv_field(it->second));
      }
      text << "\n";
    }
    out.push_back({name, text.str()});
  }
  return out;
}

}  // namespace sdpa::report
