// The committed tables and plots can never drift from the committed data: regenerate them from
// the result files in results/ and compare byte for byte, and no file is left that the
// regeneration would not write; the same for the output README.md quotes.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
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
        machine.path().filename() != "csv" && machine.path().filename() != "experiments")
      for (const auto& f : fs::directory_iterator(machine.path()))
        if (f.path().extension() == ".json" &&
            !std::regex_match(f.path().filename().string(), own_run))
          files.push_back(f.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

// The file names of a folder, sorted.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  if (fs::is_directory(dir))
    for (const auto& f : fs::directory_iterator(dir)) names.push_back(f.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST_CASE(
    "results/: README.md, experiments/, csv/ and plots/ regenerate byte for byte, and nothing "
    "else is there") {
  const auto files = committed_result_files();
  REQUIRE_FALSE(files.empty());
  // As `make report` calls it, in a folder of its own: the same paths (results/<machine>/<file>,
  // links to the committed files) and --out-dir results, the plots' scripts outside it.
  TempDir dir;
  std::string args;
  for (const auto& f : files) {
    fs::create_directories((dir / f).parent_path());
    fs::create_symlink(fs::absolute(f), dir / f);
    args += " " + f;
  }
  const auto r =
      run_cli("report" + args + " --format both --plots --out-dir results --plot-scripts " +
                  (dir / "scripts").string(),
              dir, "cd " + dir.path.string() + " && ");
  REQUIRE(r.exit_code == 0);
  const fs::path out = dir / "results";
  // The pages at the top (README.md, ggml.md where the files time ggml), each the same bytes.
  std::vector<std::string> pages;
  for (const auto& name : names_in(out))
    if (!fs::is_directory(out / name)) {
      CAPTURE(name);
      pages.push_back(name);
      CHECK(slurp(out / name) == slurp(fs::path("results") / name));
    }
  CHECK(std::find(pages.begin(), pages.end(), "README.md") != pages.end());
  // The same files, none stale and none missing, each the same bytes: the pages, the tables,
  // and each plot's SVG and PNG (gnuplot's and cairo's output is deterministic on one system).
  for (const char* sub : {"experiments", "csv", "plots"}) {
    CAPTURE(sub);
    const auto generated = names_in(out / sub), committed = names_in(fs::path("results") / sub);
    const auto not_in = [](const std::vector<std::string>& a, const std::vector<std::string>& b) {
      std::string out;
      for (const auto& name : a)
        if (!std::binary_search(b.begin(), b.end(), name)) out += " " + name;
      return out;
    };
    const std::string stale = not_in(committed, generated), missing = not_in(generated, committed);
    CHECK_MESSAGE(stale.empty(), "committed, but not generated (stale):", stale);
    CHECK_MESSAGE(missing.empty(), "generated, but not committed:", missing);
    for (const auto& name : generated) {
      CAPTURE(name);
      CHECK(slurp(out / sub / name) == slurp(fs::path("results") / sub / name));
    }
  }
  // At the top of results/: the generated pages and tables, the schema (tests/test_kinds.cpp
  // checks it) and one folder of result files per machine; nothing stale beside them.
  for (const auto& name : names_in("results")) {
    CAPTURE(name);
    const fs::path path = fs::path("results") / name;
    if (fs::is_directory(path)) {
      if (name == "csv" || name == "plots" || name == "experiments") continue;
      for (const auto& f : names_in(path)) {
        CAPTURE(f);
        CHECK(fs::path(f).extension() == ".json");
      }
    } else {
      CHECK((std::find(pages.begin(), pages.end(), name) != pages.end() || name == "claims.md" ||
             name == "schema.json"));
    }
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

// README.md shows real output as blocks that start with the command (`$ sdpa-bench report
// FILE...`) and quote some of its lines, "..." standing for lines left out. Each block's command is
// run on the committed files it names, and each quoted line must be a line of its output, in
// order: a number in those samples is the committed results' own.
TEST_CASE("README.md's sample output is what `sdpa-bench report` prints from committed results") {
  const std::string readme = slurp("README.md");
  const std::string fence = "```text\n$ sdpa-bench report ";
  const auto committed = committed_result_files();
  int samples = 0;
  for (auto at = readme.find(fence); at != std::string::npos; at = readme.find(fence, at + 1)) {
    const auto line_end = readme.find('\n', at + fence.size());
    const auto block_end = readme.find("\n```", line_end);
    REQUIRE(block_end != std::string::npos);
    const std::string files = readme.substr(at + fence.size(), line_end - at - fence.size());
    CAPTURE(files);
    std::istringstream names(files);
    for (std::string f; names >> f;)
      CHECK_MESSAGE(std::find(committed.begin(), committed.end(), f) != committed.end(),
                    std::string(f + " is not a committed result file"));
    TempDir dir;
    const auto r = run_cli("report " + files, dir);
    REQUIRE(r.exit_code == 0);
    std::vector<std::string> printed;
    std::istringstream out(r.out);
    for (std::string l; std::getline(out, l);) printed.push_back(l);
    std::istringstream quoted(readme.substr(line_end + 1, block_end - line_end - 1));
    auto next = printed.begin();
    int lines = 0;
    for (std::string l; std::getline(quoted, l);) {
      if (l.empty() || l == "...") continue;
      CAPTURE(l);
      const auto found = std::find(next, printed.end(), l);
      CHECK_MESSAGE(found != printed.end(), "README.md quotes a line report does not print");
      if (found != printed.end()) next = found + 1;
      ++lines;
    }
    CHECK(lines >= 3);
    ++samples;
  }
  CHECK(samples >= 2);
}
