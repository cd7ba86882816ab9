// Google Benchmark as the timing experiment uses it: one session per run, which takes the
// library's own flags (what follows `--` on the command line), runs one benchmark per cell and
// hands back every repetition, and optionally writes Google Benchmark's JSON for the whole run
// (one document, as compare.py expects).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sdpa {

struct BenchmarkSettings {
  int repetitions = 10;
  double min_time = 0.05;     // seconds per repetition
  double warmup_time = 0.02;  // seconds run and discarded before the first repetition
};

struct BenchmarkRuns {
  std::string name;                      // Google Benchmark's name of the run, as in its JSON
  std::vector<double> seconds;           // per repetition: wall time per call
  std::vector<std::int64_t> iterations;  // per repetition: calls timed
  bool filtered_out = false;             // --benchmark_filter did not select it
};

class BenchmarkSession {
 public:
  // `flags`: Google Benchmark flags such as "--benchmark_filter=naive"; `json_path`: where its
  // JSON goes ("" for nowhere). --benchmark_out=FILE is the same as json_path (JSON only).
  // Throws InputError for flags Google Benchmark does not know, and for values out of range
  // (numbers in the range of the config value they stand for) or malformed.
  BenchmarkSession(const std::vector<std::string>& flags, const std::string& json_path);
  ~BenchmarkSession();
  BenchmarkSession(const BenchmarkSession&) = delete;
  BenchmarkSession& operator=(const BenchmarkSession&) = delete;

  // Times body() as benchmark `name`. Repetitions, min time and warm-up given as flags win
  // over `settings` (which come from the config).
  BenchmarkRuns run(const std::string& name, const std::function<void()>& body,
                    const BenchmarkSettings& settings);

  // Where Google Benchmark's JSON goes (--benchmark-json or --benchmark_out), "" for nowhere.
  const std::string& json_path() const;

  // The JSON file's text, if one was asked for ("" otherwise). Called once, after the last
  // run; the runner writes it with the result file, all or nothing.
  std::string finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sdpa
