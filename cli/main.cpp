// sdpa-bench: subcommands only; every piece of logic lives in the libraries.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "sdpa/compare.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/report.hpp"

namespace {

int run(const std::string& config_path, const sdpa::RunOptions& options) {
  const sdpa::Config config = sdpa::load_config(config_path);
  const std::string path = sdpa::run_config(config, options);
  std::cout << sdpa::report::markdown(sdpa::report::tables({sdpa::report::read_result_file(path)}));
  std::cerr << "result file: " << path << "\n";
  return 0;
}

int validate(const std::string& config_path) {
  const sdpa::Config config = sdpa::load_config(config_path);
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
  std::printf("  %-18s %-10s %-10s %-8s %s\n", "name", "family", "isa", "backward", "description");
  for (const auto& k : sdpa::kernel_registry())
    std::printf("  %-18s %-10s %-10s %-8s %s\n", k.name.c_str(), k.family.c_str(), k.isa.c_str(),
                k.backward ? "yes" : "no", k.description.c_str());
  return 0;
}

int info() {
  sdpa::json machine = sdpa::machine_fingerprint();
  sdpa::json out = {{"machine_id", sdpa::machine_id(machine)},
                    {"machine", machine},
                    {"suite", sdpa::suite_info()}};
  std::cout << out.dump(2) << "\n";
  return 0;
}

int report(const std::vector<std::string>& files) {
  std::vector<sdpa::json> results;
  int status = 0;
  for (const auto& f : files) {
    try {
      results.push_back(sdpa::report::read_result_file(f));
    } catch (const sdpa::InputError& e) {
      std::cerr << "error: " << e.what() << "\n";  // report on the others
      status = 2;
    }
  }
  std::cout << sdpa::report::markdown(sdpa::report::tables(results));
  return status;
}

int compare(const std::vector<std::string>& paths, const std::string& format,
            const std::string& out_dir) {
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
  std::cout << (format == "csv" ? csv : sdpa::report::markdown(tables));
  if (!out_dir.empty()) {
    sdpa::write_file_atomically(out_dir + "/compare.md", sdpa::report::markdown(tables));
    for (std::size_t i = 0; i < tables.size(); ++i)
      sdpa::write_file_atomically(out_dir + "/compare-" + std::to_string(i + 1) + ".csv",
                                  sdpa::compare::csv(tables[i]));
    std::cerr << "wrote " << out_dir << "/compare.md and compare-1.csv .. compare-" << tables.size()
              << ".csv (one per table, in order)\n";
  }
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

}  // namespace

int main(int argc, char** argv) {
  sdpa::RunOptions run_options;
  run_options.benchmark_flags = split_passthrough(argc, argv);
  CLI::App app{"sdpa-bench: measured theory and timing of scaled dot-product attention"};
  app.set_version_flag("--version", std::string("sdpa-bench ") + sdpa::suite_info()["version"].get<std::string>() +
                                        " (" + sdpa::suite_info()["git_commit"].get<std::string>() + ")");
  app.require_subcommand(1);

  std::string config_path;
  auto* run_cmd = app.add_subcommand(
      "run",
      "validate and run a config, write its result file, print its tables; Google "
      "Benchmark flags for timing experiments go after `--`");
  run_cmd->add_option("config", config_path, "config file (JSON)")->required();
  run_cmd->add_option("-o,--output", run_options.output,
                      "result file (default results/<machine-id>/<config-name>-<UTC time>.json)");
  run_cmd
      ->add_option("-j,--threads", run_options.threads,
                   "threads (default: the config's, else all cores)")
      ->check(CLI::PositiveNumber);
  run_cmd->add_option(
      "--benchmark-json", run_options.benchmark_json,
      "also write Google Benchmark's JSON of the timing cells (compare.py reads it)");

  auto* validate_cmd = app.add_subcommand("validate", "check a config without running it");
  validate_cmd->add_option("config", config_path, "config file (JSON)")->required();

  app.add_subcommand("list", "experiment kinds and kernels available on this machine");
  app.add_subcommand("info", "the machine fingerprint and build, as JSON");

  std::vector<std::string> files;
  auto* report_cmd = app.add_subcommand("report", "tables from result files (no experiment runs)");
  report_cmd->add_option("results", files, "result files")->required();

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
  compare_cmd->add_option("--format", compare_format, "md or csv on stdout (default md)")
      ->check(CLI::IsMember({"md", "csv"}));
  compare_cmd->add_option("--out", compare_out,
                          "also write compare.md and one compare-N.csv per table into this folder");

  CLI11_PARSE(app, argc, argv);
  if (!run_options.benchmark_flags.empty() && !*run_cmd) {
    std::cerr << "error: arguments after -- are Google Benchmark flags, for `run` only\n";
    return 2;
  }
  try {
    if (*run_cmd) return run(config_path, run_options);
    if (*compare_cmd) return compare(compare_files, compare_format, compare_out);
    if (*validate_cmd) return validate(config_path);
    if (app.got_subcommand("list")) return list();
    if (app.got_subcommand("info")) return info();
    if (*report_cmd) return report(files);
  } catch (const sdpa::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "sdpa-bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
