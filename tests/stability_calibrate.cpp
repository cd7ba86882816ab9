// Calibration driver for the learning-rate sweep of the stability study (not a test): trains
// every (scheme, d_k, learning rate, seed) run of a grid given on the command line and prints one
// CSV line per run, then the wall time. Arguments are key=value; lists are comma-separated.
//   stability_calibrate schemes=none,sqrt_dk,dk,log_n,qk_norm d_k=8,64 lr=1e-3,1e-2 seeds=3
//     d_model=32 heads=1 layers=2 d_ff=64 vocab=16 n_pairs=8 batch=32 steps=200 log_every=25
//     eval_size=128 warmup=0 cosine=0 weight_decay=0.01 threads=2 kernel=naive
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "stability_run.hpp"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {{"schemes", "none,sqrt_dk,dk,log_n,qk_norm"},
                                          {"d_k", "16"},
                                          {"lr", "1e-3,1e-2,1e-1"},
                                          {"seeds", "2"},
                                          {"d_model", "32"},
                                          {"heads", "1"},
                                          {"layers", "2"},
                                          {"d_ff", "64"},
                                          {"vocab", "16"},
                                          {"n_pairs", "8"},
                                          {"batch", "32"},
                                          {"steps", "200"},
                                          {"log_every", "25"},
                                          {"eval_size", "128"},
                                          {"warmup", "0"},
                                          {"cosine", "0"},
                                          {"weight_decay", "0.01"},
                                          {"threads", "2"},
                                          {"kernel", "naive"},
                                          {"init", "pytorch"},
                                          {"seed", "20261122"}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    if (eq == std::string::npos || !a.count(arg.substr(0, eq))) {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
    a[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  using namespace sdpa::stability;
  std::vector<RunSpec> runs;
  for (const auto& scheme : split(a["schemes"]))
    for (const auto& d_k : split(a["d_k"]))
      for (const auto& lr : split(a["lr"]))
        for (int seed = 0; seed < std::stoi(a["seeds"]); ++seed) {
          RunSpec r;
          r.scheme = *parse_scheme(scheme);
          r.shape.base = {.d_model = std::stoll(a["d_model"]),
                          .d_k = std::stoll(d_k),
                          .heads = std::stoll(a["heads"]),
                          .vocab = std::stoll(a["vocab"]),
                          .n_pairs = std::stoll(a["n_pairs"])};
          r.shape.layers = std::stoll(a["layers"]);
          r.shape.d_ff = std::stoll(a["d_ff"]);
          r.kernel = a["kernel"];
          r.init = a["init"];
          r.learning_rate = std::stod(lr);
          r.weight_decay = std::stod(a["weight_decay"]);
          r.warmup_steps = std::stoll(a["warmup"]);
          r.cosine_decay = a["cosine"] == "1";
          r.batch = std::stoll(a["batch"]);
          r.steps = std::stoll(a["steps"]);
          r.log_every = std::stoll(a["log_every"]);
          r.eval_size = std::stoll(a["eval_size"]);
          r.key = {.seed = std::stoull(a["seed"]), .trial = std::uint32_t(seed)};
          runs.push_back(r);
        }
  const auto start = std::chrono::steady_clock::now();
  // train_runs() spreads the runs the same way; here each run is also timed.
  std::vector<RunResult> results(runs.size());
  std::vector<double> run_seconds(runs.size());
#pragma omp parallel for num_threads(std::stoi(a["threads"])) schedule(dynamic)
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    results[i] = train_run(runs[i]);
    run_seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "scheme,d_k,lr,seed,initial_loss,final_loss,final_accuracy,diverged,diverged_at,"
      "max_logit_first,max_logit_last,entropy_last,seconds\n");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = results[i];
    const auto& last = r.layer.back();
    std::printf("%s,%lld,%g,%u,%.4f,%.4f,%.3f,%d,%lld,%.2f,%.2f,%.3f,%.3f\n",
                std::string(scheme_name(runs[i].scheme)).c_str(), (long long)runs[i].shape.base.d_k,
                runs[i].learning_rate, runs[i].key.trial, r.initial_loss, r.final_loss,
                r.final_accuracy, int(r.diverged), (long long)r.diverged_at.value_or(-1),
                r.layer.front().max_logit.back(), last.max_logit.back(), last.entropy.back(),
                run_seconds[i]);
  }
  std::printf("runs %zu, wall %.2f s, %.3f s per run\n", runs.size(), seconds,
              seconds / double(runs.size()));
}
