#include "benchmark_session.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <iostream>
#include <regex>
#include <sstream>

#include "sdpa/experiments.hpp"
#include "sdpa/json_schema.hpp"

namespace sdpa {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Google Benchmark 1.7's flags (`sdpa-bench run CONFIG -- --help`) and what each accepts
// (--benchmark_out_format, which must be json, is the session's own).
// The library checks only that a value parses: it takes --benchmark_repetitions=-5 (and
// fails later in vector::reserve), a filter that is not a regular expression (and runs
// nothing), and any min time (and runs past any limit). So every value is checked here,
// numbers against the range of the config value they stand for.
enum class Accepts { Boolean, Number, Choice, Filter, Context, Path, Nothing };

struct Flag {
  const char* name;
  Accepts accepts;
  const char* detail;  // the config value's schema node, the choices, or why it is refused
};

const Flag kFlags[] = {
    {"benchmark_list_tests", Accepts::Nothing,
     "it lists benchmarks instead of running them, and every cell would be recorded as not "
     "run; `sdpa-bench validate CONFIG` counts the cells"},
    {"benchmark_filter", Accepts::Filter, ""},
    {"benchmark_min_time", Accepts::Number, "/definitions/timing/properties/min_time"},
    {"benchmark_min_warmup_time", Accepts::Number, "/definitions/timing/properties/warmup_time"},
    {"benchmark_repetitions", Accepts::Number, "/definitions/timing/properties/repetitions"},
    {"benchmark_enable_random_interleaving", Accepts::Boolean, ""},
    {"benchmark_report_aggregates_only", Accepts::Boolean, ""},
    {"benchmark_display_aggregates_only", Accepts::Boolean, ""},
    {"benchmark_format", Accepts::Choice, "console|json|csv"},
    {"benchmark_out", Accepts::Path, ""},
    {"benchmark_color", Accepts::Choice, "auto|true|false"},
    {"benchmark_counters_tabular", Accepts::Boolean, ""},
    {"benchmark_context", Accepts::Context, ""},
    {"benchmark_time_unit", Accepts::Choice, "ns|us|ms|s"},
    {"v", Accepts::Number, ""},
};

// Longer filters are refused unread: std::regex compiles and matches by recursion.
constexpr std::size_t kMaxFilterLength = 1000;

// Checks one argument after `--`; unknown flags are left to Google Benchmark, which names
// them. Throws InputError "<flag>: expected ..., found ...".
void check_flag(const std::string& argument) {
  if (!starts_with(argument, "--")) return;
  const std::size_t equals = argument.find('=');
  const std::string name =
      argument.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
  const auto* flag = std::find_if(std::begin(kFlags), std::end(kFlags),
                                  [&](const Flag& f) { return name == f.name; });
  if (flag == std::end(kFlags)) return;
  const std::string option = "--" + name;
  if (flag->accepts == Accepts::Nothing)
    throw InputError(option + ": not for `run`: " + flag->detail);
  const bool bare = equals == std::string::npos;
  const std::string value = bare ? "" : argument.substr(equals + 1);
  auto refuse = [&](const std::string& expected) {
    throw InputError(option + ": expected " + expected + ", found " +
                     (bare ? std::string("no value") : "\"" + value + "\""));
  };
  switch (flag->accepts) {
    case Accepts::Boolean:
      if (!bare && value != "true" && value != "false") refuse("true or false");
      break;
    case Accepts::Number:
      if (bare) refuse("=NUMBER");
      if (*flag->detail)
        parse_number_option(option, value, config_range(flag->detail));
      else  // --v, the log's verbosity
        parse_number_option(option, value, {.integer = true, .min = 0, .max = 1e9});
      break;
    case Accepts::Choice: {
      const auto choices = split(flag->detail, '|');
      if (bare || std::find(choices.begin(), choices.end(), value) == choices.end()) {
        std::string list;
        for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
        refuse("one of " + list);
      }
      break;
    }
    case Accepts::Filter: {
      if (bare || value.empty()) refuse("a regular expression");
      if (value.size() > kMaxFilterLength)
        refuse("a regular expression of at most " + std::to_string(kMaxFilterLength) +
               " characters");
      // As Google Benchmark reads it: a leading '-' negates, "all" matches everything.
      try {
        std::regex(value[0] == '-' ? value.substr(1) : value, std::regex::extended);
      } catch (const std::regex_error& e) {
        refuse("a regular expression (POSIX extended, as Google Benchmark reads it; " +
               std::string(e.what()) + ")");
      }
      break;
    }
    case Accepts::Context:
      if (bare || value.empty()) refuse("KEY=VALUE[,KEY=VALUE...]");
      for (const auto& pair : split(value, ','))
        if (pair.find('=') == std::string::npos || pair.front() == '=')
          refuse("KEY=VALUE[,KEY=VALUE...]");
      break;
    case Accepts::Path:
      if (bare || value.empty()) refuse("a file name");
      break;
    case Accepts::Nothing:
      break;
  }
}

// Keeps the repetitions of the benchmark being run (not the aggregates: statistics are ours)
// and passes everything on to the JSON reporter, whose context is written once per run.
class Collector : public benchmark::BenchmarkReporter {
 public:
  benchmark::JSONReporter* json = nullptr;
  bool context_reported = false;
  std::vector<Run> repetitions;

