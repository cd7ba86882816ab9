// The runner: plan, run every cell with progress on stderr and each finished cell in the
// journal, assemble the self-describing result file and write it atomically. SIGINT and
// SIGTERM stop it between cells with the journal intact; a second one stops it at once.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>

#include "benchmark_session.hpp"
#include "peak_measure.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/input_file.hpp"
#include "sdpa/journal.hpp"
#include "sdpa/report.hpp"
#include "sdpa/shard.hpp"

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

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// On a terminal: one line rewritten per cell (cell k of n, elapsed, ETA). Otherwise (logs,
// CI) one line per finished experiment.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), tty_(enabled && isatty(STDERR_FILENO)) {}

  // `cells`: the experiment's cells in this run (a shard's, or all).
  void cell_done(const ExperimentPlan& plan, std::size_t done, std::size_t cells, double elapsed) {
    if (!tty_) return;
    const double eta = elapsed / double(done) * double(cells - done);
    std::fprintf(stderr, "\r\033[K[%s] cell %zu of %zu  elapsed %.1fs  ETA %.1fs",
                 plan.name.c_str(), done, cells, elapsed, eta);
  }

  void experiment_done(const ExperimentPlan& plan, std::size_t cells, double elapsed) {
    if (!enabled_) return;
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "[%s] %s: %zu cells in %.1fs\n", plan.name.c_str(),
                 plan.kind->name.c_str(), cells, elapsed);
  }

  // A live line of a step between cells (on a terminal).
  void live(const std::string& line) {
    if (tty_) std::fprintf(stderr, "\r\033[K%s", line.c_str());
  }

  // Clears the live line before a message of the CLI's.
  void clear_line() {
    if (tty_) std::fprintf(stderr, "\r\033[K");
  }

  void note(const std::string& line) {
    if (enabled_) std::fprintf(stderr, "%s\n", line.c_str());
  }

 private:
  bool enabled_, tty_;
};

// The command line a user types to continue an interrupted run.
std::string resume_command(const std::string& program, const std::string& journal) {
  return shell_quoted(program) + " run --resume " + shell_quoted(journal);
}

// What the signal handler may touch: a flag, and a message formatted before it is installed.
volatile std::sig_atomic_t g_signal = 0;
std::string g_stop_message;

extern "C" void on_interrupt(int signal) {
  if (g_signal != 0) {  // the second one: stop now; every line in the journal is whole
    [[maybe_unused]] const auto n =
        ::write(STDERR_FILENO, g_stop_message.data(), g_stop_message.size());
    ::_exit(128 + signal);
  }
  g_signal = signal;
  static const char msg[] =
      "\nsdpa-bench: interrupted; finishing the current cell (interrupt again to stop at once)\n";
  [[maybe_unused]] const auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
}

// A test hook, so that tests interrupt or kill a run at a known point instead of after a sleep
// (tests/test_resume.cpp, tests/test_hardening.cpp): with SDPA_TEST_HOLD="k:n", the run, having
// computed the record of the k-th cell it computes (from 0) and before journaling it, says so
// on stderr and waits until n interrupts arrived. n = 1: the first releases it, the cell is
// journaled, and the run stops between cells; n = 2: the second stops it at once, as ever.
struct TestHold {
  long cell = -1;
  int interrupts = 0;
};

TestHold test_hold() {
  TestHold hold;
  if (const char* value = std::getenv("SDPA_TEST_HOLD"))
    if (std::sscanf(value, "%ld:%d", &hold.cell, &hold.interrupts) != 2) hold.cell = -1;
  return hold;
}

void hold_for_test(long cell, int interrupts) {
  sigset_t blocked, old;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  sigaddset(&blocked, SIGTERM);
  sigprocmask(SIG_BLOCK, &blocked, &old);  // no interrupt between the test and the wait
  std::fprintf(stderr, "sdpa-bench: held after computing cell %ld (SDPA_TEST_HOLD)\n", cell);
  while (interrupts > 1 || g_signal == 0) sigsuspend(&old);
  sigprocmask(SIG_SETMASK, &old, nullptr);
}

