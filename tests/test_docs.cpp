// The documents stay true of the code and of each other: every section of a docs/ page that a
// source cites exists under exactly that name (also when the citation wraps over two comment
// lines), every relative link between README.md and the docs/ pages reaches a file and, with an
// #anchor, a heading of it; README.md stays short and quotes no measurement it cannot back; and
// the steps docs/contributing.md gives for adding an experiment kind or a kernel name files that
// every registered kind and kernel has.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "sdpa/experiments.hpp"
#include "test_files.hpp"

namespace fs = std::filesystem;
using sdpa::testing::slurp;

namespace {

// Markdown text with its fenced code blocks blanked out (line count kept): links and headings
// inside code are examples, not document structure.
std::string without_code(const std::string& text) {
  std::string out;
  bool in_code = false;
  std::size_t begin = 0;
  while (begin < text.size()) {
    auto end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    if (line.rfind("```", 0) == 0) {
      in_code = !in_code;
    } else if (!in_code) {
      out += line;
    }
    out += '\n';
    begin = end + 1;
  }
  return out;
}

// The headings of a Markdown file ("#", "##", ... at the start of a line, outside code).
std::vector<std::string> headings_of(const fs::path& page) {
  static const std::regex heading("(^|\n)#+ ([^\n]+)");
  const std::string text = without_code(slurp(page));
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), heading);
       it != std::sregex_iterator(); ++it)
    out.push_back((*it)[2]);
  return out;
}

// GitHub's anchor of a heading: lower case, spaces to '-', punctuation other than '-' and '_'
// dropped (bytes of multi-byte UTF-8 characters kept, as letters mostly are).
std::string anchor_of(const std::string& heading) {
  std::string out;
  for (const unsigned char c : heading) {
    if (c >= 0x80 || std::isalnum(c) || c == '-' || c == '_')
      out += char(std::tolower(c));
    else if (c == ' ')
      out += '-';
  }
  return out;
}

// The section `heading` ("## <heading>") of a Markdown file, up to the next "## ".
std::string section_of(const std::string& file, const std::string& heading) {
  const std::string text = slurp(file);
  const auto begin = text.find("\n## " + heading + "\n");
  const std::string missing = file + " has no section " + heading;
  REQUIRE_MESSAGE(begin != std::string::npos, missing);
  const auto end = text.find("\n## ", begin + 1);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
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

// README.md and every Markdown page under docs/: the documents whose links are checked.
std::vector<fs::path> documents() {
  std::vector<fs::path> out = {"README.md"};
  for (const auto& f : fs::recursive_directory_iterator("docs"))
    if (f.path().extension() == ".md") out.push_back(f.path());
  std::sort(out.begin(), out.end());
  return out;
}

struct Citation {
  std::string page;     // e.g. "docs/design.md"
  std::string section;  // the quoted name, a line break and its "//" read as one space
  bool wrapped;         // the citation spans two lines
};

// Every (docs/<page>.md, "Section") in a source's text, also inside a string literal
// (\"Section\") and also where a comment wraps between the page and the name or inside the name.
std::vector<Citation> citations_in(const std::string& text) {
  static const std::regex cited("docs/([a-z0-9_/-]+\\.md),\\s*(//\\s*)?\\\\?\"([^\"\\\\]+)\\\\?\"");
  static const std::regex comment_break("\\s*\n\\s*//\\s*");
  std::vector<Citation> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), cited);
       it != std::sregex_iterator(); ++it) {
    const std::string whole = (*it)[0];
    out.push_back({"docs/" + (*it)[1].str(), std::regex_replace((*it)[3].str(), comment_break, " "),
                   whole.find('\n') != std::string::npos});
  }
  return out;
}

}  // namespace

TEST_CASE("a citation that wraps over two comment lines is read whole") {
  const auto found = citations_in(
      "// The fused forward (docs/design.md,\n// \"Conventions for inference shapes and\n"
      "// precision\"): Q, K and V ...\n  // (docs/theory.md, \"Rounding\") and \"not cited\"");
  REQUIRE(found.size() == 2);
  CHECK(found[0].page == "docs/design.md");
  CHECK(found[0].section == "Conventions for inference shapes and precision");
  CHECK(found[0].wrapped);
  CHECK(found[1].page == "docs/theory.md");
  CHECK(found[1].section == "Rounding");
  CHECK_FALSE(found[1].wrapped);
}

