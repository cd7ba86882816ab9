// The roofline's loops timed on threads (sdpa/peak.hpp): measure_multiply_add and
// measure_triad.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <utility>

#include "sdpa/aligned.hpp"
#include "sdpa/peak.hpp"

namespace sdpa::peak {
namespace {

// Wall time of body(thread, threads) run once by each of `threads` OpenMP threads: from before
// the team starts to after its last member ends.
template <typename Body>
double timed_parallel(int threads, Body&& body) {
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
  body(omp_get_thread_num(), omp_get_num_threads());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::vector<double> measure_multiply_add(std::string_view isa, int threads, int repetitions,
                                         double min_time) {
  // A fixed point of acc = 0.9999 acc + 1e-4 is 1, so values stay normal.
  constexpr float kA = 0.9999f, kB = 1e-4f;
  std::vector<float> sink(std::size_t(std::max(1, threads)));
  std::int64_t steps = 4096;
  double t = 0;
  while ((t = timed_parallel(
              1, [&](int, int) { sink[0] = multiply_add_chains(isa, steps, kA, kB); })) < 1e-3)
    steps *= 2;
  steps = std::max<std::int64_t>(1, std::llround(double(steps) * min_time / t));
  std::vector<double> gflops;
  for (int r = 0; r < repetitions; ++r) {
    const double seconds = timed_parallel(threads, [&](int i, int) {
      sink[std::size_t(i)] = multiply_add_chains(isa, steps, kA, kB);
    });
    gflops.push_back(double(threads) * multiply_add_flops(isa, steps) / seconds / 1e9);
  }
  return gflops;
}

std::vector<double> measure_triad(std::string_view isa, int threads, double footprint_bytes,
                                  int repetitions, double min_time) {
  const auto n =
      std::max<std::int64_t>(1 << 20, std::llround(footprint_bytes / (3 * sizeof(float))));
  // Uninitialised: each thread's first touch below places its slice's pages.
  const AlignedFloats x_mem = aligned_floats(n), y_mem = aligned_floats(n),
                      z_mem = aligned_floats(n);
  float *x = x_mem.get(), *y = y_mem.get(), *z = z_mem.get();
  // Slices start on a cache line, as the arrays do.
  constexpr std::int64_t kLine = kCacheLine / sizeof(float);
  auto slice = [n](int i, int team) {
    const auto edge = [&](int j) { return j == team ? n : n * j / team / kLine * kLine; };
    return std::pair<std::int64_t, std::int64_t>{edge(i), edge(i + 1)};
  };
  timed_parallel(threads, [&](int i, int team) {
    const auto [lo, hi] = slice(i, team);
    std::fill(x + lo, x + hi, 0.0f);
    std::fill(y + lo, y + hi, 1.0f);
    std::fill(z + lo, z + hi, 2.0f);
  });
  auto passes_of = [&](std::int64_t passes) {
    return timed_parallel(threads, [&](int i, int team) {
      const auto [lo, hi] = slice(i, team);
      for (std::int64_t p = 0; p < passes; ++p) triad(isa, x + lo, y + lo, z + lo, 0.5f, hi - lo);
    });
  };
  const double one_pass = passes_of(1);  // also the warm-up
  const auto passes = std::max<std::int64_t>(1, std::llround(std::ceil(min_time / one_pass)));
  std::vector<double> gbs;
  gbs.reserve(std::size_t(std::max(0, repetitions)));
  for (int r = 0; r < repetitions; ++r)
    gbs.push_back(triad_bytes(n) * double(passes) / passes_of(passes) / 1e9);
  return gbs;
}

}  // namespace sdpa::peak
