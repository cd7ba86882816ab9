// sdpa-bench: subcommands only; every piece of logic lives in the libraries.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <optional>

#include "sdpa/experiments.hpp"
#include "sdpa/journal.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/report.hpp"

namespace {

// `target` is a config, or with --resume the journal of an interrupted run (which names its
// config); `run CONFIG --resume` finds the journal itself.
int run(const std::string& target, bool resume, sdpa::RunOptions options) {
  std::optional<sdpa::Config> config;
  if (sdpa::is_journal_path(target)) {
    config = sdpa::load_config(sdpa::read_journal(target).header.config_path);
    options.resume = target;
  } else {
    config = sdpa::load_config(target);
    if (resume) {
      options.resume = sdpa::find_journal(*config, options.output);
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

// Parses the command line and runs the subcommand; main turns what it throws into exit codes.
int dispatch(int argc, char** argv) {
  CLI::App app{"sdpa-bench: measured theory and timing of scaled dot-product attention"};
  app.set_version_flag("--version", std::string("sdpa-bench ") +
                                        sdpa::suite_info()["version"].get<std::string>() + " (" +
                                        sdpa::suite_info()["git_commit"].get<std::string>() + ")");
  app.require_subcommand(1);

  std::string config_path, output;
  int threads = 0;
  auto* run_cmd = app.add_subcommand(
      "run", "validate and run a config, write its result file, print its tables");
  bool resume = false;
  run_cmd->add_option("config", config_path, "config file (JSON), or the journal to resume")
      ->required();
  run_cmd->add_flag("--resume", resume,
                    "continue an interrupted run: with CONFIG, from <FILE>.journal (-o FILE) or "
                    "the newest journal of the config in results/<machine-id>/; or give the "
                    "journal itself in place of CONFIG");
  run_cmd->add_option("-o,--output", output,
                      "result file (default results/<machine-id>/<config-name>-<UTC time>.json)");
  run_cmd->add_option("-j,--threads", threads, "threads (default: the config's, else all cores)")
      ->check(CLI::PositiveNumber);

  auto* validate_cmd = app.add_subcommand("validate", "check a config without running it");
  validate_cmd->add_option("config", config_path, "config file (JSON)")->required();

  app.add_subcommand("list", "experiment kinds and kernels available on this machine");
  app.add_subcommand("info", "the machine fingerprint and build, as JSON");

  std::vector<std::string> files;
  auto* report_cmd = app.add_subcommand("report", "tables from result files (no experiment runs)");
  report_cmd->add_option("results", files, "result files")->required();

  CLI11_PARSE(app, argc, argv);
  if (*run_cmd) {
    sdpa::RunOptions options;
    options.output = output;
    options.threads = threads;
    options.program = argv[0];
    return run(config_path, resume, options);
  }
  if (*validate_cmd) return validate(config_path);
  if (app.got_subcommand("list")) return list();
  if (app.got_subcommand("info")) return info();
  if (*report_cmd) return report(files);
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
