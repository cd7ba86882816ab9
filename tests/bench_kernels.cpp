// Forward and backward timings of every registry variant (Google Benchmark), with GFLOP/s and
// % of the peak measured in this same binary for the variant's own roofline ISAs and thread count
// (Kernel::roofs, as the timing kind reads them: fp32 FMA chains of its ISA, so flash@avx2 and
// flash@sse4 read against AVX2's and SSE4's peaks on an AVX-512 host; vdpbf16ps chains for the
// bf16 kernels on avx512-bf16; for flash-kv-int8's decode, the int8 dots' chains for the scores
// and its fp32 ISA's for P V). The label names the kernel's ISA and its roofs.
// A backward counts 2.5 forwards of FLOPs (docs/design.md, "Conventions"; Kernel::flops), so a
// backward that takes 2.5x its forward's time runs at the same GFLOP/s.
//   build/release/tests/bench_kernels --benchmark_filter='(fwd|bwd)/flash/N:1024/'
// Decode shapes (one query per head, or a few, against a KV cache, at the head counts of widely
// used models) are memory-bound: they report GB/s (Q, K, V and O once, K and V at their storage
// width) and % of the roof min(FMA peak, intensity x triad bandwidth measured at start-up in
// this binary):
//   build/release/tests/bench_kernels --benchmark_filter='decode/flash/'
// Timing is a benchmark, never a test assertion.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sdpa/aligned.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/peak.hpp"

