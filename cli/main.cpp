// sdpa-bench: subcommands only; every piece of logic lives in the libraries.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>

#include "sdpa/attend.hpp"
#include "sdpa/claims.hpp"
#include "sdpa/compare.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/input_file.hpp"
#include "sdpa/journal.hpp"
#include "sdpa/json_read.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/plots.hpp"
#include "sdpa/report.hpp"
#include "sdpa/shard.hpp"
#include "sdpa/site.hpp"

namespace {

// Help and `list` fit this many columns.
constexpr std::size_t kColumns = 100;

// Tables as Markdown: to a terminal, aligned in columns; to a file or a pipe, as they are (the
// bytes of `report`'s files and of the tests).
void print_tables(const std::string& markdown) {
  std::cout << (isatty(STDOUT_FILENO) ? sdpa::report::aligned_tables(markdown) : markdown);
}

// Loads a config; its notes (an old parameter name read under its new one) go to stderr.
sdpa::Config load_config(const std::string& path) {
  sdpa::Config config = sdpa::load_config(path);
  for (const auto& note : config.notes) std::cerr << "note: " << note << "\n";
  return config;
}

// `target` is a config, or with --resume the journal of an interrupted run (which names its
// config); `run CONFIG --resume` finds the journal itself.
int run(const std::string& target, bool resume, sdpa::RunOptions options) {
  std::optional<sdpa::Config> config;
  if (sdpa::is_journal_path(target)) {
    config = load_config(sdpa::read_journal(target).header.config_path);
    options.resume = target;
  } else {
    config = load_config(target);
    if (resume) {
      options.resume = sdpa::find_journal(*config, options.output, options.shard);
      if (options.resume.empty())
        std::cerr << "no journal of an interrupted run of " << target
                  << " found; starting afresh\n";
    }
  }
  const std::string path = sdpa::run_config(*config, options);
  print_tables(
      sdpa::report::markdown(sdpa::report::tables({sdpa::report::read_result_file(path)})));
  std::cerr << "result file: " << path << "\n";
  return 0;
}

// `time`: the config its options stand for, checked, planned and run as that config's file
// would be; without -o its result file is a temporary one.
int time_command(sdpa::TimingOptions timing, bool print_config, sdpa::RunOptions options, int argc,
                 char** argv) {
  for (int i = 0; i < argc; ++i)
    timing.description += (i == 0 ? "sdpa-bench" : " " + sdpa::shell_quoted(argv[i]));
  const std::string text = sdpa::timing_config(timing).dump(2) + "\n";
  std::optional<sdpa::Config> config;
  try {
    config = sdpa::parse_config("time", text);
  } catch (const sdpa::InputError& e) {
    throw sdpa::InputError(sdpa::timing_message(e.what()));
  }
  for (const auto& note : config->notes) std::cerr << "note: " << note << "\n";
  if (print_config) {
    std::cout << text;
    return 0;
  }
  namespace fs = std::filesystem;
  std::string folder;
  if (options.output.empty()) {
    std::string pattern = (fs::temp_directory_path() / "sdpa-bench-time-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot create a temporary folder in " +
                               fs::temp_directory_path().string());
    folder = pattern;
    options.output = folder + "/time.json";
  }
  std::string path;
  try {
    path = sdpa::run_config(*config, options);
    print_tables(
        sdpa::report::markdown(sdpa::report::tables({sdpa::report::read_result_file(path)})));
  } catch (...) {
    if (!folder.empty()) fs::remove_all(folder);
    throw;
  }
  if (folder.empty())
    std::cerr << "result file: " << path << "\n";
  else
    fs::remove_all(folder);
  return 0;
}

int validate(const std::string& config_path) {
  const sdpa::Config config = load_config(config_path);
  std::size_t cells = 0;
  const auto plan = sdpa::make_plan(config);
  for (const auto& p : plan) cells += p.cells.size();
  std::cout << config_path << ": valid (" << plan.size() << " experiment(s), " << cells
            << " cell(s), sha256 " << config.sha256.substr(0, 12) << ")\n";
  return 0;
}

// `text` in lines of at most `width` columns (UTF-8 characters), broken at spaces.
std::vector<std::string> wrapped(const std::string& text, std::size_t width) {
  const auto columns = [](const std::string& s) {
    return std::size_t(
        std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
  };
  std::vector<std::string> lines(1);
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!lines.back().empty() && columns(lines.back()) + 1 + columns(word) > width)
      lines.emplace_back();
    lines.back() += (lines.back().empty() ? "" : " ") + word;
    start = end + 1;
  }
  return lines;
}

// Rows, each column as wide as its widest cell; the last (a description) wrapped in a column
// of its own when there is room for one of 40, else in lines below its row.
void print_columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i + 1 < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  std::size_t indent = 2;
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) indent += widths[i] + 2;
  const bool beside = indent + 40 <= kColumns;
  for (const auto& row : rows) {
    std::string line = "  ";
    for (std::size_t i = 0; i + 1 < row.size(); ++i)
      line += row[i] + std::string(widths[i] - row[i].size() + 2, ' ');
    if (!beside) {
      while (!line.empty() && line.back() == ' ') line.pop_back();
      std::cout << line << "\n";
      line.clear();
    }
    const std::size_t at = beside ? indent : 6;
    const auto description = wrapped(row.back(), kColumns - at);
    for (std::size_t l = 0; l < description.size(); ++l)
      std::cout << (l == 0 && beside ? line : std::string(at, ' ')) << description[l] << "\n";
  }
}

