// libFuzzer target: hostile strings in a real result file, through every writer of the reading
// side (Markdown tables, CSV, gnuplot scripts). The input is split at 0xff bytes into the
// experiment's name, the records' scale (series titles), the machine id and the file's path.
// Oracle: no file outside the output folder, no process started, no crash; and each output
// keeps its language's structure (a Markdown row its cells, a CSV row its fields, a gnuplot
// string literal its line, nothing run by the script).
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sdpa/experiments.hpp"
#include "sdpa/plots.hpp"
#include "sdpa/report.hpp"

namespace {

namespace fs = std::filesystem;

// A small real result file, made once.
sdpa::json base;
fs::path sandbox;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_report: %s\n", what);
  std::abort();
}

// Cells of a Markdown table row: bars not escaped by a backslash, less the outer two.
std::size_t markdown_cells(const std::string& line) {
  std::size_t bars = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\') {
      ++i;
      continue;
    }
    bars += line[i] == '|' ? 1 : 0;
  }
  return bars > 0 ? bars - 1 : 0;
}

// Checks the Markdown: rows of each table have the header's cells; no raw HTML.
void check_markdown(const std::string& md) {
  std::size_t cells = 0;
  std::size_t start = 0;
  while (start < md.size()) {
    const std::size_t end = md.find('\n', start);
    const std::string line = md.substr(start, end - start);
    start = end == std::string::npos ? md.size() : end + 1;
    if (!line.starts_with("|")) {
      cells = 0;
      continue;
    }
    const std::size_t n = markdown_cells(line);
    if (cells == 0) cells = n;
    if (n != cells) fail("a Markdown row with another number of cells than its header");
  }
  for (std::size_t i = md.find('<'); i != std::string::npos; i = md.find('<', i + 1))
    if (i + 1 < md.size() && (std::isalpha(static_cast<unsigned char>(md[i + 1])) ||
                              md[i + 1] == '/' || md[i + 1] == '!' || md[i + 1] == '?'))
      fail("raw HTML in the Markdown");
}

// Fields of a CSV text's records (RFC 4180): each record the header's count.
void check_csv(const std::string& text) {
  std::size_t fields = 1, header = 0;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"')
        ++i;
      else if (c == '"')
        quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      ++fields;
    } else if (c == '\n') {
      if (header == 0) header = fields;
      if (fields != header) fail("a CSV record with another number of fields than its header");
      fields = 1;
    }
  }
  if (quoted) fail("a CSV quote left open");
}

// A gnuplot script: outside string literals no backquote, no "system", no line that starts a
// shell command ('!'); no literal spans lines, and double-quoted ones (which gnuplot reads
// escapes and backquotes in) hold nothing but a quote.
void check_gnuplot(const std::string& gp) {
  char quote = 0;
  bool line_start = true;
  std::string outside, inside;
  for (std::size_t i = 0; i < gp.size(); ++i) {
    const char c = gp[i];
    if (quote != 0) {
      if (c == '\n') fail("a gnuplot string literal spans lines");
      if (c == quote) {
        if (quote == '"' && inside != "'") fail("a double-quoted gnuplot literal");
        quote = 0;
      } else {
        inside += c;
      }
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      inside.clear();
    } else {
      if (line_start && c == '!') fail("a gnuplot line runs a shell command");
      if (c == '`') fail("a backquote outside a gnuplot string literal");
      outside += c;
    }
    line_start = c == '\n';
  }
  if (outside.find("system") != std::string::npos) fail("system outside a literal");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("PATH", "/nonexistent", 1);  // gnuplot not found: scripts written, nothing started
  sandbox = fs::temp_directory_path() / ("fuzz_report-" + std::to_string(getpid()));
  fs::create_directories(sandbox);
  const auto config = sdpa::parse_config("f.json", R"({"name": "f", "seed": 1, "experiments": [
    {"name": "v", "kind": "variance", "d_k": [2, 4], "n_q": 2, "n_kv": 2, "trials": 3,
     "scale": ["none", "sqrt_dk"]}]})");
  sdpa::RunOptions options;
  options.output = (sandbox / "base.json").string();
  options.threads = 1;
  options.progress = false;
  base = sdpa::report::read_result_file(sdpa::run_config(config, options));
  fs::remove(sandbox / "base.json");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> parts(1);
  for (std::size_t i = 0; i < size && parts.size() <= 4; ++i)
    if (data[i] == 0xff)
      parts.emplace_back();
    else
      parts.back() += char(data[i]);
  parts.resize(4);
  sdpa::json doc = base;
  doc["experiments"][0]["name"] = parts[0];
  for (auto& r : doc["experiments"][0]["records"])
    r["params"]["scale"] = parts[1] + (r["cell"].get<int>() % 2 ? "" : "-2");
  doc["machine_id"] = parts[2];
  // The writers see what the reader would pass: strings that are not UTF-8 are refused there.
  std::string text;
  try {
    text = sdpa::report::result_file_text(doc);
    doc = sdpa::report::parse_result_file(parts[3], text);
  } catch (const sdpa::InputError&) {
    return 0;
  } catch (const sdpa::json::exception&) {  // invalid UTF-8: dump refuses it
    return 0;
  }
  const std::vector<sdpa::report::ResultFile> files = {{parts[3], doc}, {"other.json", base}};
  check_markdown(sdpa::report::markdown(sdpa::report::tables({doc, base})));
  for (const auto& csv : sdpa::report::csv_files(files)) {
    if (csv.name.find('/') != std::string::npos || csv.name.starts_with("."))
      fail("a CSV file name that leaves its folder");
    check_csv(csv.text);
  }
  const fs::path out = sandbox / "out";
  const auto plots = sdpa::plots::write_plots(files, (out / "plots").string());
  check_markdown(sdpa::report::index_markdown(files, plots.plots, {}));
  for (const auto& entry : fs::recursive_directory_iterator(sandbox)) {
    const fs::path relative = fs::relative(entry.path(), sandbox);
    if (*relative.begin() != "out") fail("a file outside the output folder");
    if (entry.path().extension() == ".gp") check_gnuplot(slurp(entry.path()));
  }
  if (waitpid(-1, nullptr, WNOHANG) != -1 || errno != ECHILD) fail("a process was started");
  fs::remove_all(out);
  return 0;
}