// Installs the handler for SIGINT and SIGTERM while a run is in progress.
class InterruptGuard {
 public:
  explicit InterruptGuard(const std::string& resume) {
    g_signal = 0;
    g_stop_message =
        "\nsdpa-bench: stopped; the journal keeps every finished cell; resume with:\n  " + resume +
        "\n";
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~InterruptGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  int received() const { return g_signal; }

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// Everything that could refuse a run, before its first cell: memory for its threads (the
// config was checked with its own), and every file it will write.
void check_run(const Config& config, const std::vector<ExperimentPlan>& plans,
               const JournalHeader& header, const std::string& journal,
               const std::string& benchmark_json) {
  if (const auto memory = memory_problems(plans, header.threads); !memory.empty())
    throw InputError(config.path + ": " + memory.front());
  check_output_file("-o", header.result,
                    {{config.path, "the config"}, {benchmark_json, "Google Benchmark's JSON"}});
  check_output_file("-o", journal, {{config.path, "the config"}});
  if (!benchmark_json.empty())
    check_output_file("--benchmark-json", benchmark_json,
                      {{config.path, "the config"}, {journal, "the run's journal"}});
}

// An FMA peak's recheck this many times its first measurement: the host ran slower for a while
// (repeated FMA peaks agree within a few per cent; the triad moves more: docs/methodology.md).
constexpr double kSlowSpell = 1.2;

}  // namespace

std::string default_result_folder() { return "results/" + machine_id(machine_fingerprint()); }

std::string run_config(const Config& config, const RunOptions& options) {
  // Google Benchmark's flags are checked before anything runs.
  BenchmarkSession benchmark(options.benchmark_flags, options.benchmark_json);
  RunShared shared{.peaks = json::array(), .benchmark = &benchmark};
  const auto plans = make_plan(config);
  Progress progress(options.progress);

  // A fresh run starts a journal; a resumed one takes its header and finished cells.
  JournalHeader header;
  std::map<std::pair<std::uint32_t, std::int64_t>, JournalEntry> done;
  std::optional<JournalWriter> journal;
  std::optional<JournalContents> resumed;
  const std::time_t started = std::time(nullptr);
  const std::string fresh_result = !options.output.empty()
                                       ? options.output
                                       : default_result_folder() + "/" +
                                             result_stem(config.name, options.shard) + "-" +
                                             utc_time(started, "%Y%m%dT%H%M%SZ") + ".json";
  const std::string journal_path =
      !options.resume.empty() ? options.resume : journal_path_for(fresh_result);
  // From here on an interrupt stops the run between cells (before the first one at the
  // latest), once the journal exists.
  const std::string resume = resume_command(options.program, journal_path);
  InterruptGuard interrupt(resume);
  if (!options.resume.empty()) {
    // Locked before it is read: a live run's journal is not ours to read or continue.
    journal.emplace(JournalWriter::reopen(journal_path));
    resumed = read_journal(journal_path);
    done = journal_cells(journal_path, *resumed, config, plans);
    header = resumed->header;
    if (!options.output.empty() && options.output != header.result)
      throw InputError(journal_path + ": this run writes " + header.result + ", not " +
                       options.output);
    if (options.threads > 0) header.threads = options.threads;
    if (options.shard && options.shard != header.shard)
      throw InputError(journal_path + ": this run computes " +
                       (header.shard ? "shard " + header.shard->text() : "every cell") +
                       ", not shard " + options.shard->text());
    check_run(config, plans, header, journal_path, benchmark.json_path());
  } else {
    header.config_path = config.path;
    header.config_sha256 = config.sha256;
    header.seed = config.seed;
    header.result = fresh_result;
    header.started_at = utc_time(started, "%Y-%m-%dT%H:%M:%SZ");
    header.threads =
        options.threads > 0 ? options.threads : config.document.value("threads", default_threads());
    header.shard = options.shard;
    check_run(config, plans, header, journal_path, benchmark.json_path());
    if (std::filesystem::exists(journal_path)) {
      if (journal_is_live(journal_path))
        throw InputError(journal_path + ": another run of " + header.result +
                         " is writing this journal now (it holds its lock); wait for it to "
                         "finish or stop it, or give this run another -o");
      throw InputError(journal_path + ": an interrupted run of " + header.result +
                       " left this journal; resume it with `" + resume +
                       "`, or remove it to start afresh");
    }
  }
  // A shard runs its own cells only; every other is left to the other shards.
  std::optional<std::vector<std::vector<std::int64_t>>> shard_cells;
  if (header.shard) shard_cells = cells_of_shard(plans, *header.shard);
  auto in_run = [&](std::uint32_t experiment, std::int64_t cell) {
    return !shard_cells || std::binary_search((*shard_cells)[experiment].begin(),
                                              (*shard_cells)[experiment].end(), cell);
  };
  std::size_t cells = 0;
  for (const auto& plan : plans)
    for (const auto& cell : plan.cells) cells += in_run(plan.index, cell.index) ? 1 : 0;
  for (const auto& [key, entry] : done)
    if (!in_run(key.first, key.second))
      throw InputError(journal_path + ":" + std::to_string(entry.line) +
                       ": corrupt journal line: cell " + std::to_string(key.second) +
                       " of experiment " + std::to_string(key.first) + " is not in shard " +
                       header.shard->text());
  if (resumed) {
    if (!resumed->warning.empty()) std::fprintf(stderr, "warning: %s\n", resumed->warning.c_str());
    journal->continue_after(*resumed);
    progress.note("resuming " + journal_path + ": " + std::to_string(done.size()) + " of " +
                  std::to_string(cells) + " cells done");
  } else {
    journal.emplace(JournalWriter::create(journal_path, header));
  }

  const json machine = machine_fingerprint();
  json result;
  result["schema_version"] = kResultSchemaVersion;
  result["suite"] = suite_info();
  result["machine"] = machine;
  result["machine_id"] = machine_id(machine);
  result["config"] = {
      {"path", config.path}, {"sha256", config.sha256}, {"document", config.document}};
  result["seed"] = config.seed;
  result["threads"] = header.threads;
  result["started_at"] = header.started_at;
  result["experiments"] = json::array();

  const auto run_start = Clock::now();
  const TestHold hold = test_hold();
  long computed = 0;             // cells this process computed
  double journaled_seconds = 0;  // cells computed before this resumption
  std::size_t finished = done.size();
  for (const auto& plan : plans) {
    const auto start = Clock::now();
    double seconds = 0;
    json records = json::array();
    const std::size_t plan_cells =
        shard_cells ? (*shard_cells)[plan.index].size() : plan.cells.size();
    for (const auto& cell : plan.cells) {
      if (!in_run(plan.index, cell.index)) continue;
      if (const auto it = done.find({plan.index, cell.index}); it != done.end()) {
        // A journal's line is checked for its cell and checksum, not its record's fields: a
        // kind's hook that misses one names it (InputError), and the line is named here. A
        // JSON type error is a field a hook read without checking it: the line is still named.
        if (plan.kind->resumed) {
          const auto corrupt = [&](const char* why) {
            return InputError(journal_path + ":" + std::to_string(it->second.line) +
                              ": corrupt journal line: " + why);
          };
          try {
            plan.kind->resumed(it->second.record, shared);
          } catch (const InputError& e) {
            throw corrupt(e.what());
          } catch (const json::exception& e) {
            throw corrupt(e.what());
          }
        }
        records.push_back(it->second.record);
        seconds += it->second.seconds;
        journaled_seconds += it->second.seconds;
        continue;
      }
      if (const int signal = interrupt.received()) {
        progress.clear_line();
        throw RunInterrupted(signal, "sdpa-bench: interrupted; " + std::to_string(finished) +
                                         " of " + std::to_string(cells) +
                                         " cells are in the journal; resume with:\n  " + resume);
      }
      const auto cell_start = Clock::now();
      json record = {{"cell", cell.index}, {"params", json::object()}};
      for (const auto& axis : plan.kind->axes) record["params"][axis] = cell.params[axis];
      record.update(plan.kind->run_cell({cell, config.seed, plan.index, header.threads, &shared}));
      const double cell_seconds = seconds_since(cell_start);
      if (computed++ == hold.cell) hold_for_test(hold.cell, hold.interrupts);
      journal->append({plan.index, cell.index, cell_seconds, record});
      seconds += cell_seconds;
      ++finished;
      records.push_back(std::move(record));
      progress.cell_done(plan, records.size(), plan_cells, seconds_since(start));
    }
    progress.experiment_done(plan, plan_cells, seconds);
    result["experiments"].push_back({{"name", plan.name},
                                     {"kind", plan.kind->name},
                                     {"params", plan.params},
                                     {"duration_s", seconds},
                                     {"records", std::move(records)}});
  }
  // Peaks measured by roofline (or timing) cells describe the machine: every timing's % of
  // peak refers to one of them. Each is measured again now, and its ceilings become the better of
  // the two measurements, so the records derived from them are derived again.
  if (!shared.peaks.empty()) {
    progress.live("measuring each peak again (" + std::to_string(shared.peaks.size()) + ")");
    recheck_peaks(shared.peaks, result["experiments"]);
    progress.clear_line();
    for (std::size_t e = 0; e < plans.size(); ++e)
      if (plans[e].kind->rechecked)
        for (json& record : result["experiments"][e]["records"])
          plans[e].kind->rechecked(record, plans[e].cells[record["cell"].get<std::size_t>()].params,
                                   header.threads, shared);
    for (const json& peak : shared.peaks) {
      if (!peak.contains("recheck")) continue;  // an ISA this build cannot measure
      const double ratio =
          peak["recheck"]["fma_gflops"].get<double>() / peak["first"]["fma_gflops"].get<double>();
      if (ratio > kSlowSpell)
        std::fprintf(stderr,
                     "note: the %s multiply-add peak on %d thread(s) measured %.3g times as high "
                     "after the last cell as at first: the host ran slower for a while, perhaps "
                     "during timings too; each %% is read against the higher\n",
                     peak["isa"].get<std::string>().c_str(), peak["threads"].get<int>(), ratio);
    }
    result["machine"]["peak"] = shared.peaks;
  }
  result["duration_s"] = journaled_seconds + seconds_since(run_start);
  // A shard says which it is and which cells it holds; `merge` checks them against the others.
  if (header.shard)
    result["shard"] = {
        {"index", header.shard->index}, {"count", header.shard->count}, {"cells", *shard_cells}};
  // The file must be one `report` reads: a result out of its schema (a journal's record
  // crafted to pass its checks, a statistic that came out non-finite) is refused here, with
  // the journal kept, rather than written.
  std::string text = report::result_file_text(std::move(result));
  report::parse_result_file(header.result, text);
  std::vector<std::pair<std::string, std::string>> files = {{header.result, std::move(text)}};
  if (std::string gb = benchmark.finish(); !benchmark.json_path().empty())
    files.emplace_back(benchmark.json_path(), std::move(gb));
  write_files_atomically(files);
  journal->remove();
  return header.result;
}

}  // namespace sdpa
