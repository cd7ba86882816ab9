// libFuzzer target: hostile strings in a real result file, through every writer of the reading
// side (Markdown tables, CSV, gnuplot scripts, the site's Markdown and HTML pages), written to
// disk as `report --out-dir --format both --plots --html` writes them. The input is split at
// 0xff bytes into the experiment's name, the records' scale (series titles), the machine's
// descriptions (with the suite's commit and the config's path) and the file's path. Oracle: no file
// outside the output folder (a walk of the sandbox around it), no file the writers did not name, no
// process started (no new child left, and none reaped: the children's page faults stay unchanged),
// no crash; and each output keeps its language's structure (a Markdown row its cells, a CSV row its
// fields, a gnuplot string literal its line, an HTML page only the writer's own elements and
// attributes). An input holding the canary's name "pwned" (the dictionary's payloads `!touch
// pwned`, `system("touch pwned")`, ...) is also rendered by the real gnuplot: a payload that ran
// would leave a file "pwned" where gnuplot runs, which the walk finds.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sdpa/experiments.hpp"
#include "sdpa/plots.hpp"
#include "sdpa/report.hpp"
#include "sdpa/site.hpp"

namespace {

namespace fs = std::filesystem;

// A small real result file, made once.
sdpa::json base;
fs::path sandbox;
std::string search_path;  // the PATH the fuzzer was started with, for the canary's gnuplot

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
                              md[i + 1] == '/' || md[i + 1] == '!' || md[i + 1] == '?')) {
      const std::size_t from = md.rfind('\n', i) == std::string::npos ? 0 : md.rfind('\n', i) + 1;
      std::fprintf(stderr, "in: %s\n", md.substr(from, md.find('\n', i) - from).c_str());
      fail("raw HTML in the Markdown");
    }
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

// An HTML page: only the elements and attributes the site's writer uses, each attribute
// double-quoted, links inside the site (no scheme, no absolute path), no '>' in text.
void check_html(const std::string& html) {
  static const std::set<std::string> elements = {
      "html", "head", "meta", "title",  "style", "body",  "nav",   "a",          "h1",
      "h2",   "h3",   "p",    "ul",     "li",    "table", "thead", "tbody",      "tr",
      "th",   "td",   "div",  "figure", "img",   "pre",   "code",  "figcaption", "strong"};
  static const std::set<std::string> attributes = {"lang", "charset", "name", "content",
                                                   "href", "src",     "alt",  "class"};
  const auto word = [&](std::size_t& i) {
    std::string w;
    while (i < html.size() && (std::isalnum(static_cast<unsigned char>(html[i])) || html[i] == '-'))
      w += html[i++];
    return w;
  };
  std::size_t i = 0;
  while (i < html.size()) {
    if (html[i] == '>') fail("a '>' in the text of an HTML page");
    if (html[i] != '<') {
      ++i;
      continue;
    }
    ++i;
    if (html.compare(i, 9, "!DOCTYPE ") == 0) {
      i = html.find('>', i) + 1;
      continue;
    }
    if (i < html.size() && html[i] == '/') ++i;
    const std::string element = word(i);
    if (!elements.count(element)) fail("an element the site's writer does not use");
    while (i < html.size() && html[i] != '>') {
      if (html[i] == ' ') {
        ++i;
        continue;
      }
      const std::string attribute = word(i);
      if (!attributes.count(attribute)) fail("an attribute the site's writer does not use");
      if (html.compare(i, 2, "=\"") != 0) fail("an HTML attribute value not double-quoted");
      const std::size_t end = html.find('"', i + 2);
      if (end == std::string::npos) fail("an HTML attribute value left open");
      const std::string value = html.substr(i + 2, end - i - 2);
      if (value.find('<') != std::string::npos) fail("a '<' in an HTML attribute value");
      if ((attribute == "href" || attribute == "src") &&
          (value.find(':') != std::string::npos || value.starts_with("/")))
        fail("a link that leaves the site");
      i = end + 1;
    }
    if (i >= html.size()) fail("an HTML tag left open");
    ++i;
    if (element == "style") i = html.find("</style>", i);
  }
}

// `relative` joined to `root`, refused when it would leave root (an absolute path, a "..").
fs::path inside(const fs::path& root, const std::string& relative) {
  const fs::path p = fs::path(relative).lexically_normal();
  if (relative.empty() || p.is_absolute() || *p.begin() == "..")
    fail("a written file's name leaves its folder");
  return root / p;
}

void write(const fs::path& path, const std::string& text, std::set<fs::path>& written) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
  written.insert(path);
}

// This process's children, living or not yet reaped (libFuzzer's own, such as the symbolizer
// it starts to name new functions, included: callers compare two calls).
std::set<long> children() {
  std::set<long> pids;
  for (const auto& task : fs::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "children");
    for (long pid; in >> pid;) pids.insert(pid);
  }
  return pids;
}

// The page faults of this process's children that ended and were waited for: any process
// started (and reaped) since the last call makes it grow.
long children_faults() {
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  return usage.ru_minflt + usage.ru_majflt;
}

// Runs args[0] (a path) with args in dir and waits for it.
void run(const std::string& dir, const std::vector<std::string>& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (chdir(dir.c_str()) == 0) execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
}

