#include "benchmark_session.hpp"

#include <benchmark/benchmark.h>

#include <iostream>
#include <sstream>

#include "sdpa/experiments.hpp"

namespace sdpa {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
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

void BenchmarkSession::finish() {
  State& s = *state_;
  if (s.finished || s.json_path.empty()) return;
  s.finished = true;
  if (!s.collector.context_reported) {  // no benchmark ran: still a document compare.py reads
    write_file_atomically(s.json_path, "{\n  \"context\": {},\n  \"benchmarks\": []\n}\n");
    return;
  }
  s.json.Finalize();
  write_file_atomically(s.json_path, s.json_text.str());
}

}  // namespace sdpa