int list() {
  std::cout << "experiment kinds:\n";
  std::vector<std::vector<std::string>> kinds;
  for (const auto& k : sdpa::experiment_kinds()) kinds.push_back({k.name, k.description});
  print_columns(kinds);
  std::cout << "kernels (on this machine):\n";
  std::vector<std::vector<std::string>> kernels = {
      {"name", "family", "isa", "precision", "backward", "description"}};
  for (const auto& k : sdpa::kernel_registry())
    kernels.push_back(
        {k.name, k.family, k.isa, k.precision, k.backward ? "yes" : "no", k.description});
  print_columns(kernels);
  return 0;
}

int info(bool id_only) {
  sdpa::json machine = sdpa::machine_fingerprint();
  if (id_only) {
    std::cout << sdpa::machine_id(machine) << "\n";
    return 0;
  }
  sdpa::json out = {{"machine_id", sdpa::machine_id(machine)},
                    {"machine", machine},
                    {"suite", sdpa::suite_info()}};
  std::cout << out.dump(2) << "\n";
  return 0;
}

// --allow-edited of report, compare, claims and merge: how their result files are read.
sdpa::report::ReadOptions read_options;

struct ReportOptions {
  std::vector<std::string> files;
  std::string format = "md";
  std::string out;
  bool plots = false;
  std::string html;          // folder of the static site
  std::string plot_scripts;  // folder of the gnuplot scripts (default: beside the plots)
};

std::vector<sdpa::NamedPath> inputs_named(const std::vector<std::string>& files,
                                          const std::string& role) {
  std::vector<sdpa::NamedPath> named;
  named.reserve(files.size());
  for (const auto& f : files) named.push_back({f, role});
  return named;
}

// The bytes of a file already read as a result file, for the site's copy of it.
std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Result files as the JSON readers name them (sdpa/json_read.hpp).
template <class File>
std::vector<sdpa::NamedJson> named(const std::vector<File>& files) {
  std::vector<sdpa::NamedJson> out;
  out.reserve(files.size());
  for (const auto& f : files) out.push_back({f.path, &f.doc});
  return out;
}

int write_report(const ReportOptions& o, const std::vector<sdpa::report::ResultFile>& results);

int report(const ReportOptions& o) {
  if (o.out.empty() && (o.format != "md" || o.plots))
    throw sdpa::InputError("report: --format csv|both and --plots write files; give --out-dir DIR");
  namespace fs = std::filesystem;
  const auto inputs = inputs_named(o.files, "a result file to report on");
  if (!o.out.empty()) {
    sdpa::check_output_folder("--out-dir", o.out, {"README.md"}, inputs);
    if (o.format != "md")
      sdpa::check_output_folder("--out-dir", (fs::path(o.out) / "csv").string(), {}, inputs);
    if (o.plots)
      sdpa::check_output_folder("--out-dir", (fs::path(o.out) / "plots").string(), {}, inputs);
    if (o.format != "csv")
      sdpa::check_output_folder("--out-dir", (fs::path(o.out) / "experiments").string(), {},
                                inputs);
  }
  if (!o.html.empty())
    for (const char* sub : {"", "plots", "experiments", "data"})
      sdpa::check_output_folder("--html", (fs::path(o.html) / sub).string(), {}, inputs);
  if (!o.plot_scripts.empty())
    sdpa::check_output_folder("--plot-scripts", o.plot_scripts, {}, inputs);
  std::vector<sdpa::report::ResultFile> results;
  int status = 0;
  for (const auto& f : o.files) {
    try {
      results.push_back({f, sdpa::report::read_result_file(f, read_options)});
    } catch (const sdpa::InputError& e) {
      std::cerr << "error: " << e.what() << "\n";  // report on the others
      status = 2;
    }
  }
  // Tables to stdout: the others' tables printed, the exit code says one was bad.
  if (o.out.empty() && o.html.empty()) {
    std::vector<sdpa::json> docs;
    docs.reserve(results.size());
    for (const auto& r : results) docs.push_back(r.doc);
    std::vector<sdpa::NamedJson> files;
    for (std::size_t i = 0; i < docs.size(); ++i) files.push_back({results[i].path, &docs[i]});
    print_tables(sdpa::at_paths(
        files, "report", [&] { return sdpa::report::markdown(sdpa::report::tables(docs)); }));
    return status;
  }
  if (status != 0) return status;  // a bad input writes nothing, all or nothing
  return sdpa::at_paths(named(results), "report", [&] { return write_report(o, results); });
}

