// Reading a result file: whole, refused by name when it is not one this version can make
// tables from (results/schema.json, the contract between `run` and `report`).
#include <algorithm>
#include <cmath>

#include "kind_report.hpp"
#include "result_schema_parts.hpp"
#include "sdpa/escape.hpp"
#include "sdpa/input_error.hpp"
#include "sdpa/input_file.hpp"
#include "sdpa/json_read.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/report.hpp"
#include "sdpa/schema_parts.hpp"

namespace sdpa::report {

namespace {

// A statistic ({value, ci95}) whose value lies outside its own interval was not written by a
// run (a run's value always lies inside): refused, never printed as "-1 [0, 0.0065]" or judged
// by a claim. A few ulps of rounding at an end are allowed.
void check_intervals(const std::string& at, const json& node) {
  if (node.is_object()) {
    const auto value = node.find("value"), ci = node.find("ci95");
    if (value != node.end() && ci != node.end() && value->is_number() && ci->is_array() &&
        ci->size() == 2 && (*ci)[0].is_number() && (*ci)[1].is_number()) {
      const double x = value->get<double>(), low = (*ci)[0].get<double>(),
                   high = (*ci)[1].get<double>();
      const double slack = 1e-12 * std::max({std::abs(low), std::abs(high), std::abs(x)});
      if (!(low - slack <= x && x <= high + slack))
        throw InputError(at + "/value: expected a value inside its own 95 % interval " +
                         ci->dump() + ", found " + value->dump());
    }
    for (const auto& [key, item] : node.items()) check_intervals(at + "/" + key, item);
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i)
      check_intervals(at + "/" + std::to_string(i), node[i]);
  }
}

// What the schema cannot say: a kind this build reads, at least one experiment and one record
// each (a claim or table over nothing must not look like a result), seconds that are positive,
// finite and normal (a subnormal or negative time makes an inf or negative speedup), and every
// statistic's value inside its own interval.
void check_contents(const std::string& path, const json& doc) {
  const json& experiments = doc["experiments"];
  if (experiments.empty())
    throw InputError(path + ": /experiments: expected at least one experiment, found []");
  // An experiment may hold no records (a shard without its cells, a run stopped early) and is
  // reported as such, but a file with none at all has nothing to report.
  if (std::all_of(experiments.begin(), experiments.end(),
                  [](const json& e) { return e["records"].empty(); }))
    throw InputError(path + ": /experiments: expected at least one record, found none in " +
                     std::to_string(experiments.size()) + " experiment(s) (no data)");
  for (std::size_t i = 0; i < experiments.size(); ++i) {
    const json& e = experiments[i];
    const std::string at = path + ": /experiments/" + std::to_string(i);
    const std::string kind = e["kind"];
    if (find_kind_report(kind) == nullptr) {
      std::string known;
      for (const auto& k : kind_names()) known += (known.empty() ? "" : ", ") + k;
      throw InputError(at + "/kind: expected one of " + known + ", found \"" + kind +
                       "\" (written by another version of sdpa-bench?)");
    }
    for (std::size_t r = 0; r < e["records"].size(); ++r) {
      const json& rec = e["records"][r];
      if (!rec.contains("time_s")) continue;
      const std::string rat = at + "/records/" + std::to_string(r) + "/time_s";
      // A run always measures a time: null (a non-finite number) is refused as well.
      auto check = [&](const json& v, const std::string& where) {
        const double x = v.is_number() ? v.get<double>() : 0.0;
        if (!(std::isnormal(x) && x > 0))
          throw InputError(rat + where +
                           ": expected seconds > 0 (a positive normal number), found " + v.dump());
      };
      const json& t = rec["time_s"];
      check(t["value"], "/value");
      for (std::size_t k = 0; k < t["ci95"].size(); ++k)
        check(t["ci95"][k], "/ci95/" + std::to_string(k));
      if (t.contains("samples"))
        for (std::size_t k = 0; k < t["samples"].size(); ++k)
          check(t["samples"][k], "/samples/" + std::to_string(k));
    }
    // After the times' own check, whose message says more about a time.
    for (std::size_t r = 0; r < e["records"].size(); ++r)
      check_intervals(at + "/records/" + std::to_string(r), e["records"][r]);
  }
}

}  // namespace

const json& result_schema() {
  static const json schema = [] {
    json s = assemble_schema(
        kResultSchemaBase, kResultSchemaParts, "_record", "experiment",
        [](const std::string& ref) {
          return json{{"properties", {{"records", {{"items", {{"$ref", ref}}}}}}}};
        },
        "Assembled by sdpa-bench from kinds/result.schema.json and each kind's "
        "kinds/<kind>/record.schema.json (`make schemas` writes it here); edit those.");
    s["properties"]["schema_version"] = {{"const", kResultSchemaVersion}};
    return s;
  }();
  return schema;
}

namespace {

// What a result file's checksum covers: its contents without the checksum, as compact JSON in
// file order (so re-indenting a file does not change it; any edit of a value does).
std::string contents_sha256(json doc) {
  doc.erase("contents_sha256");
  return sha256_hex(doc.dump());
}

}  // namespace

std::string result_file_text(json doc) {
  doc.erase("contents_sha256");
  doc["contents_sha256"] = contents_sha256(doc);
  return doc.dump(1) + "\n";
}

bool edited(const json& doc) { return doc.value("edited", false); }

json parse_result_file(const std::string& path, const std::string& text,
                       const ReadOptions& options) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(
        path + ": not a complete JSON document (truncated or corrupt): " + json_error_message(e));
  }
  if (!doc.is_object() || !doc.contains("schema_version") || !doc.contains("experiments"))
    throw InputError(path + ": not an sdpa-bench result file (no schema_version/experiments)");
  if (doc["schema_version"] != kResultSchemaVersion)
    throw InputError(path + ": /schema_version: expected " + std::to_string(kResultSchemaVersion) +
                     ", found " + doc["schema_version"].dump() +
                     " (written by another version of sdpa-bench)");
  static const JsonSchema schema(result_schema().dump());
  auto problems = schema.problems(doc);
  if (!problems.empty()) {
    for (auto& p : problems) p = path + ": " + p;
    throw InputError::from_lines(problems);
  }
  check_contents(path, doc);
  // Last, so a file edited into nonsense is told what is wrong with it first.
  const auto sum = doc.find("contents_sha256");
  if (sum == doc.end() || *sum != contents_sha256(doc)) {
    if (!options.allow_edited)
      throw InputError(
          path + ": /contents_sha256: " +
          (sum == doc.end() ? std::string("missing: the file has no checksum")
                            : "does not match the file's contents") +
          ": edited after it was written (or damaged); read it anyway with --allow-edited, "
          "which marks it edited in every output");
    doc["edited"] = true;
  }
  // The schema is the contract the tables rely on; should a file it admits still not make
  // tables, say which experiment rather than fail later.
  const json& experiments = doc["experiments"];
  for (std::size_t i = 0; i < experiments.size(); ++i) {
    try {
      experiment_tables(experiments[i], "");
    } catch (const JsonTypeError& bad) {
      throw type_error_in({{path, &doc}}, bad);
    } catch (const json::exception& e) {
      throw InputError(path + ": /experiments/" + std::to_string(i) +
                       ": cannot be tabulated: " + json_error_message(e));
    }
  }
  return doc;
}

json read_result_file(const std::string& path, const ReadOptions& options) {
  return parse_result_file(path, read_input_file(path, "result file"), options);
}

}  // namespace sdpa::report
