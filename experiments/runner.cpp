// The runner: plan, run every cell with progress on stderr, assemble the self-describing
// result file and write it atomically.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>

#include "benchmark_session.hpp"
#include "sdpa/experiments.hpp"

namespace sdpa {
namespace {

using Clock = std::chrono::steady_clock;

std::string utc_time(std::time_t t, const char* format) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

// On a terminal: one line rewritten per cell (cell k of n, elapsed, ETA). Otherwise (logs,
// CI) one line per finished experiment.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), tty_(enabled && isatty(STDERR_FILENO)) {}

  void cell_done(const ExperimentPlan& plan, std::size_t done, double elapsed) {
    if (!tty_) return;
    const double eta = elapsed / double(done) * double(plan.cells.size() - done);
    std::fprintf(stderr, "\r\033[K[%s] cell %zu of %zu  elapsed %.1fs  ETA %.1fs", plan.name.c_str(),
                 done, plan.cells.size(), elapsed, eta);
  }

  void experiment_done(const ExperimentPlan& plan, double elapsed) {
    if (!enabled_) return;
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "[%s] %s: %zu cells in %.1fs\n", plan.name.c_str(),
                 plan.kind->name.c_str(), plan.cells.size(), elapsed);
  }

 private:
  bool enabled_, tty_;
};

}  // namespace

std::string run_config(const Config& config, const RunOptions& options) {
  const int threads = options.threads > 0 ? options.threads
                                          : config.document.value("threads", default_threads());
  // Google Benchmark's flags are checked before anything runs.
  BenchmarkSession benchmark(options.benchmark_flags, options.benchmark_json);
  RunShared shared{.peaks = json::array(), .benchmark = &benchmark};
  const json machine = machine_fingerprint();
  const std::time_t started = std::time(nullptr);
  const std::string path =
      !options.output.empty()
          ? options.output
          : "results/" + machine_id(machine) + "/" + config.name + "-" +
                utc_time(started, "%Y%m%dT%H%M%SZ") + ".json";

  json result;
  result["schema_version"] = kResultSchemaVersion;
  result["suite"] = suite_info();
  result["machine"] = machine;
  result["machine_id"] = machine_id(machine);
  result["config"] = {{"path", config.path}, {"sha256", config.sha256}, {"document", config.document}};
  result["seed"] = config.seed;
  result["threads"] = threads;
  result["started_at"] = utc_time(started, "%Y-%m-%dT%H:%M:%SZ");
  result["experiments"] = json::array();

  Progress progress(options.progress);
  const auto run_start = Clock::now();
  for (const auto& plan : make_plan(config)) {
    const auto start = Clock::now();
    json records = json::array();
    for (const auto& cell : plan.cells) {
      json record = {{"cell", cell.index}, {"params", json::object()}};
      for (const auto& axis : plan.kind->axes) record["params"][axis] = cell.params[axis];
      record.update(plan.kind->run_cell({cell, config.seed, plan.index, threads, &shared}));
      records.push_back(std::move(record));
      progress.cell_done(plan, records.size(),
                         std::chrono::duration<double>(Clock::now() - start).count());
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    progress.experiment_done(plan, seconds);
    result["experiments"].push_back({{"name", plan.name},
                                     {"kind", plan.kind->name},
                                     {"params", plan.params},
                                     {"duration_s", seconds},
                                     {"records", std::move(records)}});
  }
  // Peaks measured by roofline (or timing) cells describe the machine: every timing's % of
  // peak refers to one of them.
  if (!shared.peaks.empty()) result["machine"]["peak"] = shared.peaks;
  result["duration_s"] = std::chrono::duration<double>(Clock::now() - run_start).count();
  write_file_atomically(path, result.dump(1) + "\n");
  benchmark.finish();
  return path;
}

}  // namespace sdpa