// report's files, once every input is read.
int write_report(const ReportOptions& o, const std::vector<sdpa::report::ResultFile>& results) {
  namespace fs = std::filesystem;
  const auto inputs = inputs_named(o.files, "a result file to report on");
  std::vector<std::pair<std::string, std::string>> files;  // written together, all or nothing
  std::vector<std::string> csv_names;
  if (!o.out.empty() && o.format != "md") {
    for (const auto& c : sdpa::report::csv_files(results)) {
      files.emplace_back((fs::path(o.out) / "csv" / c.name).string(), c.text);
      csv_names.push_back("csv/" + c.name);
    }
  }
  if (!o.out.empty()) {
    sdpa::site::Inputs in{&results};
    in.csv_files = csv_names;
    if (o.plots) {
      const auto p =
          sdpa::plots::write_plots(results, (fs::path(o.out) / "plots").string(), o.plot_scripts);
      if (!p.message.empty()) std::cerr << "report: " << p.message << "\n";
      if (p.rendered) in.plots = p.plots;  // pages show images, not scripts
    }
    for (const auto& r : results)
      in.data_links.push_back(fs::path(r.path).lexically_proximate(o.out).generic_string());
    // The claims are `sdpa-bench claims`'s to write in Markdown (results/claims.md).
    if (o.format != "csv")
      for (const auto& page : sdpa::site::pages(in))
        if (page.path != "claims")
          files.emplace_back((fs::path(o.out) / sdpa::site::markdown_file(page.path)).string(),
                             sdpa::site::markdown(page));
  }
  if (!o.html.empty()) {
    sdpa::site::Inputs in{&results};
    const auto p =
        sdpa::plots::write_plots(results, (fs::path(o.html) / "plots").string(), o.plot_scripts);
    if (!p.message.empty()) std::cerr << "report: " << p.message << "\n";
    if (p.rendered) in.plots = p.plots;
    // A copy of each result file in the site, so its pages link to what they were built from.
    in.data_links = sdpa::site::data_files(results);
    for (std::size_t i = 0; i < results.size(); ++i)
      files.emplace_back((fs::path(o.html) / in.data_links[i]).string(),
                         file_bytes(results[i].path));
    for (const auto& page : sdpa::site::pages(in))
      files.emplace_back((fs::path(o.html) / sdpa::site::html_file(page.path)).string(),
                         sdpa::site::html(page));
  }
  for (const auto& [path, text] : files)  // their names are known only now
    sdpa::check_output_file(o.html.empty() || path.rfind(o.html, 0) != 0 ? "--out-dir" : "--html",
                            path, inputs);
  sdpa::write_files_atomically(files);
  std::cerr << "report: written to " << (o.out.empty() ? o.html : o.out) << "\n";
  return 0;
}

int merge(const std::vector<std::string>& files, const std::string& output) {
  const auto inputs = inputs_named(files, "a shard's result file");
  sdpa::check_output_file("-o", output, inputs);
  std::vector<std::pair<std::string, sdpa::json>> shards;
  shards.reserve(files.size());
  for (const auto& f : files)
    shards.emplace_back(f, sdpa::report::read_result_file(f, read_options));
  std::vector<sdpa::NamedJson> named_shards;
  for (const auto& [path, doc] : shards) named_shards.push_back({path, &doc});
  std::string text = sdpa::report::result_file_text(
      sdpa::at_paths(named_shards, "merge", [&] { return sdpa::merge_shards(shards); }));
  sdpa::report::parse_result_file(output, text);  // a file `report` reads, or nothing
  sdpa::write_file_atomically(output, text);
  std::cerr << "merged " << files.size() << " shards into " << output << "\n";
  return 0;
}

int slurm(const std::string& config_path, const std::string& shards, std::string folder,
          const std::vector<std::string>& sbatch_options) {
  namespace fs = std::filesystem;
  const sdpa::Config config = sdpa::load_config(config_path);
  const int count = int(sdpa::parse_number_option(
      "--shards", shards, {.integer = true, .min = 1, .max = double(sdpa::kMaxCells)}));
  if (folder.empty()) folder = "slurm/" + config.name;
  // The tasks run the executable and the config where they are now, by absolute path (a
  // cluster's nodes share the file system they are on).
  const auto scripts = sdpa::slurm_scripts(
      config, count, folder, fs::canonical("/proc/self/exe").string(), sbatch_options);
  std::vector<std::string> names;
  for (const auto& [path, text] : scripts.files) names.push_back(fs::path(path).filename());
  sdpa::check_output_folder("--out-dir", folder, names, {{config_path, "the config"}});
  sdpa::write_files_atomically(scripts.files);
  for (const auto& [path, text] : scripts.files)
    fs::permissions(path, path.ends_with(".sh") ? fs::perms(0755) : fs::perms(0644));
  std::cout << "wrote " << folder << "/{array.sbatch,merge.sbatch,submit.sh}; submit with\n  sh "
            << scripts.files.back().first << "\nthe merged result file will be " << scripts.merged
            << "\n";
  return 0;
}

