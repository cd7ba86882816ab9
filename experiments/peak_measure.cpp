#include "peak_measure.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "sdpa/peak.hpp"

namespace sdpa {
namespace {

using Clock = std::chrono::steady_clock;

// Wall time of body(thread, threads) run once by each of `threads` OpenMP threads: from before
// the team starts to after its last member ends.
template <typename Body>
double timed_parallel(int threads, Body&& body) {
  const auto start = Clock::now();
#pragma omp parallel num_threads(threads)
  body(omp_get_thread_num(), omp_get_num_threads());
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Multiply-add chains: a fixed point of acc = 0.9999 acc + 1e-4 is 1, so values stay normal.
std::vector<double> measure_fma(const std::string& isa, int threads, const PeakSettings& s) {
  constexpr float kA = 0.9999f, kB = 1e-4f;
  std::vector<float> sink(threads);
  std::int64_t steps = 4096;
  double t = 0;
  while ((t = timed_parallel(1, [&](int, int) {
            sink[0] = peak::multiply_add_chains(isa, steps, kA, kB);
          })) < 1e-3)
    steps *= 2;
  steps = std::max<std::int64_t>(1, std::llround(double(steps) * s.min_time / t));
  std::vector<double> gflops;
  for (int r = 0; r < s.repetitions; ++r) {
    const double seconds = timed_parallel(
        threads, [&](int i, int) { sink[i] = peak::multiply_add_chains(isa, steps, kA, kB); });
    gflops.push_back(double(threads) * peak::multiply_add_flops(isa, steps) / seconds / 1e9);
  }
  return gflops;
}

// STREAM triad over three arrays of `footprint` bytes together, each thread on its own slice,
// first touched by that thread so its pages sit on its memory node.
std::vector<double> measure_triad(const std::string& isa, int threads, double footprint,
                                  const PeakSettings& s) {
  const auto n = std::max<std::int64_t>(1 << 20, std::llround(footprint / (3 * sizeof(float))));
  std::unique_ptr<float[]> x(new float[n]), y(new float[n]), z(new float[n]);
  auto slice = [n](int i, int team) {
    return std::pair<std::int64_t, std::int64_t>{n * i / team, n * (i + 1) / team};
  };
  timed_parallel(threads, [&](int i, int team) {
    const auto [lo, hi] = slice(i, team);
    std::fill(x.get() + lo, x.get() + hi, 0.0f);
    std::fill(y.get() + lo, y.get() + hi, 1.0f);
    std::fill(z.get() + lo, z.get() + hi, 2.0f);
  });
  auto passes_of = [&](std::int64_t passes) {
    return timed_parallel(threads, [&](int i, int team) {
      const auto [lo, hi] = slice(i, team);
      for (std::int64_t p = 0; p < passes; ++p)
        peak::triad(isa, x.get() + lo, y.get() + lo, z.get() + lo, 0.5f, hi - lo);
    });
  };
  const double one_pass = passes_of(1);  // also the warm-up
  const auto passes = std::max<std::int64_t>(1, std::llround(std::ceil(s.min_time / one_pass)));
  std::vector<double> gbs;
  gbs.reserve(std::size_t(std::max(0, s.repetitions)));
  for (int r = 0; r < s.repetitions; ++r)
    gbs.push_back(peak::triad_bytes(n) * double(passes) / passes_of(passes) / 1e9);
  return gbs;
}

double parse_cache_size(const std::string& size) {
  // sysfs writes sizes as "48K", "1024K", "32768K" (occasionally "M").
  std::size_t end = 0;
  double v = 0;
  try {
    v = std::stod(size, &end);
  } catch (const std::exception&) {
    return 0;
  }
  const char unit = end < size.size() ? size[end] : ' ';
  return v * (unit == 'K' ? 1024.0 : unit == 'M' ? 1024.0 * 1024 : unit == 'G' ? 1 << 30 : 1.0);
}

}  // namespace

double PeakMeasurement::best_fma() const {
  return fma_gflops.empty() ? 0 : *std::max_element(fma_gflops.begin(), fma_gflops.end());
}

double PeakMeasurement::best_triad() const {
  return triad_gbs.empty() ? 0 : *std::max_element(triad_gbs.begin(), triad_gbs.end());
}

double last_level_cache_bytes() {
  double largest = 0;
  const json machine = machine_fingerprint();  // (a range-for over a temporary's member dangles)
  for (const auto& c : machine["caches"])
    largest = std::max(largest, parse_cache_size(c["size"].get<std::string>()));
  return largest > 0 ? largest : 32.0 * (1 << 20);
}

PeakMeasurement measure_peak(const std::string& isa, int threads, const PeakSettings& settings) {
  PeakMeasurement m;
  m.lanes = peak::lanes(isa);
  m.triad_footprint_bytes = settings.llc_multiple * last_level_cache_bytes();
  m.fma_gflops = measure_fma(isa, threads, settings);
  m.triad_gbs = measure_triad(isa, threads, m.triad_footprint_bytes, settings);
  return m;
}

std::string peak_isa_for(const std::string& kernel_isa) {
  if (peak::isa_supported(kernel_isa)) return kernel_isa;
  if (kernel_isa == "openblas") return peak::supported_isas().back();
  return "";
}

json peak_entry(const std::string& isa, int threads, const PeakMeasurement& m,
                const std::string& source) {
  return {{"isa", isa},
          {"threads", threads},
          {"fma_gflops", m.best_fma()},
          {"triad_gbs", m.best_triad()},
          {"source", source}};
}

const json* find_peak(const json& peaks, const std::string& isa, int threads) {
  for (const auto& p : peaks)
    if (p["isa"] == isa && p["threads"] == threads) return &p;
  return nullptr;
}

void store_peak(json& peaks, json entry) {
  for (auto& p : peaks)
    if (p["isa"] == entry["isa"] && p["threads"] == entry["threads"]) {
      p = std::move(entry);
      return;
    }
  peaks.push_back(std::move(entry));
}

}  // namespace sdpa
