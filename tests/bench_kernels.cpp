// Forward and backward timings of every registry variant (Google Benchmark), with GFLOP/s and
// % of the fp32 FMA peak measured in this same binary for the variant's ISA and thread count.
// A backward counts 2.5 forwards of FLOPs (docs/design.md, "Conventions"; Kernel::flops), so a
// backward that takes 2.5x its forward's time runs at the same GFLOP/s.
//   build/release/tests/bench_kernels --benchmark_filter='(fwd|bwd)/flash/N:1024/'
// Timing is a benchmark, never a test assertion.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sdpa/kernels.hpp"

namespace {

// Measured once at start-up: GFLOP/s of independent FMA chains per (isa, threads).
std::map<std::pair<std::string, int>, double> g_peak;

// Which measured peak a kernel is held against: its own ISA; library peers that choose their
// ISA themselves (OpenBLAS) against the best one here.
std::string peak_isa(const sdpa::Kernel& k) {
  if (sdpa::find_simd_target(k.isa)) return k.isa;
  return sdpa::simd_targets().front().isa;
}

struct Tensors {
  std::vector<float> q, k, v, out, lse, d_out, d_q, d_k, d_v;
  explicit Tensors(const sdpa::Shape& s) {
    std::mt19937 rng(1);
    std::normal_distribution<float> n01;
    for (auto [x, size] : {std::pair{&q, s.q_elements()}, std::pair{&k, s.k_elements()},
                           std::pair{&v, s.v_elements()}, std::pair{&d_out, s.out_elements()}}) {
      x->resize(size);
      for (auto& e : *x) e = n01(rng);
    }
    out.resize(s.out_elements());
    lse.resize(s.rows());
    d_q.resize(q.size());
    d_k.resize(k.size());
    d_v.resize(v.size());
  }
};

// Runs `call` in the timing loop and sets the rate counters from the wall time of the calls
// alone, `flops` each.
template <class Call>
void time_calls(benchmark::State& state, const sdpa::Kernel& kern, int threads, double flops,
                Call call) {
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    benchmark::ClobberMemory();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double gflops = flops * double(state.iterations()) / seconds * 1e-9;
  state.counters["GFLOP/s"] = gflops;
  state.counters["%peak"] = 100.0 * gflops / g_peak[{peak_isa(kern), threads}];
  state.SetLabel(kern.isa);
}

sdpa::ForwardArgs forward_args(const sdpa::Shape& shape, Tensors& t, int threads) {
  return {.shape = shape,
          .q = t.q.data(),
          .k = t.k.data(),
          .v = t.v.data(),
          .out = t.out.data(),
          .lse = t.lse.data(),
          .scale = float(1.0 / std::sqrt(double(shape.d_k))),
          .causal = false,
          .threads = threads};
}

sdpa::Shape square(std::int64_t n, std::int64_t d) {
  return {.batch_heads = 1, .n_q = n, .n_kv = n, .d_k = d, .d_v = d};
}

void bench_forward(benchmark::State& state, const sdpa::Kernel* kern, std::int64_t n,
                   std::int64_t d, int threads, bool probes) {
  const sdpa::Shape shape = square(n, d);
  Tensors t(shape);
  sdpa::RowProbes sink(shape.rows());
  sdpa::ForwardArgs args = forward_args(shape, t, threads);
  if (probes) args.probes = &sink;
  time_calls(state, *kern, threads, kern->flops(shape, false, sdpa::Pass::forward),
             [&] { kern->forward(args); });
}

// The backward alone, from one forward's output and lse.
void bench_backward(benchmark::State& state, const sdpa::Kernel* kern, std::int64_t n,
                    std::int64_t d, int threads) {
  const sdpa::Shape shape = square(n, d);
  Tensors t(shape);
  const sdpa::ForwardArgs fwd = forward_args(shape, t, threads);
  kern->forward(fwd);
  const sdpa::BackwardArgs args =
      sdpa::backward_of(fwd, t.d_out.data(), t.d_q.data(), t.d_k.data(), t.d_v.data());
  time_calls(state, *kern, threads, kern->flops(shape, false, sdpa::Pass::backward),
             [&] { kern->backward(args); });
}

void bench_peak(benchmark::State& state, const sdpa::SimdTarget* target, int threads) {
  double gflops = 0;
  for (auto _ : state) gflops = sdpa::measure_fma_peak(*target, threads, 0.25);
  state.counters["GFLOP/s"] = gflops;
}

// The rungs that split work over threads and the library peers; the slow rungs run on one.
bool multi_threaded(const sdpa::Kernel& k) {
  return k.family != "reference" && k.family != "naive";
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (const auto& t : sdpa::simd_targets())
    for (int threads : {1, 2}) {
      const double gflops = sdpa::measure_fma_peak(t, threads);
      g_peak[{t.isa, threads}] = gflops;
      benchmark::AddCustomContext("peak_gflops_" + t.isa + "_t" + std::to_string(threads),
                                  std::to_string(gflops));
      benchmark::RegisterBenchmark(
          ("peak/" + t.isa + "/threads:" + std::to_string(threads)).c_str(), bench_peak, &t,
          threads)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
    }
  for (const auto& k : sdpa::kernel_registry())
    for (std::int64_t n : {512, 1024, 4096})
      for (std::int64_t d : {64, 128}) {
        if (n >= 4096 && (k.family == "reference" || k.family == "naive")) continue;  // minutes
        for (int threads : {1, 2}) {
          if (threads > 1 && !multi_threaded(k)) continue;
          for (bool probes : {false, true}) {
            if (probes && k.family != "flash") continue;  // probe cost: shown on flash
            const std::string name =
                "fwd/" + k.name + "/N:" + std::to_string(n) + "/d:" + std::to_string(d) +
                "/threads:" + std::to_string(threads) + (probes ? "/probes" : "");
            benchmark::RegisterBenchmark(name.c_str(), bench_forward, &k, n, d, threads, probes)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
          }
          if (!k.backward) continue;
          const std::string name = "bwd/" + k.name + "/N:" + std::to_string(n) +
                                   "/d:" + std::to_string(d) +
                                   "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), bench_backward, &k, n, d, threads)
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        }
      }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
