// Distribution-free statistics for timings, whose distributions are skewed and heavy-tailed:
// the median with an order-statistic interval, the Mann-Whitney U test, and a bootstrap
// interval of a ratio of medians.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sdpa/stats.hpp"

namespace sdpa::stats {

double median(std::vector<double> x);

// Confidence interval of the median from order statistics: [x_(j), x_(n+1-j)] with the largest
// j whose coverage 1 - 2 P(B < j), B ~ Binomial(n, 1/2), is still >= level. Exact for any
// continuous distribution (no assumption of shape). Below n = 6 no pair of order statistics
// reaches 95 %; the interval is then [min, max] and `coverage` says what it does reach
// (1 - 2^(1-n)).
struct MedianInterval {
  Interval ci;
  double coverage = 0;
};
MedianInterval median_ci(std::vector<double> x, double level = 0.95);

// Mann-Whitney U test of "a and b come from the same distribution" against a shift either way.
// U counts the pairs (a_i, b_j) with a_i > b_j, ties counting one half (so U is computed from
// mid-ranks). Exact: the permutation distribution of U given the tie pattern, counted over all
// C(n_a + n_b, n_a) splits of the pooled mid-ranks. Normal: z with the tie-corrected variance
// n_a n_b / 12 [(N + 1) - sum(t^3 - t) / (N (N - 1))] and a continuity correction of 1/2.
// Automatic uses the exact distribution when both samples have at most 10 values.
enum class UMethod { automatic, exact, normal };
struct MannWhitney {
  double u = 0;        // U of a
  double p = 1;        // two-sided
  bool exact = false;  // which method gave p
};
MannWhitney mann_whitney(std::span<const double> a, std::span<const double> b,
                         UMethod method = UMethod::automatic);

// Percentile bootstrap interval of median(a) / median(b): each sample resampled with
// replacement on its own, `resamples` times, from a fixed seed, so the interval is the same
// on every run and machine. Approximate: with few values the median's bootstrap distribution
// is lumpy, and the interval can be somewhat too narrow below about 10 values per side.
Interval median_ratio_ci(std::span<const double> a, std::span<const double> b, double level = 0.95,
                         int resamples = 4000, std::uint64_t seed = 0x5dba5eedULL);

// Timings whose repetitions spread more than this (coefficient of variation, stddev / mean)
// are flagged noisy: the machine was busy or changing speed while they ran.
inline constexpr double kNoisyCv = 0.05;
// stddev (ddof 1) / mean; 0 for fewer than two values.
double coefficient_of_variation(std::span<const double> x);
inline bool noisy(std::span<const double> x) { return coefficient_of_variation(x) > kNoisyCv; }

}  // namespace sdpa::stats