int claims(const std::vector<std::string>& files, const std::string& output) {
  if (!output.empty()) sdpa::check_output_file("-o", output, inputs_named(files, "an input"));
  std::vector<sdpa::json> results;
  results.reserve(files.size());
  for (const auto& f : files) results.push_back(sdpa::report::read_result_file(f, read_options));
  std::vector<sdpa::claims::Source> sources;
  sources.reserve(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) sources.push_back({&results[i], files[i]});
  std::string text = sdpa::claims::markdown(sdpa::claims::evaluate(sources), files);
  for (std::size_t i = 0; i < files.size(); ++i)
    if (sdpa::report::edited(results[i]))
      text += "\n**Edited:** " + sdpa::markdown_code(files[i]) +
              " does not match its checksum (read with --allow-edited).\n";
  if (output.empty())
    print_tables(text);
  else
    sdpa::write_file_atomically(output, text);
  return 0;
}

int compare(const std::vector<std::string>& paths, const std::string& format,
            const std::string& out_dir) {
  // compare-N.csv: one per table, at most one per experiment of the first file and a few more.
  if (!out_dir.empty())
    sdpa::check_output_folder("--out-dir", out_dir, {"compare.md"},
                              inputs_named(paths, "an input"));
  std::vector<sdpa::compare::ResultFile> files;
  int status = 0;
  for (const auto& p : paths) {
    try {
      files.push_back({p, sdpa::report::read_result_file(p, read_options)});
    } catch (const sdpa::InputError& e) {
      std::cerr << "error: " << e.what() << "\n";  // name every bad file, then stop
      status = 2;
    }
  }
  if (status != 0) return status;
  const auto tables =
      sdpa::at_paths(named(files), "compare", [&] { return sdpa::compare::tables(files); });
  std::string csv;
  for (const auto& t : tables)
    csv += (csv.empty() ? "# " : "\n# ") + t.title + "\n" + sdpa::compare::csv(t);
  if (!out_dir.empty()) {
    std::vector<std::pair<std::string, std::string>> outputs = {
        {out_dir + "/compare.md", sdpa::report::markdown(tables)}};
    for (std::size_t i = 0; i < tables.size(); ++i)
      outputs.emplace_back(out_dir + "/compare-" + std::to_string(i + 1) + ".csv",
                           sdpa::compare::csv(tables[i]));
    for (const auto& [path, text] : outputs)  // the CSV names are known only now
      sdpa::check_output_file("--out-dir", path, inputs_named(paths, "an input"));
    sdpa::write_files_atomically(outputs);
  }
  if (format == "csv")
    std::cout << csv;
  else
    print_tables(sdpa::report::markdown(tables));
  if (!out_dir.empty())
    std::cerr << "wrote " << out_dir << "/compare.md and compare-1.csv .. compare-" << tables.size()
              << ".csv (one per table, in order)\n";
  return 0;
}

// Everything after the first "--" is Google Benchmark's (for `run`); CLI11 sees the rest.
std::vector<std::string> split_passthrough(int& argc, char** argv) {
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--") {
      for (int j = i + 1; j < argc; ++j) rest.push_back(argv[j]);
      argc = i;
      break;
    }
  return rest;
}

int run_attend(const sdpa::AttendOptions& options) {
  for (const auto& f : sdpa::attend(options)) std::cerr << "wrote " << f << "\n";
  return 0;
}

// The first word of the command line that is not an option: the subcommand, if any (the
// program's own options, --help and --version, take no value).
std::string first_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-') return argv[i];
  return "";
}

bool is_subcommand(const CLI::App& app, const std::string& word) {
  const auto subs = app.get_subcommands({});
  return std::any_of(subs.begin(), subs.end(),
                     [&](const auto* sub) { return sub->check_name(word); });
}

// A subcommand that does not exist, named with the nearest one (sdpa::closest, as for kernels,
// kinds and options), or with them all when none is near. CLI11 would print the program's help
// for `frob --help` and exit 0.
std::string unknown_subcommand(const CLI::App& app, const std::string& word) {
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
  if (word.empty()) return "expected a subcommand (" + all + "), found none";
  const std::string hint = sdpa::closest(word, names);
  return "unknown subcommand \"" + word + "\"" +
         (hint.empty() ? "; expected one of " + all : " (did you mean \"" + hint + "\"?)");
}

// Among `words` (CLI11's "The following arguments were not expected: ..."), the first unknown
// option with a near name of `command`'s: "unknown option --thread (did you mean --threads?)",
// or "". That option alone is the mistake: CLI11 lists the words after it as well (its value,
// or the config it took for that value).
std::string unknown_option(const CLI::App& command, const std::string& words) {
  std::vector<std::string> names;
  for (const auto* option : command.get_options()) {
    if (option->get_group().empty()) continue;  // an old spelling, not to be suggested
    for (const auto& n : option->get_lnames()) names.push_back("--" + n);
    for (const auto& n : option->get_snames()) names.push_back("-" + n);
  }
  std::istringstream in(words);
  for (std::string word; in >> word;) {
    if (word.size() < 2 || word[0] != '-') continue;
    const std::string option = word.substr(0, word.find('='));
    const std::string hint = sdpa::closest(option, names);
    if (!hint.empty()) return "unknown option " + option + " (did you mean " + hint + "?)";
  }
  return "";
}

