// The documents stay true of the code: every section of docs/design.md a source cites exists,
// and the steps README.md gives for adding an experiment kind or a kernel name files that every
// registered kind and kernel has.
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "sdpa/experiments.hpp"
#include "test_files.hpp"

namespace fs = std::filesystem;
using sdpa::testing::slurp;

namespace {

// The text of README.md's section `heading` ("## <heading>"), up to the next "## ".
std::string readme_section(const std::string& heading) {
  const std::string readme = slurp("README.md");
  const auto begin = readme.find("\n## " + heading + "\n");
  const std::string missing = "README.md has no section " + heading;
  REQUIRE_MESSAGE(begin != std::string::npos, missing);
  const auto end = readme.find("\n## ", begin + 1);
  return readme.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// The paths a text names in backquotes: words with a '/' and a file's ending.
std::vector<std::string> paths_in(const std::string& text) {
  static const std::regex path(
      "`([A-Za-z0-9_<>./-]+/[A-Za-z0-9_<>.-]+\\.(cpp|hpp|json|cmake|txt))`");
  std::set<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), path); it != std::sregex_iterator();
       ++it)
    found.insert((*it)[1]);
  return {found.begin(), found.end()};
}

std::string with(std::string path, const std::string& placeholder, const std::string& value) {
  for (auto at = path.find(placeholder); at != std::string::npos; at = path.find(placeholder))
    path.replace(at, placeholder.size(), value);
  return path;
}

// The X of every `std::vector<Kernel> X_kernels();` that kernels/registry_entries.hpp declares.
std::vector<std::string> kernel_variants() {
  static const std::regex declared("std::vector<Kernel> ([a-z0-9_]+)_kernels\\(\\);");
  const std::string text = slurp("kernels/registry_entries.hpp");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), declared);
       it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

}  // namespace

TEST_CASE("every section of docs/design.md that a source cites exists") {
  std::vector<std::string> headings;
  const std::string design = slurp("docs/design.md");
  static const std::regex heading("\n#+ ([^\n]+)");
  for (auto it = std::sregex_iterator(design.begin(), design.end(), heading);
       it != std::sregex_iterator(); ++it)
    headings.push_back((*it)[1]);
  // (docs/design.md, "Section"), also inside a string literal (\"Section\").
  static const std::regex cited("docs/design\\.md, \\\\?\"([^\"\\\\]+)\\\\?\"");
  int citations = 0;
  for (const char* dir :
       {"kernels", "input", "experiments", "analysis", "kinds", "cli", "tools", "tests"})
    for (const auto& f : fs::recursive_directory_iterator(dir)) {
      const std::string ext = f.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".h") continue;
      const std::string text = slurp(f.path());
      for (auto it = std::sregex_iterator(text.begin(), text.end(), cited);
           it != std::sregex_iterator(); ++it) {
        const std::string section = (*it)[1];
        if (section == "Section") continue;  // this file's own description of the form
        CAPTURE(f.path().string());
        CAPTURE(section);
        ++citations;
        CHECK(std::any_of(headings.begin(), headings.end(),
                          [&](const std::string& h) { return h.rfind(section, 0) == 0; }));
      }
    }
  CHECK(citations >= 9);
}

TEST_CASE("README's steps for adding an experiment kind name files every kind has") {
  const auto paths = paths_in(readme_section("Adding an experiment kind"));
  int per_kind = 0;
  for (const auto& p : paths) {
    CAPTURE(p);
    if (p.find("<kind>") == std::string::npos) {
      CHECK(fs::exists(p));
      continue;
    }
    ++per_kind;
    for (const auto& k : sdpa::experiment_kinds())
      CHECK_MESSAGE(fs::exists(with(p, "<kind>", k.name)), k.name);
  }
  CHECK(per_kind >= 4);  // experiment.cpp, report.cpp, config.schema.json, record.schema.json
  // The list the steps add a line to holds every kind.
  const std::string list = slurp("kinds/kinds.cmake");
  for (const auto& k : sdpa::experiment_kinds())
    CHECK_MESSAGE(list.find("\n  " + k.name + "\n") != std::string::npos, k.name);
}

TEST_CASE("README's steps for adding a kernel name the places every kernel file is listed") {
  const auto paths = paths_in(readme_section("Adding a kernel"));
  const auto variants = kernel_variants();
  REQUIRE_FALSE(variants.empty());
  const std::string registry = slurp("kernels/registry.cpp"),
                    cmake = slurp("kernels/CMakeLists.txt");
  for (const auto& p : paths) {
    CAPTURE(p);
    if (p.find("<variant>") == std::string::npos) {
      CHECK(fs::exists(p));
      continue;
    }
    for (const auto& v : variants) CHECK_MESSAGE(fs::exists(with(p, "<variant>", v)), v);
  }
  for (const auto& v : variants) {
    CAPTURE(v);
    CHECK(registry.find("detail::" + v + "_kernels()") != std::string::npos);
    CHECK(cmake.find("  " + v + ".cpp\n") != std::string::npos);
  }
}
