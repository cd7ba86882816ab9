#include "sdpa/report.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "sdpa/input_error.hpp"

namespace sdpa::report {
namespace {

constexpr int kSchemaVersion = 1;

std::string interval(const json& ci) {
  return "[" + number(ci[0].get<double>()) + ", " + number(ci[1].get<double>()) + "]";
}

std::string agreement(const json& m) {
  if (!m.contains("agrees")) return "-";
  return m["agrees"].get<bool>() ? "yes" : "**no**";
}

std::string predicted(const json& m) {
  return m["predicted"].is_null() ? "-" : number(m["predicted"].get<double>());
}

std::string label(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Records grouped by every parameter except the row and column parameters, so each group is
// one table with rows by `row_key` and column groups by `column_key`.
std::vector<std::pair<std::string, std::vector<const json*>>> group_records(
    const json& records, const std::string& row_key, const std::string& column_key) {
  std::vector<std::pair<std::string, std::vector<const json*>>> groups;
  for (const auto& r : records) {
    std::string key;
    for (auto& [k, v] : r["params"].items())
      if (k != row_key && k != column_key) key += (key.empty() ? "" : ", ") + k + " " + label(v);
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == key; });
    if (it == groups.end()) groups.push_back({key, {&r}});
    else it->second.push_back(&r);
  }
  return groups;
}

// Score variance: one row per d_k, each scale scheme side by side.
std::vector<Table> variance_tables(const json& experiment, const std::string& source) {
  std::vector<Table> out;
  for (const auto& [group, records] : group_records(experiment["records"], "d_k", "scale")) {
    std::vector<std::string> scales;
    for (const json* r : records) {
      const std::string s = label((*r)["params"]["scale"]);
      if (std::find(scales.begin(), scales.end(), s) == scales.end()) scales.push_back(s);
    }
    Table t;
    t.title = "variance: " + experiment["name"].get<std::string>() + source + " (" + group + ")";
    t.header = {"d_k"};
    for (const auto& s : scales)
      for (const char* col : {"Var(s) [95% CI]", "predicted", "agrees"})
        t.header.push_back(s + ": " + col);
    std::map<double, std::vector<std::string>> rows;  // ordered by d_k
    for (const json* r : records) {
      const double d_k = (*r)["params"]["d_k"];
      auto& row = rows[d_k];
      if (row.empty()) row.assign(1 + 3 * scales.size(), "-"), row[0] = number(d_k);
      const auto col = 1 + 3 * (std::find(scales.begin(), scales.end(),
                                          label((*r)["params"]["scale"])) - scales.begin());
      const json& m = (*r)["score_variance"];
      row[col] = number(m["value"]) + " " + interval(m["ci95"]);
      row[col + 1] = predicted(m);
      row[col + 2] = agreement(m);
    }
    for (auto& [d, row] : rows) t.rows.push_back(row);
    t.note = "Var(s): variance of all entries of all trials (np.var of the stacked products); "
             "predicted = E of that statistic; agrees = predicted inside the 95 % CI (about one "
             "cell in twenty disagrees by chance).";
    out.push_back(std::move(t));
  }
  return out;
}

// Roofline: the ceilings timings are read against, one row per (threads, ISA).
std::vector<Table> roofline_tables(const json& experiment, const std::string& source) {
  Table t;
  t.title = "roofline: " + experiment["name"].get<std::string>() + source;
  t.header = {"isa",    "threads",    "lanes",  "FMA GFLOP/s",
              "median", "triad GB/s", "median", "ridge FLOP/byte"};
  for (const auto& r : experiment["records"]) {
    std::vector<std::string> row = {label(r["params"]["isa"]),
                                    std::to_string(r["threads"].get<int>())};
    if (!r["supported"].get<bool>()) {
      row.insert(row.end(), {"-", "not supported", "-", "-", "-", "-"});
    } else {
      row.insert(row.end(),
                 {std::to_string(r["lanes"].get<int>()), number(r["fma_gflops"]["value"]),
                  number(r["fma_gflops"]["median"]), number(r["triad_gbs"]["value"]),
                  number(r["triad_gbs"]["median"]), number(r["ridge_flops_per_byte"])});
    }
    t.rows.push_back(std::move(row));
  }
  const std::string footprint = number(experiment["params"]["llc_multiple"]);
  t.note =
      "Peak: the best repetition (every disturbance only slows a loop down); median beside "
      "it. FMA: 12 independent multiply-add chains per lane (scalar and sse4 issue a "
      "multiply and an add). Triad: x = y + s z over three arrays of " +
      footprint +
      "x the last-level cache together. Ridge: FLOP per byte at which a kernel stops being "
      "memory-bound.";
  return {std::move(t)};
}

// Timing: one row per cell, in grid order.
std::vector<Table> timing_tables(const json& experiment, const std::string& source) {
  Table t;
  t.title = "timing: " + experiment["name"].get<std::string>() + source;
  t.header = {"kernel", "shape",   "threads",   "direction", "median",
              "95% CI", "GFLOP/s", "% of peak", "CV",        "noisy"};
  for (const auto& r : experiment["records"]) {
    const json& p = r["params"];
    std::vector<std::string> row = {p["kernel"], timing_shape(p),
                                    std::to_string(r["threads"].get<int>()), p["direction"]};
    if (!r.contains("time_s")) {
      row.insert(row.end(), {"not run", "-", "-", "-", "-", "-"});
    } else {
      const json& time = r["time_s"];
      row.insert(row.end(),
                 {duration(time["value"]),
                  "[" + duration(time["ci95"][0]) + ", " + duration(time["ci95"][1]) + "]",
                  number(r["gflops"]["value"]),
                  r["percent_of_peak"].is_null() ? "-" : number(r["percent_of_peak"]),
                  time["cv"].is_null() ? "-" : number(100 * time["cv"].get<double>()) + " %",
                  r["noisy"].get<bool>() ? "**noisy**" : "-"});
    }
    t.rows.push_back(std::move(row));
  }
  t.note =
      "Shape: batch·heads × n_q × n_kv, d_k/d_v. Median of the repetitions (each the mean "
      "time per call over its iterations), its interval from order statistics (distribution "
      "free; [min, max] below 6 repetitions, which covers less than 95 %). % of peak: of "
      "this machine's measured multiply-add peak for the kernel's ISA and thread count "
      "(machine.peak); a scalar kernel can pass 100 % where the compiler vectorises its "
      "loops with the baseline SSE2. Noisy: CV (stddev / mean of the repetitions) above 5 %.";
  return {std::move(t)};
}

using TableMaker = std::vector<Table> (*)(const json& experiment, const std::string& source);

const std::map<std::string, TableMaker>& makers() {
  static const std::map<std::string, TableMaker> m = {
      {"variance", variance_tables}, {"roofline", roofline_tables}, {"timing", timing_tables}};
  return m;
}

}  // namespace