// A command-line mistake as a user reads it: CLI11's message, which names the option,
// rewritten where it does not ("A subcommand is required" for an unknown subcommand), and
// always led by the subcommand. main prints it as an error with exit code 2.
std::string usage_message(const CLI::ParseError& e, const CLI::App& app, int argc, char** argv) {
  std::string where, message = e.what();
  const CLI::App* command = &app;
  for (const auto* sub : app.get_subcommands()) where = sub->get_name() + ": ", command = sub;
  if (where.empty() && message == "A subcommand is required")
    return unknown_subcommand(app, first_word(argc, argv));
  const std::string extras = "The following argument";
  if (message.rfind(extras, 0) == 0) {
    const std::string words = message.substr(message.find(": ") + 2);
    const std::string unknown = unknown_option(*command, words);
    message = unknown.empty() ? "unexpected argument(s): " + words : unknown;
  }
  std::smatch m;
  if (std::regex_match(message, m, std::regex("(.*): 1 required \\S+ missing")))
    message = m[1].str() + ": expected a value, found none";
  else if (std::regex_match(message, m,
                            std::regex("(.*): At least (\\d+) required but received (\\d+)")))
    message = m[1].str() + ": expected at least " + m[2].str() + " values, found " + m[3].str();
  else if (std::regex_match(message, m, std::regex("(.*) is required")))
    message = "missing " + m[1].str();
  return where + message;
}

// CLI11's help with every line within kColumns: descriptions wrapped under their column.
class Formatter : public CLI::Formatter {
 public:
  Formatter() { column_width(kLeft); }
  std::string make_option_desc(const CLI::Option* option) const override {
    return lines(CLI::Formatter::make_option_desc(option), kColumns - kLeft);
  }
  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_display_name(),
                             lines(sub->get_description(), kColumns - kLeft), kLeft);
    return out.str();
  }
  std::string make_description(const CLI::App* app) const override {
    const std::string text = app->get_description();
    return text.empty() ? "" : lines(text, kColumns) + "\n";
  }

 private:
  static constexpr std::size_t kLeft = 30;
  static std::string lines(const std::string& text, std::size_t width) {
    std::string out;
    for (const auto& line : wrapped(text, width)) out += (out.empty() ? "" : "\n") + line;
    return out;
  }
};

// The old spellings of options renamed, each read into its option's value: after parsing, a
// one-line note on stderr names the new spelling.
struct OldSpellings {
  struct Old {
    const CLI::App* command;
    const CLI::Option* option;
    std::string spelling, now;
  };
  std::vector<Old> options;
  void add(CLI::App* command, const std::string& old_names, std::string& value,
           const std::string& now) {
    std::string spelling = old_names;
    std::replace(spelling.begin(), spelling.end(), ',', '/');
    options.push_back({command, command->add_option(old_names, value)->group(""), spelling, now});
  }
  // The output folder of `command`: --out-dir DIR, once spelled `old_names`.
  void out_dir(CLI::App* command, std::string& value, const std::string& help,
               const std::string& old_names) {
    command->add_option("--out-dir", value, help)->type_name("DIR");
    add(command, old_names, value, "--out-dir");
  }
  void note() const {
    for (const auto& o : options)
      if (o.option->count() > 0)
        std::cerr << "note: " << o.command->get_name() << " " << o.spelling << " is now " << o.now
                  << "; the old spelling will go\n";
  }
};

// Options given with an empty value ("-o ''") are mistakes, never "use the default".
void refuse_empty_values(const CLI::App& command) {
  for (const auto* option : command.get_options())
    if (option->count() > 0 && option->get_type_size_min() > 0)
      for (const auto& value : option->results())
        if (value.empty())
          throw sdpa::InputError(command.get_name() + ": " + option->get_name() +
                                 ": expected a value, found an empty string");
}

void check_choice(const std::string& option, const std::string& value,
                  const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), value) != choices.end()) return;
  throw sdpa::InputError(option + ": expected one of " + sdpa::join_quoted(choices) + ", found \"" +
                         value + "\"");
}