  bool ReportContext(const Context& context) override {
    if (json && !context_reported) json->ReportContext(context);
    context_reported = true;
    return true;
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs)
      if (r.run_type == Run::RT_Iteration && !r.error_occurred) repetitions.push_back(r);
    if (json) json->ReportRuns(runs);
  }
};

}  // namespace

struct BenchmarkSession::State {
  std::string json_path;
  std::ostringstream json_text;
  benchmark::JSONReporter json;
  Collector collector;
  std::ostream discard{nullptr};
  bool flag_repetitions = false, flag_min_time = false, flag_warmup = false;
  bool finished = false;
};

BenchmarkSession::BenchmarkSession(const std::vector<std::string>& flags,
                                   const std::string& json_path)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.json_path = json_path;
  // Google Benchmark keeps argv[0] as the executable's name for its JSON context.
  static char program[] = "sdpa-bench";
  std::vector<std::string> passed;
  std::string format = "json";
  for (const auto& f : flags) check_flag(f);
  for (const auto& f : flags) {
    if (starts_with(f, "--benchmark_out=")) {
      const std::string path = f.substr(16);
      if (!s.json_path.empty() && s.json_path != path)
        throw InputError("--benchmark_out=" + path +
                         ": the run already writes Google Benchmark's "
                         "JSON to " +
                         s.json_path + " (--benchmark-json); give one of them");
      s.json_path = path;
    } else if (starts_with(f, "--benchmark_out_format=")) {
      format = f.substr(23);
    } else {
      passed.push_back(f);
    }
    s.flag_repetitions |= starts_with(f, "--benchmark_repetitions=");
    s.flag_min_time |= starts_with(f, "--benchmark_min_time=");
    s.flag_warmup |= starts_with(f, "--benchmark_min_warmup_time=");
  }
  if (format != "json")
    throw InputError("--benchmark_out_format=" + format +
                     ": expected json (the format compare.py reads), found \"" + format + "\"");
  std::vector<char*> argv = {program};
  for (auto& f : passed) argv.push_back(f.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(argv.size()) - 1;
  benchmark::Initialize(&argc, argv.data());
  if (argc > 1) {
    std::string unknown;
    for (int i = 1; i < argc; ++i) unknown += (i > 1 ? ", \"" : "\"") + std::string(argv[i]) + "\"";
    throw InputError(
        "arguments after --: expected Google Benchmark flags (--benchmark_...=VALUE; "
        "list them with `sdpa-bench run CONFIG -- --help`), found " +
        unknown);
  }
  s.json.SetOutputStream(&s.json_text);
  s.json.SetErrorStream(&s.json_text);
  if (!s.json_path.empty()) s.collector.json = &s.json;
  s.collector.SetOutputStream(&std::cerr);  // --benchmark_list_tests
  s.collector.SetErrorStream(&s.discard);   // "Failed to match any benchmarks" for filtered cells
}

BenchmarkSession::~BenchmarkSession() = default;

const std::string& BenchmarkSession::json_path() const { return state_->json_path; }

BenchmarkRuns BenchmarkSession::run(const std::string& name, const std::function<void()>& body,
                                    const BenchmarkSettings& settings) {
  State& s = *state_;
  s.collector.repetitions.clear();
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [&body](benchmark::State& st) {
    for (auto _ : st) body();
  });
  b->UseRealTime();  // kernels run their own threads: wall time is what a caller waits
  // Every repetition is reported (to us and to the JSON), whatever the *_aggregates_only flags.
  b->ReportAggregatesOnly(false);
  if (!s.flag_repetitions) b->Repetitions(settings.repetitions);
  if (!s.flag_min_time) b->MinTime(settings.min_time);
  if (!s.flag_warmup && settings.warmup_time > 0) b->MinWarmUpTime(settings.warmup_time);
  benchmark::RunSpecifiedBenchmarks(&s.collector);
  benchmark::ClearRegisteredBenchmarks();

  BenchmarkRuns out;
  for (const auto& r : s.collector.repetitions) {
    out.name = r.benchmark_name();
    out.seconds.push_back(r.real_accumulated_time / double(r.iterations));
    out.iterations.push_back(r.iterations);
  }
  out.filtered_out = out.seconds.empty();
  return out;
}

std::string BenchmarkSession::finish() {
  State& s = *state_;
  if (s.finished || s.json_path.empty()) return "";
  s.finished = true;
  // No benchmark ran: still a document compare.py reads.
  if (!s.collector.context_reported) return "{\n  \"context\": {},\n  \"benchmarks\": []\n}\n";
  s.json.Finalize();
  return s.json_text.str();
}

}  // namespace sdpa