// The oracle's canaries work: a running child shows in children(), a process started and
// reaped in children_faults(), and a gnuplot script that runs `touch pwned` (by '!' and by
// system) leaves the file behind. Without this, a canary that cannot fire would pass every input.
void check_canaries() {
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  const bool seen = children().count(child) == 1;
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  if (!seen) fail("the process canary does not see a running child");
  const long faults = children_faults();
  const std::set<long> running = children();
  run("/", {"/bin/true"});
  if (children_faults() == faults) fail("the process canary does not see a process");
  std::istringstream dirs(search_path);
  std::string gnuplot;
  for (std::string d; gnuplot.empty() && std::getline(dirs, d, ':');)
    if (!d.empty() && fs::exists(fs::path(d) / "gnuplot")) gnuplot = (fs::path(d) / "gnuplot");
  if (gnuplot.empty()) fail("gnuplot not found: the canary needs it (tools/setup.sh installs it)");
  const fs::path dir = sandbox / "canary";
  fs::create_directories(dir);
  std::ofstream(dir / "run.gp") << "!touch pwned\nx = system('touch pwned2')\n";
  setenv("PATH", search_path.c_str(), 1);
  run(dir.string(), {gnuplot, "run.gp"});
  setenv("PATH", "/nonexistent", 1);
  if (!fs::exists(dir / "pwned") || !fs::exists(dir / "pwned2"))
    fail("the gnuplot canary does not fire on a script that runs touch");
  fs::remove_all(dir);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* path = std::getenv("PATH");
  search_path = path ? path : "";
  setenv("PATH", "/nonexistent", 1);  // gnuplot not found: scripts written, nothing started
  sandbox = fs::temp_directory_path() / ("fuzz_report-" + std::to_string(getpid()));
  fs::create_directories(sandbox);
  check_canaries();
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
  // The machine's id is a pattern's; its descriptions, the suite's commit and the config's path
  // are free text that captions and the index show.
  for (const char* at : {"/machine/cpu_model", "/machine/os", "/machine/microarchitecture",
                         "/suite/git_commit", "/suite/compiler", "/config/path"})
    doc[sdpa::json::json_pointer(at)] = parts[2];
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
  const bool canary =
      std::string(reinterpret_cast<const char*>(data), size).find("pwned") != std::string::npos;
  const long faults = children_faults();
  const std::set<long> running = children();
  const std::vector<sdpa::report::ResultFile> files = {{parts[3], doc}, {"other.json", base}};
  // Deep in the sandbox, so that a name climbing out by "../" lands where the walk looks.
  const fs::path out = sandbox / "a" / "b" / "c" / "d" / "out", html = out / "site";
  std::set<fs::path> written;  // every file the writers name, as the CLI writes them
  check_markdown(sdpa::report::markdown(sdpa::report::tables({doc, base})));
  for (const auto& csv : sdpa::report::csv_files(files)) {
    if (csv.name.find('/') != std::string::npos || csv.name.starts_with("."))
      fail("a CSV file name that leaves its folder");
    check_csv(csv.text);
    write(inside(out / "csv", csv.name), csv.text, written);
  }
  if (canary) setenv("PATH", search_path.c_str(), 1);
  sdpa::plots::Output plots;
  try {
    plots = sdpa::plots::write_plots(files, (out / "plots").string());
  } catch (const sdpa::InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    fail("gnuplot failed on a script of hostile names");
  }
  setenv("PATH", "/nonexistent", 1);
  if (plots.rendered != canary) fail("plots rendered without gnuplot, or not with it");
  for (const auto& p : plots.plots)
    for (const char* ext : {".gp", ".svg", ".png"})
      if (std::string(ext) == ".gp" || plots.rendered)
        written.insert(inside(out / "plots", p.name + ext));
  // The site's pages in both formats, with the links and data copies `report` gives them.
  sdpa::site::Inputs md{&files};
  md.plots = plots.plots;
  for (const auto& f : files)
    md.data_links.push_back(fs::path(f.path).lexically_proximate(out).generic_string());
  for (const auto& page : sdpa::site::pages(md)) {
    const std::string text = sdpa::site::markdown(page);
    check_markdown(text);
    write(inside(out, sdpa::site::markdown_file(page.path)), text, written);
  }
  sdpa::site::Inputs site{&files};
  site.plots = plots.plots;
  site.data_links = sdpa::site::data_files(files);
  for (std::size_t i = 0; i < files.size(); ++i)
    write(inside(html, site.data_links[i]), files[i].doc.dump(), written);
  for (const auto& page : sdpa::site::pages(site)) {
    const std::string text = sdpa::site::html(page);
    check_html(text);
    write(inside(html, sdpa::site::html_file(page.path)), text, written);
  }
  for (const auto& entry : fs::recursive_directory_iterator(sandbox)) {
    if (entry.is_directory()) continue;
    if (!written.count(entry.path())) {
      std::fprintf(stderr, "unexpected file: %s\n", entry.path().c_str());
      fail(*fs::relative(entry.path(), out).begin() == ".."
               ? "a file outside the output folder"
               : "a file the writers did not name (a command ran?)");
    }
    if (entry.path().extension() == ".gp") check_gnuplot(slurp(entry.path()));
  }
  if (children() != running) fail("a process was left running");
  if (!canary && children_faults() != faults) fail("a process was started");
  fs::remove_all(sandbox / "a");
  return 0;
}
