// Formatting every table shares, and the side-by-side table most kinds make (tables.hpp).
#include "tables.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "sdpa/json_read.hpp"

namespace sdpa::report {

std::string number(double x, int significant) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[40];
  if (x == std::floor(x) && std::abs(x) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", x);
  else
    std::snprintf(buf, sizeof buf, "%.*g", significant, x);
  return buf;
}

std::string duration(double seconds) {
  const double a = std::abs(seconds);
  if (a < 1e-6) return number(seconds * 1e9) + " ns";
  if (a < 1e-3) return number(seconds * 1e6) + " µs";
  if (a < 1) return number(seconds * 1e3) + " ms";
  return number(seconds) + " s";
}

bool reads_cache(const json& r) {
  return r.value("bound", json(nullptr)) == "memory" && r.value("fits_llc", json(false)) == true;
}

std::string timing_bound(const json& r) {
  const json bound = r.value("bound", json(nullptr));
  if (!bound.is_string()) return "-";
  return bound.get<std::string>() + (reads_cache(r) ? ", fits LLC" : "");
}

std::string timing_shape(const json& p) {
  // Records from before the head axes lack them: one head, as they ran.
  const std::int64_t batch = p["batch_heads"].get<std::int64_t>() * p.value("batch", 1);
  const std::int64_t heads_q = p.value("heads_q", 1), heads_kv = p.value("heads_kv", 1);
  std::string s = std::to_string(batch * heads_q) +
                  (heads_kv == heads_q ? "" : "/" + std::to_string(batch * heads_kv)) + "×" +
                  p["n_q"].dump() + "×" + p["n_kv"].dump() + ", d " + p["d_k"].dump() + "/" +
                  p["d_v"].dump();
  if (p["causal"].get<bool>()) s += ", causal";
  // The mask and modifier beyond causal (records from before them have none).
  if (p.value("prefix", 0) > 0) s += ", prefix " + p["prefix"].dump();
  if (const json w = p.value("window", json(nullptr)); w.is_number()) {
    s += ", window " + w.dump();
  } else if (w.is_object()) {
    const auto side = [](const json& x) { return x.is_null() ? std::string("∞") : x.dump(); };
    s += ", window " + side(w["left"]) + "/" + side(w["right"]);
  }
  if (p.value("chunk", 0) > 0) s += ", chunk " + p["chunk"].dump();
  if (const json d = p.value("documents", json(0)); d.is_object())
    s += ", documents at " + d["starts"].dump();
  else if (d.is_number() && d.get<double>() > 0)
    s += ", documents of " + d.dump();
  if (p.value("softcap", 0.0) > 0) s += ", soft-cap " + number(p["softcap"]);
  if (p.value("alibi", false)) s += ", ALiBi";
  if (!p.value("sinks", json(nullptr)).is_null()) s += ", sinks";
  if (const json t = p.value("temperature", json(nullptr)); t.is_string())
    s += ", temperature " + t.get<std::string>();
  else if (t.is_number())
    s += ", temperature " + number(t);
  return s;
}

std::string number(const json& x, int significant) {
  return number(x.is_null() ? std::numeric_limits<double>::quiet_NaN() : number_in(x), significant);
}

std::string duration(const json& seconds) { return duration(number_in(seconds)); }

std::string interval(const json& ci) { return "[" + number(ci[0]) + ", " + number(ci[1]) + "]"; }

std::string agreement(const json& m) {
  if (!m.contains("agrees")) return "-";
  return m["agrees"].get<bool>() ? "yes" : "**no**";
}

std::string predicted(const json& m) {
  return m["predicted"].is_null() ? "-" : number(m["predicted"]);
}

std::string statistic_with_ci(const json& m) {
  return number(m["value"]) + " " + interval(m["ci95"]);
}

std::string table_title(const json& experiment, const std::string& source,
                        const std::string& group) {
  return experiment["kind"].get<std::string>() + ": " + experiment["name"].get<std::string>() +
         source + (group.empty() ? "" : " (" + group + ")");
}

std::vector<Table> side_by_side(const json& experiment, const std::string& source,
                                const std::string& row_key, const std::string& column_key,
                                const std::vector<Column>& columns, const std::string& note,
                                const std::string& tested) {
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
    t.title = table_title(experiment, source, group);
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
    std::size_t predictions = 0, disagreements = 0;
    for (const json* r : records)
      if (const json& stat = statistic_at(*r, tested); stat.contains("agrees")) {
        ++predictions;
        disagreements += stat["agrees"].get<bool>() ? 0 : 1;
      }
    t.note = "Fixed: " + fixed + ". " + note;
    if (predictions > 0)
      t.note += " Here " + std::to_string(disagreements) + " of " + std::to_string(predictions) +
                " predictions disagree; about " + number(double(predictions) / 20) +
                " would by chance alone.";
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace sdpa::report