namespace {

// Measured once at start-up: GFLOP/s of independent multiply-add chains per (roofline isa,
// threads), and the triad's GB/s per thread count (best of its repetitions).
std::map<std::pair<std::string, int>, double> g_peak;
std::map<int, double> g_triad;
// The triad's three arrays together: well past any last-level cache.
constexpr double kTriadFootprint = 512.0 * (1 << 20);

// A roofline ISA's peak on `threads` threads: the Highway target's FMA chains for an fp32 ISA,
// the roofline kind's dot-product chains (best of 3) for a bf16 or int8 roof.
double measure_roof(const std::string& isa, int threads) {
  if (const sdpa::SimdTarget* t = sdpa::find_simd_target(isa))
    return sdpa::measure_fma_peak(*t, threads);
  const auto samples = sdpa::peak::measure_multiply_add(isa, threads, 3, 0.1);
  return *std::max_element(samples.begin(), samples.end());
}

// The compute peak a kernel's rate on `shape` divides by (Kernel::roofs: its scores' and its
// values' ISAs, each product's FLOPs at its own peak), 0 when it has none (its % counters are
// left out).
double peak_of(const sdpa::Kernel& k, const sdpa::Shape& shape, int threads) {
  const sdpa::Kernel::Roofs roofs = k.roofs(shape);
  const auto scores = g_peak.find({roofs.scores, threads});
  const auto values = g_peak.find({roofs.values, threads});
  if (scores == g_peak.end() || values == g_peak.end()) return 0;
  return roofs.peak(scores->second, values->second);
}

// "scores ISA" or "scores ISA+values ISA", as the timing tables name them.
std::string roofs_label(const sdpa::Kernel& k, const sdpa::Shape& shape) {
  const sdpa::Kernel::Roofs roofs = k.roofs(shape);
  if (roofs.scores.empty()) return "none";
  return roofs.values == roofs.scores ? roofs.scores : roofs.scores + "+" + roofs.values;
}

struct Tensors {
  sdpa::AlignedVector<float> q, k, v, out, lse, d_out, d_q, d_k, d_v;
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
// alone, `flops` each. Returns that time per call.
template <class Call>
double time_calls(benchmark::State& state, const sdpa::Kernel& kern, const sdpa::Shape& shape,
                  int threads, double flops, Call call) {
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    benchmark::ClobberMemory();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double gflops = flops * double(state.iterations()) / seconds * 1e-9;
  state.counters["GFLOP/s"] = gflops;
  if (const double peak = peak_of(kern, shape, threads); peak > 0)
    state.counters["%peak"] = 100.0 * gflops / peak;
  state.SetLabel(kern.isa + " (peak " + roofs_label(kern, shape) + ")");
  return seconds / double(state.iterations());
}

sdpa::ForwardArgs forward_args(const sdpa::Shape& shape, Tensors& t, int threads,
                               bool causal = false) {
  return {.shape = shape,
          .q = t.q.data(),
          .k = t.k.data(),
          .v = t.v.data(),
          .out = t.out.data(),
          .lse = t.lse.data(),
          .scale = float(1.0 / std::sqrt(double(shape.d_k))),
          .mask = {.causal = causal},
          .threads = threads};
}

sdpa::Shape square(std::int64_t n, std::int64_t d) {
  return {.batch_heads = 1, .n_q = n, .n_kv = n, .d_k = d, .d_v = d};
}

// GFLOP/s count the visible pairs of the mask (Kernel::flops), so a window's rate compares
// with the dense one directly.
void bench_forward(benchmark::State& state, const sdpa::Kernel* kern, std::int64_t n,
                   std::int64_t d, int threads, bool probes, sdpa::Mask mask, float softcap) {
  const sdpa::Shape shape = square(n, d);
  Tensors t(shape);
  sdpa::RowProbes sink(shape.rows());
  sdpa::ForwardArgs args = forward_args(shape, t, threads);
  if (!kern->row_statistics) args.lse = nullptr;  // O only (ggml)
  if (probes) args.probes = &sink;
  args.mask = mask;
  args.score_mod.softcap = softcap;
  time_calls(state, *kern, shape, threads, kern->flops(shape, mask, sdpa::Pass::forward),
             [&] { kern->forward(args); });
}

// The backward alone, from one forward's output and lse.
void bench_backward(benchmark::State& state, const sdpa::Kernel* kern, std::int64_t n,
                    std::int64_t d, int threads, bool causal) {
  const sdpa::Shape shape = square(n, d);
  Tensors t(shape);
  const sdpa::ForwardArgs fwd = forward_args(shape, t, threads, causal);
  kern->forward(fwd);
  const sdpa::BackwardArgs args =
      sdpa::backward_of(fwd, t.d_out.data(), t.d_q.data(), t.d_k.data(), t.d_v.data());
  time_calls(state, *kern, shape, threads,
             kern->flops(shape, sdpa::Mask{.causal = causal}, sdpa::Pass::backward),
             [&] { kern->backward(args); });
}

void bench_peak(benchmark::State& state, const sdpa::SimdTarget* target, int threads) {
  double gflops = 0;
  for (auto _ : state) gflops = sdpa::measure_fma_peak(*target, threads, 0.25);
  state.counters["GFLOP/s"] = gflops;
}

// ---- decode: one query row per head (or a few: speculative decoding) against a KV cache

struct Heads {
  const char* model;  // whose attention the shape is
  std::int64_t q, kv, d;
};
// Query heads, K/V heads and head dimension of widely used models (their published configs).
// "mha8" is issue 15's table shape (8 heads of their own K/V), not a model.
constexpr Heads kModels[] = {{"mha8", 8, 8, 128},        {"llama3-8b", 32, 8, 128},
                             {"qwen2.5-7b", 28, 4, 128}, {"gemma2-9b", 16, 8, 256},
                             {"phi3-mini", 32, 32, 96},  {"gpt2", 12, 12, 64}};

sdpa::Shape decode_shape(const Heads& h, std::int64_t n_q, std::int64_t cache) {
  return {
      .batch_heads = h.q, .n_q = n_q, .n_kv = cache, .d_k = h.d, .d_v = h.d, .group = h.q / h.kv};
}

// Causal (the mask is aligned to the end: each of the n_q new tokens sees the cache and the
// tokens before it), within a sliding window of `window` keys when window > 0 (Mistral's and
// gpt-oss's: each token sees itself and the window - 1 before it). Reports the bytes moved per
// second (Q, K, V and O once, K and V at their storage width: Kernel::bytes) and % of the roof:
// min(FMA peak, intensity x triad bandwidth measured at start-up on as many threads), the memory
// side on every decode shape.
void bench_decode(benchmark::State& state, const sdpa::Kernel* kern, Heads heads, std::int64_t n_q,
                  std::int64_t cache, int threads, std::int64_t window) {
  const sdpa::Shape shape = decode_shape(heads, n_q, cache);
  Tensors t(shape);
  sdpa::ForwardArgs args = forward_args(shape, t, threads);
  if (!kern->row_statistics) args.lse = nullptr;  // O only (ggml)
  args.mask.causal = true;
  if (window > 0) args.mask.window_left = window - 1;
  // A K/V storage format reads K and V stored once, outside the timed calls (a KV cache).
  std::shared_ptr<const sdpa::StoredKv> stored;
  if (kern->store_kv) stored = kern->store_kv(args);
  args.stored_kv = stored.get();
  // Without a window every decode query sees the whole cache: no pair is masked, so the FLOPs
  // are not halved. With one, the visible pairs and the keys some row sees.
  const sdpa::Mask counted = window > 0 ? args.mask : sdpa::Mask{};
  const double flops = sdpa::forward_flops(shape, counted), bytes = kern->bytes(shape, counted);
  const double seconds =
      time_calls(state, *kern, shape, threads, flops, [&] { kern->forward(args); });
  state.counters["GB/s"] = bytes / seconds * 1e-9;
  if (const double peak = peak_of(*kern, shape, threads); peak > 0)
    state.counters["%roof"] = 100.0 * flops / seconds * 1e-9 /
                              sdpa::peak::roof_gflops(peak, g_triad[threads], flops / bytes);
}

void bench_triad(benchmark::State& state, int threads) {
  std::vector<double> gbs;
  for (auto _ : state)
    gbs = sdpa::peak::measure_triad(sdpa::peak::supported_isas().back(), threads, kTriadFootprint,
                                    20, 0.05);
  std::sort(gbs.begin(), gbs.end());
  state.counters["best_GB/s"] = gbs.back();
  state.counters["median_GB/s"] = gbs[gbs.size() / 2];
  state.counters["min_GB/s"] = gbs.front();
}

// The rungs that split work over threads and the library peers; the slow rungs run on one.
bool multi_threaded(const sdpa::Kernel& k) {
  return k.family != "reference" && k.family != "naive";
}

}  // namespace

void register_decode() {
  const sdpa::Kernel* const peers[] = {sdpa::find_kernel("flash"), sdpa::find_kernel("eigen"),
                                       sdpa::find_kernel("blas")};
  auto add = [](const sdpa::Kernel* k, const Heads& h, std::int64_t n_q, std::int64_t cache,
                int threads, std::int64_t window = 0) {
    const std::string name = "decode/" + k->name + "/" + h.model + "/hq:" + std::to_string(h.q) +
                             "/hkv:" + std::to_string(h.kv) + "/d:" + std::to_string(h.d) +
                             "/nq:" + std::to_string(n_q) + "/cache:" + std::to_string(cache) +
                             (window > 0 ? "/window:" + std::to_string(window) : "") +
                             "/threads:" + std::to_string(threads);
    benchmark::RegisterBenchmark(name.c_str(), bench_decode, k, h, n_q, cache, threads, window)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  };
  for (int threads : {1, 2})
    for (const Heads& h : kModels)
      for (std::int64_t cache : {1024, 4096, 16384, 32768})
        for (const sdpa::Kernel* k : peers)
          if (k) add(k, h, 1, cache, threads);
  // Several new tokens per head (speculative decoding), and what grouping buys: the same 32
  // query heads with 8 K/V heads (groups of 4) and with 32 (no groups).
  for (int threads : {1, 2})
    for (const Heads& h : {kModels[1], kModels[4]})
      for (std::int64_t n_q : {2, 4, 8, 16}) add(peers[0], h, n_q, 16384, threads);
  // The 4-query step on fp16 K/V against its floor (the 1-query step of the same shape; the
  // grouped shape's 1-query fp16 cell is in the loop below).
  if (const sdpa::Kernel* f16 = sdpa::find_kernel("flash-kv-f16"))
    for (int threads : {1, 2}) {
      add(f16, kModels[1], 4, 16384, threads);
      for (std::int64_t n_q : {1, 4}) add(f16, kModels[4], n_q, 16384, threads);
    }
  // K and V stored in 16 bits and in int8 (issue 16's cache formats), against flash above.
  for (int threads : {1, 2})
    for (const Heads& h : {kModels[0], kModels[1]})
      for (const char* name : {"flash-kv-f16", "flash-kv-bf16", "flash-kv-int8"})
        if (const sdpa::Kernel* k = sdpa::find_kernel(name)) add(k, h, 1, 16384, threads);
  // Every instruction-set entry of the decode path and its K/V formats (flash-kv-int8@avx2 ...),
  // each against its own roof, so a host also shows how its narrower paths fare.
  for (int threads : {1, 2})
    for (const Heads& h : {kModels[0], kModels[1]})
      for (const char* family : {"flash", "flash-kv-f16", "flash-kv-bf16", "flash-kv-int8"})
        for (const sdpa::Kernel& k : sdpa::kernel_registry())
          if (k.family == family && k.name.find('@') != std::string::npos)
            add(&k, h, 1, 16384, threads);
  // A sliding window of 128 keys (gpt-oss's) on a long cache: the splits read the window only,
  // beside the whole cache of the same shape above.
  for (int threads : {1, 2})
    for (const char* name : {"flash", "flash-kv-f16", "flash-kv-int8"})
      if (const sdpa::Kernel* k = sdpa::find_kernel(name))
        for (std::int64_t n_q : {1, 4}) add(k, kModels[1], n_q, 32768, threads, 128);
}

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (int threads : {1, 2}) {
    const auto gbs = sdpa::peak::measure_triad(sdpa::peak::supported_isas().back(), threads,
                                               kTriadFootprint, 20, 0.05);
    g_triad[threads] = *std::max_element(gbs.begin(), gbs.end());
    benchmark::AddCustomContext("triad_gbs_t" + std::to_string(threads),
                                std::to_string(g_triad[threads]));
    benchmark::RegisterBenchmark(("triad/threads:" + std::to_string(threads)).c_str(), bench_triad,
                                 threads)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
  register_decode();
  for (const auto& t : sdpa::simd_targets())
    for (int threads : {1, 2})
      benchmark::RegisterBenchmark(
          ("peak/" + t.isa + "/threads:" + std::to_string(threads)).c_str(), bench_peak, &t,
          threads)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
  // The peak of every roofline ISA a kernel reads (each Highway target's, and the bf16 and int8
  // dot-product roofs of the entries whose products are those).
  std::vector<std::string> roofs;
  for (const auto& t : sdpa::simd_targets()) roofs.push_back(t.isa);
  for (const auto& k : sdpa::kernel_registry())
    if (!k.roof_isa().empty() && std::ranges::find(roofs, k.roof_isa()) == roofs.end())
      roofs.push_back(k.roof_isa());
  for (const auto& isa : roofs) {
    // Each peak is the best of a few short samples, and a sample the host slowed down (a vCPU
    // taken away for its 0.3 s) reads low: a two-thread peak near one thread's doubles every
    // two-thread %peak. Both are measured again, after a pause, until the two-thread peak is
    // 1.8 to 2.2 times one thread's, three times at most; two threads on one core (SMT) stay
    // outside, and are said so.
    double t1 = measure_roof(isa, 1), t2 = measure_roof(isa, 2);
    const auto plausible = [&] { return 1.8 * t1 <= t2 && t2 <= 2.2 * t1; };
    for (int again = 0; again < 3 && !plausible(); ++again) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      t1 = std::max(t1, measure_roof(isa, 1));
      t2 = std::max(t2, measure_roof(isa, 2));
    }
    if (!plausible())
      std::fprintf(stderr,
                   "warning: the %s peak on two threads is %.2fx one thread's (two threads on "
                   "one core, or a noisy host); each %%peak divides by its own\n",
                   isa.c_str(), t2 / t1);
    g_peak[{isa, 1}] = t1;
    g_peak[{isa, 2}] = t2;
    for (int threads : {1, 2})
      benchmark::AddCustomContext("peak_gflops_" + isa + "_t" + std::to_string(threads),
                                  std::to_string(g_peak[{isa, threads}]));
  }
  // The wide targets' peaks against the scalar loop's (8 and 16 lanes against one): an ordering
  // of speeds, so reported by this benchmark rather than asserted by a test; a machine where it
  // does not hold is said so on stderr.
  for (const char* wide : {"avx2", "avx512"})
    if (g_peak.contains({wide, 1}) && g_peak.contains({"scalar", 1})) {
      const double ratio = g_peak[{wide, 1}] / g_peak[{"scalar", 1}];
      benchmark::AddCustomContext(std::string("peak_") + wide + "_over_scalar_t1",
                                  std::to_string(ratio));
      if (ratio <= 1)
        std::fprintf(stderr, "warning: the %s FMA peak is not above the scalar loop's (%.2fx)\n",
                     wide, ratio);
    }
  for (const auto& k : sdpa::kernel_registry())
    for (std::int64_t n : {512, 1024, 4096})
      for (std::int64_t d : {64, 128}) {
        if (n >= 4096 && (k.family == "reference" || k.family == "naive")) continue;  // minutes
        for (int threads : {1, 2}) {
          if (threads > 1 && !multi_threaded(k)) continue;
          const auto name = [&](const std::string& pass, const std::string& suffix) {
            return pass + "/" + k.name + "/N:" + std::to_string(n) + "/d:" + std::to_string(d) +
                   "/threads:" + std::to_string(threads) + suffix;
          };
          for (bool probes : {false, true}) {
            if (probes && k.family != "flash") continue;  // probe cost: shown on flash
            benchmark::RegisterBenchmark(name("fwd", probes ? "/probes" : "").c_str(),
                                         bench_forward, &k, n, d, threads, probes, sdpa::Mask{},
                                         0.0f)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
          }
          if (!k.backward) continue;
          for (bool causal : {false, true}) {
            // Causal masking's uneven work split: shown on flash at hardware.json's shape.
            if (causal && (k.family != "flash" || n != 1024 || d != 64)) continue;
            benchmark::RegisterBenchmark(name("bwd", causal ? "/causal" : "").c_str(),
                                         bench_backward, &k, n, d, threads, causal)
                ->Unit(benchmark::kMillisecond)
                ->UseRealTime();
          }
        }
      }
  // Masks and modifiers on flash's prefill (issue 39's targets): Gemma 2's soft-cap of 50 against
  // fwd/flash/N:4096/d:128, and Mistral-7B's causal window of 4 096 at N = 16 384, whose rate
  // counts its visible pairs, against the dense rate at N = 4 096.
  if (const sdpa::Kernel* flash = sdpa::find_kernel("flash"))
    for (int threads : {1, 2}) {
      const std::string tail = "/d:128/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(("fwd/flash/N:4096" + tail + "/softcap:50").c_str(),
                                   bench_forward, flash, 4096, 128, threads, false, sdpa::Mask{},
                                   50.0f)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("fwd/flash/N:16384" + tail + "/window:4096").c_str(),
                                   bench_forward, flash, 16384, 128, threads, false,
                                   sdpa::Mask{.causal = true, .window_left = 4095}, 0.0f)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
