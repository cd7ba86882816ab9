// Tables from result files: a file is checked against results/schema.json before any table
// is made, so an odd file gets a message naming the file and the JSON path, never a crash.
#include <doctest/doctest.h>

#include <filesystem>

#include "sdpa/experiments.hpp"
#include "sdpa/input_file.hpp"
#include "sdpa/report.hpp"
#include "test_files.hpp"

using sdpa::json;
using sdpa::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// A small real result file with a variance and an entropy experiment.
const json& result() {
  static const json doc = [] {
    TempDir dir;
    const auto config = sdpa::parse_config("t.json", R"({"name": "t", "seed": 2, "experiments": [
      {"name": "v", "kind": "variance", "d_k": [2, 4], "n_q": 3, "n_kv": 3, "trials": 5},
      {"name": "e", "kind": "entropy", "d_k": 4, "n_q": 3, "n_kv": 4, "trials": 5}]})");
    sdpa::RunOptions options;
    options.output = (dir / "r.json").string();
    options.threads = 1;
    options.progress = false;
    return json::parse(sdpa::testing::slurp(sdpa::run_config(config, options)));
  }();
  return doc;
}

std::string error_of_text(const std::string& text) {
  try {
    sdpa::report::parse_result_file("r.json", text);
  } catch (const sdpa::InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string error_of(const json& doc) { return error_of_text(doc.dump()); }

}  // namespace

TEST_CASE("a real result file is accepted and tabulated") {
  const json doc =
      sdpa::report::parse_result_file("r.json", sdpa::report::result_file_text(result()));
  const auto tables = sdpa::report::tables({doc});
  REQUIRE(tables.size() == 2);
  CHECK(tables[0].title == "variance: v");
  CHECK(tables[1].title == "entropy: e");
}

TEST_CASE("missing fields and wrong types name the file and the JSON path") {
  json doc = result();
  doc["experiments"][0]["records"][1].erase("score_variance");
  CHECK(error_of(doc) ==
        "r.json: /experiments/0/records/1: missing required key \"score_variance\"");

  doc = result();
  doc["experiments"][0]["records"][0]["params"]["d_k"] = "four";
  CHECK(error_of(doc) ==
        "r.json: /experiments/0/records/0/params/d_k: expected a number, found string \"four\"");

  doc = result();
  doc["experiments"][1]["records"][0]["entropy"]["ci95"] = json::array({1});
  CHECK(error_of(doc) ==
        "r.json: /experiments/1/records/0/entropy/ci95: expected a list of 2 "
        "items, found list [1]");

  // The tables read the entropy's formula: without it (a file of an older version, found by
  // fuzz_result) the schema refuses the file, where reading it was out of bounds.
  doc = result();
  doc["experiments"][1]["records"][0]["entropy"].erase("formula");
  CHECK(error_of(doc) ==
        "r.json: /experiments/1/records/0/entropy: missing required key \"formula\"");

  doc = result();
  doc["experiments"][1]["records"][0].erase("overflow");
  CHECK(error_of(doc) == "r.json: /experiments/1/records/0: missing required key \"overflow\"");

  doc = result();
  doc["experiments"][0].erase("kind");
  CHECK(error_of(doc) == "r.json: /experiments/0: missing required key \"kind\"");

  doc = result();
  doc["schema_version"] = 7;
  CHECK(error_of(doc) ==
        "r.json: /schema_version: expected 1, found 7 (written by another "
        "version of sdpa-bench)");
  CHECK(error_of_text("{\"schema_version\": 1e999}") ==
        "r.json: not a complete JSON document (truncated or corrupt): number overflow parsing "
        "'1e999'");
  CHECK(error_of(json::array()) ==
        "r.json: not an sdpa-bench result file (no schema_version/experiments)");
}

TEST_CASE("odd but valid files make tables: non-finite values, uneven params, no records") {
  json doc = result();
  auto& record = doc["experiments"][0]["records"][0];
  record["score_variance"]["value"] = nullptr;  // NaN is written as null
  record["score_variance"]["ci95"] = {nullptr, nullptr};
  record["params"].erase("n_q");  // records that do not share their keys
  doc["experiments"][1]["records"][0]["rows_max_weight_over_0_9"] = nullptr;
  doc["experiments"].push_back(doc["experiments"][0]);
  doc["experiments"][2]["records"] = json::array();
  // (An unknown kind is not odd but valid: test_hardening's class 10 has it refused.)
  const json parsed =
      sdpa::report::parse_result_file("r.json", sdpa::report::result_file_text(doc));
  const std::string text = sdpa::report::markdown(sdpa::report::tables({parsed}));
  CHECK(text.find("| nan [nan, nan] |") != std::string::npos);
}

TEST_CASE("a result file larger than 1 GiB is refused before it is read") {
  TempDir dir;
  const auto path = dir / "huge.json";
  std::ofstream(path) << "{";
  fs::resize_file(path, std::uint64_t(3) << 30);  // sparse: no disk is used
  CHECK_THROWS_WITH_AS(sdpa::report::read_result_file(path.string()),
                       (path.string() + ": refusing to read a result file of 3 GiB (3221225472 "
                                        "bytes); the limit is 1 GiB")
                           .c_str(),
                       sdpa::InputError);
}

TEST_CASE("human_bytes") {
  CHECK(sdpa::human_bytes(300) == "300 bytes");
  CHECK(sdpa::human_bytes(1536) == "1.5 KiB");
  CHECK(sdpa::human_bytes(double(std::uint64_t(1) << 40)) == "1 TiB");
}