std::string number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

std::string duration(double seconds) {
  const double a = std::abs(seconds);
  if (a < 1e-6) return number(seconds * 1e9) + " ns";
  if (a < 1e-3) return number(seconds * 1e6) + " µs";
  if (a < 1) return number(seconds * 1e3) + " ms";
  return number(seconds) + " s";
}

std::string timing_shape(const json& p) {
  std::string s = p["batch_heads"].dump() + "×" + p["n_q"].dump() + "×" + p["n_kv"].dump() +
                  ", d " + p["d_k"].dump() + "/" + p["d_v"].dump();
  return p["causal"].get<bool>() ? s + ", causal" : s;
}

json read_result_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open result file");
  std::ostringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const json::parse_error& e) {
    throw InputError(path + ": not a complete JSON document (truncated or corrupt): " +
                     std::string(e.what()).substr(std::string(e.what()).find(':') + 2));
  }
  if (!doc.is_object() || !doc.contains("schema_version") || !doc.contains("experiments"))
    throw InputError(path + ": not an sdpa-bench result file (no schema_version/experiments)");
  if (doc["schema_version"] != kSchemaVersion)
    throw InputError(path + ": /schema_version: expected " + std::to_string(kSchemaVersion) +
                     ", found " + doc["schema_version"].dump() +
                     " (written by another version of sdpa-bench)");
  return doc;
}

std::vector<Table> tables(const std::vector<json>& results) {
  std::vector<Table> out;
  for (const auto& result : results) {
    const std::string source =
        results.size() > 1 ? " [" + result.value("machine_id", std::string("?")) + "]" : "";
    for (const auto& e : result["experiments"]) {
      auto it = makers().find(e["kind"]);
      if (it == makers().end()) continue;
      for (auto& t : it->second(e, source)) out.push_back(std::move(t));
    }
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
