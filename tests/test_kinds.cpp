// An experiment kind is whole: its writing side (experiments) and its reading side (report)
// registered under one name, its schema parts assembled into the schemas sdpa-bench checks
// against, every parameter the plan reads described there, and the committed copies of the
// assembled schemas (configs/schema.json, results/schema.json) and the reference written from
// them (docs/configs.md) up to date.
#include <doctest/doctest.h>

#include "sdpa/config_reference.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/report.hpp"
#include "test_files.hpp"

using sdpa::json;

TEST_CASE("the writing side and the reading side register the same kinds, in the same order") {
  std::vector<std::string> writing;
  for (const auto& k : sdpa::experiment_kinds()) {
    writing.push_back(k.name);
    CHECK_MESSAGE(bool(k.run_cell), k.name);
    CHECK_MESSAGE(bool(k.memory_bytes), k.name);
    CHECK_MESSAGE(!k.axes.empty(), k.name);
  }
  CHECK_FALSE(writing.empty());
  CHECK(writing == sdpa::report::kind_names());
}

TEST_CASE("each kind's schema parts describe every parameter its plan reads, and its records") {
  const json& config = sdpa::config_schema();
  const json& result = sdpa::report::result_schema();
  for (const auto& k : sdpa::experiment_kinds()) {
    CAPTURE(k.name);
    REQUIRE(config["definitions"].contains(k.name));
    const json& parameters = config["definitions"][k.name]["properties"];
    for (const auto& axis : k.axes) CHECK_MESSAGE(parameters.contains(axis), axis);
    for (const auto& [old, now] : k.renamed) {
      CHECK_MESSAGE(parameters.contains(old), old);
      CHECK_MESSAGE(parameters.contains(now), now);
    }
    CHECK(result["definitions"].contains(k.name + "_record"));
  }
  CHECK(result["properties"]["schema_version"]["const"] == sdpa::kResultSchemaVersion);
}

TEST_CASE("configs/schema.json and results/schema.json are the schemas assembled from kinds/") {
  const auto committed = [](const char* path) { return json::parse(sdpa::testing::slurp(path)); };
  CHECK_MESSAGE(committed("configs/schema.json") == sdpa::config_schema(),
                "configs/schema.json is out of date: run `make schemas`");
  CHECK_MESSAGE(committed("results/schema.json") == sdpa::report::result_schema(),
                "results/schema.json is out of date: run `make schemas`");
}

TEST_CASE("docs/configs.md is the reference written from the assembled config schema") {
  const std::string reference = sdpa::config_reference_markdown();
  CHECK_MESSAGE(sdpa::testing::slurp("docs/configs.md") == reference,
                "docs/configs.md is out of date: run `make schemas`");
  // Every parameter of every kind is in it, under its kind's heading.
  const sdpa::json& schema = sdpa::config_schema();
  for (const auto& kind : sdpa::experiment_kinds()) {
    const auto at = reference.find("\n## `" + kind.name + "`\n");
    REQUIRE_MESSAGE(at != std::string::npos, kind.name);
    const auto end = reference.find("\n## ", at + 1);
    const std::string section = reference.substr(at, end - at);
    for (const auto& [name, property] : schema["definitions"][kind.name]["properties"].items())
      if (name != "name" && name != "kind" && name != "description")
        CHECK_MESSAGE(section.find("| `" + name + "` |") != std::string::npos,
                      std::string(kind.name + "." + name));
  }
}
