// The committed tables can never drift from the committed data: regenerate them from the
// result files in results/ and compare byte for byte.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"

namespace fs = std::filesystem;
using sdpa::testing::run_cli;
using sdpa::testing::slurp;
using sdpa::testing::TempDir;

namespace {

// results/<machine-id>/*.json, sorted as the shell's glob in `make report` sorts them, less the
// runs `sdpa-bench run` names by default (<config>-<UTC time>.json, e.g. from `make run`): those
// are a user's own, not reference results.
std::vector<std::string> committed_result_files() {
  static const std::regex own_run(".*-[0-9]{8}T[0-9]{6}Z\\.json");
  std::vector<std::string> files;
  for (const auto& machine : fs::directory_iterator("results"))
    if (machine.is_directory() && machine.path().filename() != "plots" &&
        machine.path().filename() != "csv")
      for (const auto& f : fs::directory_iterator(machine.path()))
        if (f.path().extension() == ".json" &&
            !std::regex_match(f.path().filename().string(), own_run))
          files.push_back(f.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("results/README.md and results/csv regenerate byte for byte from results/*/*.json") {
  const auto files = committed_result_files();
  REQUIRE_FALSE(files.empty());
  TempDir dir;
  std::string args;
  for (const auto& f : files) args += " " + f;
  const auto r =
      run_cli("report" + args + " --format both --plots --out " + dir.path.string(), dir);
  REQUIRE(r.exit_code == 0);
  CHECK(slurp(dir / "README.md") == slurp("results/README.md"));
  for (const auto& csv : fs::directory_iterator(dir / "csv")) {
    CAPTURE(csv.path().filename().string());
    CHECK(slurp(csv.path()) == slurp(fs::path("results/csv") / csv.path().filename()));
  }
}

TEST_CASE("results/claims.md regenerates byte for byte from the results the claims read") {
  // As `make report` calls it: the first committed file of each config the claims' registry
  // names (`claims --list-inputs`), in that order.
  TempDir dir;
  const auto listed = run_cli("claims --list-inputs", dir);
  REQUIRE(listed.exit_code == 0);
  std::istringstream configs(listed.out);
  std::string files, config;
  const auto all = committed_result_files();
  int count = 0;
  while (std::getline(configs, config)) {
    CAPTURE(config);
    const auto f = std::find_if(all.begin(), all.end(), [&](const std::string& p) {
      return fs::path(p).filename() == fs::path(config).filename();
    });
    REQUIRE(f != all.end());
    files += " " + *f;
    ++count;
  }
  REQUIRE(count > 0);
  const auto r = run_cli("claims" + files, dir);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == slurp("results/claims.md"));
}
