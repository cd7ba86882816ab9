// sdpa_experiments: config model and validation, the plan (grid of cells), the experiment
// kinds, the runner and the result file. Depends on sdpa_kernels and sdpa_analysis.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sdpa/escape.hpp"  // shell_quoted, sha256_hex
#include "sdpa/input_error.hpp"
#include "sdpa/record.hpp"

namespace sdpa {

// sdpa::json is nlohmann::ordered_json: a config embedded in a result file keeps the user's
// key order.

// ---- config -------------------------------------------------------------------------------

// clang-tidy 14 sees a throw in the implicit special members of structs holding json, which
// cannot throw: hence the NOLINTs on Config, ExperimentPlan and JournalEntry.
struct Config {        // NOLINT(bugprone-exception-escape)
  std::string path;    // as given by the user; every error message names it
  std::string text;    // the file's bytes, hashed into sha256
  std::string sha256;  // hex digest of text
  json document;       // the parsed config, verbatim
  std::string name;
  std::uint64_t seed = 0;
  // Lines for the user that are not errors: "<file>: <json path>: ..." (an old parameter name
  // read under its new one).
  std::vector<std::string> notes;
};

// Reads, parses and validates a config (schema, then semantic checks). Throws InputError
// naming the file, the JSON path and what was expected for every problem found.
Config load_config(const std::string& path);
// The same on text already in memory (tests, fuzzing); `path` only labels messages.
Config parse_config(const std::string& path, const std::string& text);

// The schema configs are checked against (configs/schema.json is a copy, for editors):
// kinds/config.schema.json with each kind's config.schema.json, assembled at start-up.
const json& config_schema();

// ---- limits of the numbers a user gives --------------------------------------------------

// A number's range as configs/schema.json states it for a config value. Command-line flags
// that stand for a config value (-j for `threads`, --benchmark_repetitions for a timing
// experiment's `repetitions`, ...) are checked against the same node, so each limit is
// written once, in the schema.
struct NumberRange {
  bool integer = false;
  double min = -1e308, max = 1e308;
  bool min_exclusive = false;
  std::string text() const;  // "an integer from 1 to 1024", "a number in (0, 60]"
};

// The range of the schema node at `pointer` ("/properties/threads", ...).
NumberRange config_range(const std::string& pointer);

// `text` as a number in `range`: the whole text, finite. Throws InputError "<option>:
// expected <range>, found \"<text>\"".
double parse_number_option(const std::string& option, const std::string& text,
                           const NumberRange& range);

// A thread count given on the command line, in the range of the config's `threads` (1 to
// 1024: libgomp crashes, rather than fail, when it cannot start the threads it is asked for).
int parse_threads_option(const std::string& option, const std::string& text);

// ---- experiment kinds ---------------------------------------------------------------------

// One cell of an experiment's grid: every parameter with a single value.
struct Cell {
  std::int64_t index = 0;  // stable position in the grid; keys the cell's random streams
  json params;
};

class BenchmarkSession;  // Google Benchmark for timing cells (experiments/benchmark_session.hpp)

// What the cells of one run share: the peaks measured so far (the result file's machine.peak,
// against which timings are normalised) and the run's Google Benchmark session.
struct RunShared {
  json peaks = json::array();  // machine.peak (peak_measure.hpp)
  BenchmarkSession* benchmark = nullptr;
};

struct CellContext {
  const Cell& cell;
  std::uint64_t seed;
  std::uint32_t experiment;  // index in the config's list
  int threads;
  RunShared* shared = nullptr;  // null outside a run (tests): kinds that need it make their own
};

// The writing side of an experiment kind: <kind>_experiment() in kinds/<kind>/experiment.cpp,
// listed by one line in kinds/kinds.cmake (docs/design.md, "Experiment kinds"). Its parameters,
// their types and defaults live in kinds/<kind>/config.schema.json.
struct ExperimentKind {
  std::string name;
  std::string description;
  // Parameters that may be lists, in plan order (the last varies fastest).
  std::vector<std::string> axes;
  // Parameters renamed, {old, new}: a config giving the old name is read as if it gave the new
  // one, with a note (Config::notes).
  std::vector<std::pair<std::string, std::string>> renamed = {};
  // Runs one cell and returns its record (measured values beside their predictions).
  std::function<json(const CellContext&)> run_cell;
  // Bytes one cell holds at once when the run has `threads` threads (its inputs, every running
  // trial's tensors and its kernel's workspace, the results it keeps), so a config too big for
  // the machine is refused before anything runs.
  std::function<double(const json& params, int threads)> memory_bytes;
  // A cell finished before a resumption (its record from the journal): what running it put in
  // the run's shared state, put back (a roofline cell's peak, the peaks a timing cell read
  // against). Absent where there is nothing.
  // A record without a field it needs is an InputError saying which (the runner names the
  // journal's line).
  std::function<void(const json& record, RunShared& shared)> resumed = nullptr;
  // A record once the run has measured its peaks again (recheck_peaks), with its cell's
  // parameters and the run's threads: what it derived from a peak (a timing's % of peak),
  // derived again. Absent where nothing was.
  std::function<void(json& record, const json& params, int threads, RunShared& shared)> rechecked =
      nullptr;
  // Checks that need more than the schema (e.g. n_q == n_kv for aligned inputs), on the
  // experiment's parameters with defaults filled in; each returned string is
  // "<json path below the experiment>: <message>".
  std::function<std::vector<std::string>(const json& params)> check;
  // What one cell would compute out of range (the kernels compute in fp32: a scale or scores
  // past its largest value give inf and then wrong statistics, not errors), as "<json path
  // below the experiment>: <message>", or "" when nothing is; checked on every cell before
  // anything runs. May be absent.
  std::function<std::string(const json& params, const json& cell)> cell_check;
};

const std::vector<ExperimentKind>& experiment_kinds();
const ExperimentKind* find_experiment_kind(const std::string& name);

// ---- plan ---------------------------------------------------------------------------------

struct ExperimentPlan {  // NOLINT(bugprone-exception-escape): see Config
  std::uint32_t index = 0;
  std::string name;
  const ExperimentKind* kind = nullptr;
  json params;  // the experiment's config object with schema defaults filled in
  std::vector<Cell> cells;
};

// A grid larger than this is refused: its result file would pass 100 MB and its tables be
// unreadable; expanding it alone took seconds (and 2 GB at a million cells).
inline constexpr std::size_t kMaxCells = 100000;

// Expands every experiment into the cross product of its list-valued parameters. Throws
// InputError "/experiments/<i>: ..." (no file name: parse_config adds it) for a grid of more
// than kMaxCells cells; a loaded config never has one.
std::vector<ExperimentPlan> make_plan(const Config& config);

// Memory the plan needs on `threads` threads at once against what the machine has: one line
// per experiment that does not fit ("/experiments/<i>: needs about ..."), empty when all do.
// parse_config checks the config's own thread count; a run checks its -j.
std::vector<std::string> memory_problems(const std::vector<ExperimentPlan>& plans, int threads);

// ---- a one-shot timing (`sdpa-bench time`) -----------------------------------------------

// The options of `sdpa-bench time` as given ("" when not given): each a timing parameter's value
// or a comma-separated list of them; heads and d are pairs "Q/KV" and "DK/DV" ("32/8", "128":
// d_k = d_v = 128), one timing experiment per pair listed.
struct TimingOptions {
  std::string kernel, heads, n_q, n_kv, d, batch, threads, direction;
  std::string repetitions, min_time, warmup_time;
  bool causal = false;
  std::uint64_t seed = 0;
  std::string description;  // the command line, kept in the result file
};

// The config those options stand for (kinds/timing/command_line.cpp): a roofline on the timed
// thread counts, then the timing experiments. parse_config checks it as it would a file.
json timing_config(const TimingOptions& options);

// A problem of that config as its user reads it: the JSON path of a value ("/experiments/1/n_kv/0")
// rewritten as the option that gave it ("--n-kv").
std::string timing_message(std::string message);

// ---- machine and build --------------------------------------------------------------------

// CPU (model, vendor, family, model, stepping, microarchitecture), cores, ISA extensions,
// caches, memory, frequency governor, transparent huge pages, hypervisor, OS
json machine_fingerprint();
json suite_info();                            // version, git commit, build type, compiler and flags
std::string machine_id(const json& machine);  // e.g. "amd-epyc-zen-4-avx512-2c"
std::string frequency_governor();             // cpufreq's scaling governor; "" when there is none
double available_memory_bytes();
int default_threads();  // the cores this process may use

// ---- runner and result file ---------------------------------------------------------------

// Shard `index` (0 to count-1) of a sweep split into `count` (see sdpa/shard.hpp).
struct Shard {
  int index = 0, count = 1;
  bool operator==(const Shard&) const = default;
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};

struct RunOptions {
  std::string output;    // result file; empty = results/<machine-id>/<name>-<UTC time>.json
  int threads = 0;       // 0 = all cores
  bool progress = true;  // progress lines on stderr
  std::vector<std::string> benchmark_flags;  // Google Benchmark's own flags (after `--`)
  std::string benchmark_json;  // also write Google Benchmark's JSON here (compare.py reads it)
  std::string resume;          // a journal (see sdpa/journal.hpp) whose finished cells are kept
  std::string program = "sdpa-bench";  // as invoked, for the resume command on interruption
  std::optional<Shard> shard;          // run only this shard's cells
};

// Runs every cell, writing each finished one to the journal `<result>.journal`, then writes
// the result file atomically, removes the journal and returns the result's path. Throws
// InputError when resuming a journal of another config or seed, or when a fresh run would
// overwrite the journal of an interrupted one; RunInterrupted on SIGINT or SIGTERM.
std::string run_config(const Config& config, const RunOptions& options);

// A run stopped by SIGINT or SIGTERM after its current cell; the journal holds every finished
// cell. what() says so and gives the exact command that resumes the run.
struct RunInterrupted : std::runtime_error {
  RunInterrupted(int signal, const std::string& message)
      : std::runtime_error(message), signal(signal) {}
  int signal;
};

// "results/<machine-id>": where result files go unless `-o` says otherwise.
std::string default_result_folder();

// Writes text to path through a temporary file in the same folder, fsync and rename: a crash
// never leaves a half-written file.
void write_file_atomically(const std::string& path, const std::string& text);

// The outputs of one command, all or nothing: each {path, text} is written to its temporary
// file and flushed before any is renamed into place, so a failure while writing leaves none.
void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace sdpa