TEST_CASE("every section of a docs/ page that a source cites exists, by its exact name") {
  std::map<std::string, std::vector<std::string>> headings;
  int citations = 0, wrapped = 0;
  for (const char* dir :
       {"kernels", "input", "experiments", "analysis", "kinds", "cli", "tools", "tests", "fuzz"})
    for (const auto& f : fs::recursive_directory_iterator(dir)) {
      const std::string ext = f.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".h") continue;
      for (const auto& c : citations_in(slurp(f.path()))) {
        if (c.section == "Section") continue;  // this file's own description of the form
        CAPTURE(f.path().string());
        CAPTURE(c.page);
        CAPTURE(c.section);
        ++citations;
        wrapped += c.wrapped;
        REQUIRE_MESSAGE(fs::exists(c.page), "a source cites a page that does not exist");
        if (!headings.count(c.page)) headings[c.page] = headings_of(c.page);
        const auto& h = headings[c.page];
        CHECK(std::find(h.begin(), h.end(), c.section) != h.end());
      }
    }
  CHECK(citations >= 12);
  CHECK(wrapped >= 3);  // e.g. kernels/flash_bf16.cpp's first line
}

TEST_CASE("every relative link of README.md and docs/ reaches a file and its #anchor") {
  static const std::regex link("\\]\\(([^)\\s]+)\\)");
  int checked = 0, anchors = 0;
  for (const auto& doc : documents()) {
    const std::string text = without_code(slurp(doc));
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link);
         it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[1];
      if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
      CAPTURE(doc.string());
      CAPTURE(target);
      const auto hash = target.find('#');
      const std::string file = target.substr(0, hash);
      const fs::path path = file.empty() ? doc : doc.parent_path() / file;
      ++checked;
      REQUIRE_MESSAGE(fs::exists(path), "the link's file does not exist");
      if (hash == std::string::npos) continue;
      REQUIRE_MESSAGE(path.extension() == ".md", "an #anchor into a file that is not Markdown");
      const std::string anchor = target.substr(hash + 1);
      const auto h = headings_of(path);
      ++anchors;
      CHECK_MESSAGE(std::any_of(h.begin(), h.end(),
                                [&](const std::string& s) { return anchor_of(s) == anchor; }),
                    "no heading of that file has this anchor");
    }
  }
  CHECK(checked >= 40);
  CHECK(anchors >= 10);
}

TEST_CASE("GitHub's anchors of headings") {
  CHECK(anchor_of("Sweeps over many machines: shards, merge, Slurm") ==
        "sweeps-over-many-machines-shards-merge-slurm");
  CHECK(anchor_of("Tables, CSV and plots: `report`") == "tables-csv-and-plots-report");
  CHECK(anchor_of("Conventions for inference shapes and precision") ==
        "conventions-for-inference-shapes-and-precision");
}

TEST_CASE("README.md is short, and every measurement in it is checked or cites its perf-log") {
  const std::string readme = slurp("README.md");
  CHECK(std::count(readme.begin(), readme.end(), '\n') <= 200);
  // A number with a unit of time, rate or share, outside code blocks (the sample output in them
  // is checked against the committed results by tests/test_results.cpp). "95 %" is the level of
  // the confidence intervals, not a measurement.
  static const std::regex measured(
      "[0-9][0-9.,]*\\s?(ms|µs|ns|s|min|GB/s|GFLOP/s|G ops/s|×|%)([^A-Za-z0-9]|$)");
  const std::string prose = without_code(readme);
  int measurements = 0;
  std::size_t begin = 0;
  while (begin < prose.size()) {
    auto end = prose.find("\n\n", begin);
    if (end == std::string::npos) end = prose.size();
    const std::string paragraph = prose.substr(begin, end - begin);
    begin = end + 2;
    const std::string without_level = std::regex_replace(paragraph, std::regex("95 %"), "");
    if (!std::regex_search(without_level, measured)) continue;
    CAPTURE(paragraph);
    ++measurements;
    CHECK_MESSAGE(paragraph.find("docs/perf-log/") != std::string::npos,
                  "a measurement in README.md's prose without its perf-log entry");
  }
  CHECK(measurements <= 2);  // the two commands' durations; the rest belongs in docs/
}

TEST_CASE("docs/contributing.md's steps for adding an experiment kind name files every kind has") {
  const auto paths = paths_in(section_of("docs/contributing.md", "Adding an experiment kind"));
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

TEST_CASE("docs/contributing.md's steps for adding a kernel name where every kernel is listed") {
  const auto paths = paths_in(section_of("docs/contributing.md", "Adding a kernel"));
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
