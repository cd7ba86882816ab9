// sdpa-bench: subcommands only; every piece of logic lives in the libraries.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <regex>

#include "sdpa/attend.hpp"
#include "sdpa/claims.hpp"
#include "sdpa/compare.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/input_file.hpp"
#include "sdpa/journal.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/plots.hpp"
#include "sdpa/report.hpp"
#include "sdpa/shard.hpp"

namespace {

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
  std::cout << sdpa::report::markdown(sdpa::report::tables({sdpa::report::read_result_file(path)}));
  std::cerr << "result file: " << path << "\n";
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

int list() {
  std::cout << "experiment kinds:\n";
  for (const auto& k : sdpa::experiment_kinds())
    std::printf("  %-12s %s\n", k.name.c_str(), k.description.c_str());
  std::cout << "kernels (on this machine):\n";
  std::printf("  %-24s %-10s %-12s %-9s %-8s %s\n", "name", "family", "isa", "precision",
              "backward", "description");
  for (const auto& k : sdpa::kernel_registry())
    std::printf("  %-24s %-10s %-12s %-9s %-8s %s\n", k.name.c_str(), k.family.c_str(),
                k.isa.c_str(), k.precision.c_str(), k.backward ? "yes" : "no",
                k.description.c_str());
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

struct ReportOptions {
  std::vector<std::string> files;
  std::string format = "md";
  std::string out;
  bool plots = false;
};

std::vector<sdpa::NamedPath> inputs_named(const std::vector<std::string>& files,
                                          const std::string& role) {
  std::vector<sdpa::NamedPath> named;
  named.reserve(files.size());
  for (const auto& f : files) named.push_back({f, role});
  return named;
}

int report(const ReportOptions& o) {
  if (o.out.empty() && (o.format != "md" || o.plots))
    throw sdpa::InputError("report: --format csv|both and --plots write files; give --out DIR");
  namespace fs = std::filesystem;
  const auto inputs = inputs_named(o.files, "a result file to report on");
  if (!o.out.empty()) {
    sdpa::check_output_folder("--out", o.out, {"README.md"}, inputs);
    if (o.format != "md")
      sdpa::check_output_folder("--out", (fs::path(o.out) / "csv").string(), {}, inputs);
    if (o.plots)
      sdpa::check_output_folder("--out", (fs::path(o.out) / "plots").string(), {}, inputs);
  }
  std::vector<sdpa::report::ResultFile> results;
  int status = 0;
  for (const auto& f : o.files) {
    try {
      results.push_back({f, sdpa::report::read_result_file(f)});
    } catch (const sdpa::InputError& e) {
      std::cerr << "error: " << e.what() << "\n";  // report on the others
      status = 2;
    }
  }
  if (o.out.empty()) {  // the others' tables still printed, the exit code says one was bad
    std::vector<sdpa::json> docs;
    docs.reserve(results.size());
    for (const auto& r : results) docs.push_back(r.doc);
    std::cout << sdpa::report::markdown(sdpa::report::tables(docs));
    return status;
  }
  if (status != 0) return status;  // --out: a bad input writes nothing, all or nothing
  std::vector<sdpa::report::CsvFile> csvs;
  std::vector<std::pair<std::string, std::string>> files;  // written together, all or nothing
  if (o.format != "md") {
    csvs = sdpa::report::csv_files(results);
    for (const auto& c : csvs)
      files.emplace_back((fs::path(o.out) / "csv" / c.name).string(), c.text);
    for (const auto& [path, text] : files)  // their names are known only now
      sdpa::check_output_file("--out", path, inputs);
  }
  std::vector<std::string> plot_names;
  if (o.plots) {
    const auto p = sdpa::plots::write_plots(results, (fs::path(o.out) / "plots").string());
    if (!p.message.empty()) std::cerr << "report: " << p.message << "\n";
    plot_names = p.plots;
  }
  if (o.format != "csv")
    files.emplace_back((fs::path(o.out) / "README.md").string(),
                       sdpa::report::index_markdown(results, plot_names, csvs));
  sdpa::write_files_atomically(files);
  std::cerr << "report: written to " << o.out << "\n";
  return status;
}

int merge(const std::vector<std::string>& files, const std::string& output) {
  const auto inputs = inputs_named(files, "a shard's result file");
  sdpa::check_output_file("-o", output, inputs);
  std::vector<std::pair<std::string, sdpa::json>> shards;
  shards.reserve(files.size());
  for (const auto& f : files) shards.emplace_back(f, sdpa::report::read_result_file(f));
  std::string text = sdpa::merge_shards(shards).dump(1) + "\n";
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
  sdpa::check_output_folder("-o", folder, names, {{config_path, "the config"}});
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
  for (const auto& f : files) results.push_back(sdpa::report::read_result_file(f));
  std::vector<sdpa::claims::Source> sources;
  sources.reserve(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) sources.push_back({&results[i], files[i]});
  const std::string text = sdpa::claims::markdown(sdpa::claims::evaluate(sources), files);
  if (output.empty())
    std::cout << text;
  else
    sdpa::write_file_atomically(output, text);
  return 0;
}

int compare(const std::vector<std::string>& paths, const std::string& format,
            const std::string& out_dir) {
  // compare-N.csv: one per table, at most one per experiment of the first file and a few more.
  if (!out_dir.empty())
    sdpa::check_output_folder("--out", out_dir, {"compare.md"}, inputs_named(paths, "an input"));
  std::vector<sdpa::compare::ResultFile> files;
  int status = 0;
  for (const auto& p : paths) {
    try {
      files.push_back({p, sdpa::report::read_result_file(p)});
    } catch (const sdpa::InputError& e) {
      std::cerr << "error: " << e.what() << "\n";  // name every bad file, then stop
      status = 2;
    }
  }
  if (status != 0) return status;
  const auto tables = sdpa::compare::tables(files);
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
      sdpa::check_output_file("--out", path, inputs_named(paths, "an input"));
    sdpa::write_files_atomically(outputs);
  }
  std::cout << (format == "csv" ? csv : sdpa::report::markdown(tables));
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

// A command-line mistake as a user reads it: CLI11's message, which names the option,
// rewritten where it does not ("A subcommand is required" for an unknown subcommand), and
// always led by the subcommand. main prints it as an error with exit code 2.
std::string usage_message(const CLI::ParseError& e, const CLI::App& app, int argc, char** argv) {
  std::string where, message = e.what();
  for (const auto* sub : app.get_subcommands()) where = sub->get_name() + ": ";
  if (where.empty() && message == "A subcommand is required") {
    std::vector<std::string> names;
    for (const auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    std::string expected;
    for (const auto& n : names) expected += (expected.empty() ? "" : ", ") + n;
    std::string word;
    for (int i = 1; i < argc && word.empty(); ++i)
      if (argv[i][0] != '-') word = argv[i];
    if (word.empty()) return "expected a subcommand (" + expected + "), found none";
    const std::string hint = sdpa::closest(word, names);
    return "unknown subcommand \"" + word + "\"" +
           (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") + "; expected one of " +
           expected;
  }
  const std::string extras = "The following argument";
  if (message.rfind(extras, 0) == 0)
    message = "unexpected argument(s): " + message.substr(message.find(": ") + 2);
  std::smatch m;
  if (std::regex_match(message, m, std::regex("(.*): 1 required TEXT missing")))
    message = m[1].str() + ": expected a value, found none";
  else if (std::regex_match(message, m,
                            std::regex("(.*): At least (\\d+) required but received (\\d+)")))
    message = m[1].str() + ": expected at least " + m[2].str() + " values, found " + m[3].str();
  else if (std::regex_match(message, m, std::regex("(.*) is required")))
    message = "missing " + m[1].str();
  return where + message;
}

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

  // Numbers are read as text and checked by the library against the config's own limits
  // (configs/schema.json), so a flag and the config value it stands for share one range.
  std::string config_path, run_threads;
  auto* run_cmd = app.add_subcommand(
      "run",
      "validate and run a config, write its result file, print its tables; Google "
      "Benchmark flags for timing experiments go after `--`");
  bool resume = false;
  run_cmd->add_option("config", config_path, "config file (JSON), or the journal to resume")
      ->required();
  run_cmd->add_flag("--resume", resume,
                    "continue an interrupted run: with CONFIG, from <FILE>.journal (-o FILE) or "
                    "the newest journal of the config in results/<machine-id>/; or give the "
                    "journal itself in place of CONFIG");
  run_cmd->add_option("-o,--output", run_options.output,
                      "result file (default results/<machine-id>/<config-name>-<UTC time>.json)");
  run_cmd->add_option("-j,--threads", run_threads,
                      "threads, 1 to 1024 (default: the config's, else all cores)");
  std::string run_shard;
  run_cmd->add_option("--shard", run_shard,
                      "run shard I/N of the cells (I from 0 to N-1; `merge` joins the N result "
                      "files), or `slurm`: I and N of this Slurm array task");
  run_cmd->add_option(
      "--benchmark-json", run_options.benchmark_json,
      "also write Google Benchmark's JSON of the timing cells (compare.py reads it)");

  auto* validate_cmd = app.add_subcommand("validate", "check a config without running it");
  validate_cmd->add_option("config", config_path, "config file (JSON)")->required();

  auto* list_cmd =
      app.add_subcommand("list", "experiment kinds and kernels available on this machine");
  bool id_only = false;
  auto* info_cmd = app.add_subcommand("info", "the machine fingerprint and build, as JSON");
  info_cmd->add_flag("--machine-id", id_only,
                     "print only the machine id (the results/ folder name)");

  ReportOptions report_options;
  auto* report_cmd = app.add_subcommand("report", "tables from result files (no experiment runs)");
  report_cmd->add_option("results", report_options.files, "result files")->required();
  report_cmd->add_option("--format", report_options.format, "md, csv or both (csv needs --out)");
  report_cmd->add_option(
      "--out", report_options.out,
      "folder for README.md (tables), csv/ and plots/ (default: Markdown to stdout)");
  report_cmd->add_flag("--plots", report_options.plots, "also write plots (gnuplot: SVG and PNG)");

  std::vector<std::string> claims_files;
  std::string claims_output;
  auto* claims_cmd = app.add_subcommand(
      "claims", "verdicts on the textbook claims, from result files of runs of " +
                    sdpa::claims::inputs_text() + "; a claim none of them tests is not tested");
  claims_cmd->add_option("results", claims_files, "result files, each read by some claim")
      ->required();
  claims_cmd->add_option("-o,--output", claims_output, "write the Markdown here (default: stdout)");
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
      "compare result files against the first: timings (speedup, U test), peaks, "
      "reproducibility of statistics");
  compare_cmd
      ->add_option("results", compare_files, "two or more result files; the first is the baseline")
      ->required()
      ->expected(2, -1);
  compare_cmd->add_option("--format", compare_format, "md or csv on stdout (default md)");
  compare_cmd->add_option("--out", compare_out,
                          "also write compare.md and one compare-N.csv per table into this folder");

  std::vector<std::string> merge_files;
  std::string merge_output;
  auto* merge_cmd = app.add_subcommand(
      "merge",
      "join the result files of a sweep's shards (`run --shard I/N`) into the file one run of "
      "the whole config writes");
  merge_cmd->add_option("shards", merge_files, "the result files of shards 0 to N-1")->required();
  merge_cmd->add_option("-o,--output", merge_output, "the merged result file")->required();

  std::string slurm_config, slurm_shards, slurm_folder;
  auto* slurm_cmd = app.add_subcommand(
      "slurm",
      "write Slurm batch scripts that run a config as a job array of --shards tasks and merge "
      "their result files after; other options (or all after `--`) are sbatch's");
  slurm_cmd->add_option("config", slurm_config, "config file (JSON)")->required();
  slurm_cmd->add_option("--shards", slurm_shards, "the number of shards (array tasks)")->required();
  slurm_cmd->add_option("-o,--out", slurm_folder,
                        "folder for the scripts, the shards' result files and logs and the "
                        "merged result (default slurm/<config name>)");
  slurm_cmd->allow_extras();

  sdpa::AttendOptions attend_options;
  std::string attend_scale, attend_threads;
  auto* attend_cmd = app.add_subcommand(
      "attend", "run one kernel on .npy arrays (float32, C order) and write .npy outputs");
  attend_cmd
      ->add_option("--q", attend_options.q,
                   "Q: (n_q, d_k), (b, n_q, d_k) or (batch, heads_q, n_q, d_k)")
      ->required();
  attend_cmd
      ->add_option("--k", attend_options.k,
                   "K: (n_kv, d_k), (b, n_kv, d_k) or (batch, heads_kv, n_kv, d_k)")
      ->required();
  attend_cmd
      ->add_option("--v", attend_options.v,
                   "V: (n_kv, d_v), (b, n_kv, d_v) or (batch, heads_kv, n_kv, d_v)")
      ->required();
  attend_cmd
      ->add_option("--out", attend_options.out, "output folder: o.npy, lse.npy, [dq, dk, dv].npy")
      ->required();
  attend_cmd->add_option("--grad-out", attend_options.grad_out,
                         "upstream gradient dO (shaped like O): also write dq.npy, dk.npy, dv.npy");
  attend_cmd->add_option("--kernel", attend_options.kernel, "kernel (default flash; see `list`)");
  attend_cmd->add_option("--scale", attend_scale, "scale c (default 1/sqrt(d_k))");
  attend_cmd->add_flag("--causal", attend_options.causal, "causal mask (bottom-right aligned)");
  attend_cmd->add_option("-j,--threads", attend_threads, "threads, 1 to 1024 (default 1)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw sdpa::InputError(usage_message(e, app, argc, argv) +
                           "\nRun with --help for more information.");
  }
  for (const auto* command : app.get_subcommands()) refuse_empty_values(*command);
  if (*slurm_cmd) {
    auto sbatch_options = slurm_cmd->remaining();
    sbatch_options.insert(sbatch_options.end(), run_options.benchmark_flags.begin(),
                          run_options.benchmark_flags.end());
    return slurm(slurm_config, slurm_shards, slurm_folder, sbatch_options);
  }
  if (!run_options.benchmark_flags.empty() && !*run_cmd)
    throw sdpa::InputError(
        "arguments after -- are Google Benchmark flags (for `run`) or sbatch options (for "
        "`slurm`), nothing else's");
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
    if (!attend_scale.empty())
      attend_options.scale =
          sdpa::parse_number_option("--scale", attend_scale, sdpa::NumberRange{});
    if (!attend_threads.empty())
      attend_options.threads = sdpa::parse_threads_option("-j,--threads", attend_threads);
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
