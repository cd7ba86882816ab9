// sdpa-bench: subcommands only; every piece of logic lives in the libraries.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "sdpa/claims.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/plots.hpp"
#include "sdpa/report.hpp"

namespace {

int run(const std::string& config_path, const std::string& output, int threads) {
  const sdpa::Config config = sdpa::load_config(config_path);
  const std::string path = sdpa::run_config(config, {output, threads, true});
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

int report(const ReportOptions& o) {
  if (o.out.empty() && (o.format != "md" || o.plots))
    throw sdpa::InputError("report: --format csv|both and --plots write files; give --out DIR");
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
  if (o.out.empty()) {
    std::vector<sdpa::json> docs;
    for (const auto& r : results) docs.push_back(r.doc);
    std::cout << sdpa::report::markdown(sdpa::report::tables(docs));
    return status;
  }
  namespace fs = std::filesystem;
  std::vector<sdpa::report::CsvFile> csvs;
  if (o.format != "md") {
    csvs = sdpa::report::csv_files(results);
    for (const auto& c : csvs) sdpa::write_file_atomically((fs::path(o.out) / "csv" / c.name).string(), c.text);
  }
  std::vector<std::string> plot_names;
  if (o.plots) {
    const auto p = sdpa::plots::write_plots(results, (fs::path(o.out) / "plots").string());
    if (!p.message.empty()) std::cerr << "report: " << p.message << "\n";
    plot_names = p.plots;
  }
  if (o.format != "csv")
    sdpa::write_file_atomically((fs::path(o.out) / "README.md").string(),
                                sdpa::report::index_markdown(results, plot_names, csvs));
  std::cerr << "report: written to " << o.out << "\n";
  return status;
}

int claims(const std::string& file, const std::string& output) {
  const auto result = sdpa::report::read_result_file(file);
  const std::string text = sdpa::claims::markdown(sdpa::claims::evaluate(result, file), file);
  if (output.empty()) std::cout << text;
  else sdpa::write_file_atomically(output, text);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sdpa-bench: measured theory and timing of scaled dot-product attention"};
  app.set_version_flag("--version", std::string("sdpa-bench ") + sdpa::suite_info()["version"].get<std::string>() +
                                        " (" + sdpa::suite_info()["git_commit"].get<std::string>() + ")");
  app.require_subcommand(1);

  std::string config_path, output;
  int threads = 0;
  auto* run_cmd = app.add_subcommand("run", "validate and run a config, write its result file, print its tables");
  run_cmd->add_option("config", config_path, "config file (JSON)")->required();
  run_cmd->add_option("-o,--output", output,
                      "result file (default results/<machine-id>/<config-name>-<UTC time>.json)");
  run_cmd->add_option("-j,--threads", threads, "threads (default: the config's, else all cores)")
      ->check(CLI::PositiveNumber);

  auto* validate_cmd = app.add_subcommand("validate", "check a config without running it");
  validate_cmd->add_option("config", config_path, "config file (JSON)")->required();

  app.add_subcommand("list", "experiment kinds and kernels available on this machine");
  bool id_only = false;
  app.add_subcommand("info", "the machine fingerprint and build, as JSON")
      ->add_flag("--machine-id", id_only, "print only the machine id (the results/ folder name)");

  ReportOptions report_options;
  auto* report_cmd = app.add_subcommand("report", "tables from result files (no experiment runs)");
  report_cmd->add_option("results", report_options.files, "result files")->required();
  report_cmd->add_option("--format", report_options.format, "md, csv or both (csv needs --out)")
      ->check(CLI::IsMember({"md", "csv", "both"}));
  report_cmd->add_option("--out", report_options.out,
                         "folder for README.md (tables), csv/ and plots/ (default: Markdown to stdout)");
  report_cmd->add_flag("--plots", report_options.plots, "also write plots (gnuplot: SVG and PNG)");

  std::string claims_file, claims_output;
  auto* claims_cmd = app.add_subcommand(
      "claims", "verdicts on the textbook claims, from a result file of configs/seeds.json");
  claims_cmd->add_option("result", claims_file, "result file of configs/seeds.json")->required();
  claims_cmd->add_option("-o,--output", claims_output, "write the Markdown here (default: stdout)");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*run_cmd) return run(config_path, output, threads);
    if (*validate_cmd) return validate(config_path);
    if (app.got_subcommand("list")) return list();
    if (app.got_subcommand("info")) return info(id_only);
    if (*report_cmd) return report(report_options);
    if (*claims_cmd) return claims(claims_file, claims_output);
  } catch (const sdpa::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "sdpa-bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