// Parses the command line and runs the subcommand; main turns what it throws into exit codes.
int dispatch(int argc, char** argv) {
  sdpa::RunOptions run_options;
  run_options.program = argv[0];
  run_options.benchmark_flags = split_passthrough(argc, argv);
  CLI::App app{"sdpa-bench: measured theory and timing of scaled dot-product attention"};
  app.set_version_flag("--version", std::string("sdpa-bench ") +
                                        sdpa::suite_info()["version"].get<std::string>() + " (" +
                                        sdpa::suite_info()["git_commit"].get<std::string>() + ")");
  app.require_subcommand(1);
  app.formatter(std::make_shared<Formatter>());
  OldSpellings old;

  // One name for an output file, -o/--output FILE (run, time, claims, merge), and one for an
  // output folder, --out-dir DIR (report, compare, slurm, attend).
  // Numbers are read as text and checked by the library against the config's own limits
  // (configs/schema.json), so a flag and the config value it stands for share one range.
  std::string config_path, run_threads;
  auto* run_cmd = app.add_subcommand(
      "run",
      "validate and run a config, write its result file, print its tables; Google "
      "Benchmark flags for timing experiments go after `--`");
  bool resume = false;
  run_cmd->add_option("config", config_path, "config file (JSON), or the journal to resume")
      ->required()
      ->type_name("FILE");
  run_cmd->add_flag("--resume", resume,
                    "continue an interrupted run: with CONFIG, from <FILE>.journal (-o FILE) or "
                    "the newest journal of the config in results/<machine-id>/; or give the "
                    "journal itself in place of CONFIG");
  run_cmd
      ->add_option("-o,--output", run_options.output,
                   "result file (default results/<machine-id>/<config-name>-<UTC time>.json)")
      ->type_name("FILE");
  run_cmd
      ->add_option("-j,--threads", run_threads,
                   "threads, 1 to 1024 (default: the config's, else all cores)")
      ->type_name("INT");
  std::string run_shard;
  run_cmd
      ->add_option("--shard", run_shard,
                   "run shard I/N of the cells (I from 0 to N-1; `merge` joins the N result "
                   "files), or `slurm`: I and N of this Slurm array task")
      ->type_name("I/N|slurm");
  run_cmd
      ->add_option("--benchmark-json", run_options.benchmark_json,
                   "also write Google Benchmark's JSON of the timing cells (compare.py reads it)")
      ->type_name("FILE");

  // `time`: each option one timing parameter (kinds/timing/config.schema.json says its range).
  sdpa::TimingOptions timing;
  std::string time_output;
  bool print_config = false;
  auto* time_cmd = app.add_subcommand(
      "time",
      "time kernels at the shapes given, without a config: the cells, the roofline and the "
      "table a config's timing experiment gives; lists are comma-separated (a grid)");
  time_cmd->add_option("--kernel", timing.kernel, "kernels (see `list`)")
      ->required()
      ->type_name("NAME[,NAME...]");
  struct TimeOption {
    const char* names;
    std::string* value;
    const char* type;
    const char* help;
  };
  for (const auto& o : std::initializer_list<TimeOption>{
           {"--heads", &timing.heads, "Q[/KV][,...]",
            "query heads / K-V heads (32/8: grouped-query; 32: multi-head); each pair listed is "
            "a timing experiment of its own (default 1)"},
           {"--n-q", &timing.n_q, "INT[,INT...]", "queries per head (1: decode; default 256)"},
           {"--n-kv", &timing.n_kv, "INT[,INT...]", "keys per K/V head (default 256)"},
           {"--d", &timing.d, "D[/DV][,...]",
            "head dimension, d_k = d_v (or DK/DV); each listed is a timing experiment of its own "
            "(default 64)"},
           {"--batch", &timing.batch, "INT[,INT...]", "sequences per call (default 1)"},
           {"-j,--threads", &timing.threads, "INT|all[,...]",
            "thread counts timed (default all cores)"},
           {"--direction", &timing.direction, "DIR[,DIR...]",
            "forward, backward or both (one of each per call; default forward)"},
           {"--repetitions", &timing.repetitions, "INT",
            "Google Benchmark repetitions per cell, each kept (default 10)"},
           {"--min-time", &timing.min_time, "SECONDS", "seconds per repetition (default 0.05)"},
           {"--warmup-time", &timing.warmup_time, "SECONDS",
            "seconds run untimed before the first repetition (default 0.02)"}})
    time_cmd->add_option(o.names, *o.value, o.help)->type_name(o.type);
  time_cmd->add_flag("--causal", timing.causal, "causal mask (bottom-right aligned)");
  time_cmd
      ->add_option("-o,--output", time_output, "also write the result file here (as `run` does)")
      ->type_name("FILE");
  time_cmd->add_flag("--print-config", print_config,
                     "print the config these options stand for (a file `run` takes) and stop");

  auto* validate_cmd = app.add_subcommand("validate", "check a config without running it");
  validate_cmd->add_option("config", config_path, "config file (JSON)")
      ->required()
      ->type_name("FILE");

  auto* list_cmd =
      app.add_subcommand("list", "experiment kinds and kernels available on this machine");
  bool id_only = false;
  auto* info_cmd = app.add_subcommand("info", "the machine fingerprint and build, as JSON");
  info_cmd->add_flag("--machine-id", id_only,
                     "print only the machine id (the results/ folder name)");

  ReportOptions report_options;
  auto* report_cmd = app.add_subcommand("report", "tables from result files (no experiment runs)");
  report_cmd->add_option("results", report_options.files, "result files")
      ->required()
      ->type_name("FILE");
  report_cmd->add_option("--format", report_options.format, "md, csv or both (csv needs --out-dir)")
      ->type_name("md|csv|both");
  old.out_dir(report_cmd, report_options.out,
              "folder for README.md (tables), csv/ and plots/ (default: Markdown to stdout)",
              "--out");
  report_cmd->add_flag("--plots", report_options.plots, "also write plots (gnuplot: SVG and PNG)");
  report_cmd
      ->add_option("--html", report_options.html,
                   "folder for a static site: index, a page per experiment, the claims, "
                   "plots and copies of the result files (opens from the file system)")
      ->type_name("DIR");
  report_cmd
      ->add_option("--plot-scripts", report_options.plot_scripts,
                   "folder for the plots' gnuplot scripts (default: beside the plots)")
      ->type_name("DIR");

  std::vector<std::string> claims_files;
  std::string claims_output;
  auto* claims_cmd = app.add_subcommand(
      "claims", "verdicts on the textbook claims, from result files of runs of " +
                    sdpa::claims::inputs_text() + "; a claim none of them tests is not tested");
  claims_cmd->add_option("results", claims_files, "result files, each read by some claim")
      ->required()
      ->type_name("FILE");
  claims_cmd->add_option("-o,--output", claims_output, "write the Markdown here (default: stdout)")
      ->type_name("FILE");
  claims_cmd->add_flag_callback(
      "--list-inputs",
      [] {  // before the results are required: `make report` asks which files to give
        for (const auto& input : sdpa::claims::inputs()) std::cout << input.config << "\n";
        throw CLI::Success();
      },
      "print the configs whose runs the claims read, one per line, in registry order");

  std::vector<std::string> compare_files;
  std::string compare_format = "md", compare_out;
  auto* compare_cmd = app.add_subcommand(
      "compare",
      "compare result files against the first: timings (time ratio, U test), peaks, "
      "reproducibility of statistics");
  compare_cmd
      ->add_option("results", compare_files, "two or more result files; the first is the baseline")
      ->required()
      ->expected(2, -1)
      ->type_name("FILE");
  compare_cmd->add_option("--format", compare_format, "md or csv on stdout (default md)")
      ->type_name("md|csv");
  old.out_dir(compare_cmd, compare_out,
              "also write compare.md and one compare-N.csv per table into this folder", "--out");

  std::vector<std::string> merge_files;
  std::string merge_output;
  auto* merge_cmd = app.add_subcommand(
      "merge",
      "join the result files of a sweep's shards (`run --shard I/N`) into the file one run of "
      "the whole config writes");
  merge_cmd->add_option("shards", merge_files, "the result files of shards 0 to N-1")
      ->required()
      ->type_name("FILE");
  merge_cmd->add_option("-o,--output", merge_output, "the merged result file")
      ->required()
      ->type_name("FILE");
  for (auto* cmd : {report_cmd, claims_cmd, compare_cmd, merge_cmd})
    cmd->add_flag("--allow-edited", read_options.allow_edited,
                  "read result files that do not match their checksum (edited after they were "
                  "written); every output marks them edited");

  std::string slurm_config, slurm_shards, slurm_folder;
  auto* slurm_cmd = app.add_subcommand(
      "slurm",
      "write Slurm batch scripts that run a config as a job array of --shards tasks and merge "
      "their result files after; other options (or all after `--`) are sbatch's");
  slurm_cmd->add_option("config", slurm_config, "config file (JSON)")
      ->required()
      ->type_name("FILE");
  slurm_cmd->add_option("--shards", slurm_shards, "the number of shards (array tasks)")
      ->required()
      ->type_name("INT");
  old.out_dir(slurm_cmd, slurm_folder,
              "folder for the scripts, the shards' result files and logs and the merged result "
              "(default slurm/<config name>)",
              "-o,--out");
  slurm_cmd->allow_extras();

  sdpa::AttendOptions attend_options;
  std::string attend_scale, attend_threads, attend_window, attend_softcap, attend_chunk,
      attend_prefix;
  auto* attend_cmd = app.add_subcommand(
      "attend", "run one kernel on .npy arrays (float32, C order) and write .npy outputs");
  attend_cmd
      ->add_option("--q", attend_options.q,
                   "Q: (n_q, d_k), (b, n_q, d_k) or (batch, heads_q, n_q, d_k)")
      ->required()
      ->type_name("NPY");
  attend_cmd
      ->add_option("--k", attend_options.k,
                   "K: (n_kv, d_k), (b, n_kv, d_k) or (batch, heads_kv, n_kv, d_k)")
      ->required()
      ->type_name("NPY");
  attend_cmd
      ->add_option("--v", attend_options.v,
                   "V: (n_kv, d_v), (b, n_kv, d_v) or (batch, heads_kv, n_kv, d_v)")
      ->required()
      ->type_name("NPY");
  // Not ->required(): the old spelling may give it (checked after parsing).
  old.out_dir(attend_cmd, attend_options.out,
              "output folder: o.npy, lse.npy, [dq, dk, dv].npy (required)", "--out");
  attend_cmd
      ->add_option("--grad-out", attend_options.grad_out,
                   "upstream gradient dO (shaped like O): also write dq.npy, dk.npy, dv.npy")
      ->type_name("NPY");
  attend_cmd->add_option("--kernel", attend_options.kernel, "kernel (default flash; see `list`)")
      ->type_name("NAME");
  attend_cmd->add_option("--scale", attend_scale, "scale c (default 1/sqrt(d_k))")
      ->type_name("NUMBER");
  attend_cmd->add_flag("--causal", attend_options.causal, "causal mask (bottom-right aligned)");
  attend_cmd
      ->add_option("--window", attend_window,
                   "sliding window: keys L before to R after a query's position (-1: unbounded)")
      ->type_name("L,R");
  attend_cmd->add_option("--chunk", attend_chunk, "queries see only their chunk of N keys")
      ->type_name("N");
  attend_cmd
      ->add_option("--prefix", attend_prefix,
                   "prefix-LM: the first N keys are seen by every query, also with --causal")
      ->type_name("N");
  attend_cmd
      ->add_option("--documents", attend_options.documents,
                   "packed documents' start offsets, (n,) float32: queries see their document")
      ->type_name("NPY");
  attend_cmd->add_option("--softcap", attend_softcap, "soft-cap C: logits C tanh(s / C)")
      ->type_name("NUMBER");
  attend_cmd->add_flag("--alibi", attend_options.alibi, "ALiBi's standard slopes, one per head");
  attend_cmd
      ->add_option("--sinks", attend_options.sinks,
                   "a sink logit per query head, (heads_q,) float32 (writes dsinks.npy with dO)")
      ->type_name("NPY");
  attend_cmd->add_option("-j,--threads", attend_threads, "threads, 1 to 1024 (default 1)")
      ->type_name("INT");

  // CLI11 would take `frob --help` for the program's --help, exit 0.
  if (const std::string word = first_word(argc, argv); !word.empty() && !is_subcommand(app, word))
    throw sdpa::InputError(unknown_subcommand(app, word) +
                           "\nRun with --help for more information.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw sdpa::InputError(usage_message(e, app, argc, argv) +
                           "\nRun with --help for more information.");
  }
  for (const auto* command : app.get_subcommands()) refuse_empty_values(*command);
  old.note();
  if (*slurm_cmd) {
    auto sbatch_options = slurm_cmd->remaining();
    sbatch_options.insert(sbatch_options.end(), run_options.benchmark_flags.begin(),
                          run_options.benchmark_flags.end());
    return slurm(slurm_config, slurm_shards, slurm_folder, sbatch_options);
  }
  if (!run_options.benchmark_flags.empty() && !*run_cmd && !*time_cmd)
    throw sdpa::InputError(
        "arguments after -- are Google Benchmark flags (for `run` and `time`) or sbatch options "
        "(for "
        "`slurm`), nothing else's");
  if (*time_cmd) {
    run_options.output = time_output;
    return time_command(timing, print_config, run_options, argc, argv);
  }
  if (*run_cmd) {
    if (!run_threads.empty())
      run_options.threads = sdpa::parse_threads_option("-j,--threads", run_threads);
    if (!run_shard.empty()) run_options.shard = sdpa::parse_shard_option("--shard", run_shard);
    return run(config_path, resume, run_options);
  }
  if (*compare_cmd) {
    check_choice("--format", compare_format, {"md", "csv"});
    return compare(compare_files, compare_format, compare_out);
  }
  if (*merge_cmd) return merge(merge_files, merge_output);
  if (*validate_cmd) return validate(config_path);
  if (*list_cmd) return list();
  if (*info_cmd) return info(id_only);
  if (*report_cmd) {
    check_choice("--format", report_options.format, {"md", "csv", "both"});
    return report(report_options);
  }
  if (*claims_cmd) return claims(claims_files, claims_output);
  if (*attend_cmd) {
    if (attend_options.out.empty())
      throw sdpa::InputError("attend: missing --out-dir\nRun with --help for more information.");
    if (!attend_scale.empty())
      attend_options.scale =
          sdpa::parse_number_option("--scale", attend_scale, sdpa::NumberRange{});
    if (!attend_threads.empty())
      attend_options.threads = sdpa::parse_threads_option("-j,--threads", attend_threads);
    if (!attend_softcap.empty())
      attend_options.softcap = sdpa::parse_number_option(
          "--softcap", attend_softcap, {.min = 0, .max = 3.4e38, .min_exclusive = true});
    const sdpa::NumberRange keys{.integer = true, .min = 0, .max = 1e15};
    if (!attend_chunk.empty())
      attend_options.chunk = std::int64_t(sdpa::parse_number_option("--chunk", attend_chunk, keys));
    if (!attend_prefix.empty())
      attend_options.prefix =
          std::int64_t(sdpa::parse_number_option("--prefix", attend_prefix, keys));
    if (!attend_window.empty()) {
      const auto comma = attend_window.find(',');
      if (comma == std::string::npos)
        throw sdpa::InputError("--window: expected L,R (two integers from -1 up), found \"" +
                               attend_window + "\"");
      const sdpa::NumberRange extent{.integer = true, .min = -1, .max = 1e15};
      attend_options.window = {std::int64_t(sdpa::parse_number_option(
                                   "--window", attend_window.substr(0, comma), extent)),
                               std::int64_t(sdpa::parse_number_option(
                                   "--window", attend_window.substr(comma + 1), extent))};
    }
    return run_attend(attend_options);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Everything, the command line's set-up included, inside one handler: nothing escapes main.
  try {
    return dispatch(argc, argv);
  } catch (const sdpa::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const sdpa::RunInterrupted& e) {
    std::cerr << e.what() << "\n";
    return 128 + e.signal;
  } catch (const std::exception& e) {
    std::cerr << "sdpa-bench: " << e.what() << "\n";
    return 1;
  } catch (...) {
    std::cerr << "sdpa-bench: unknown error\n";
    return 1;
  }
}
