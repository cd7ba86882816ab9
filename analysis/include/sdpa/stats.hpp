// Statistics of Monte Carlo samples, with confidence intervals from Boost.Math.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sdpa::stats {

struct Interval {
  double low = 0, high = 0;
  bool contains(double x) const { return low <= x && x <= high; }
};

double mean(std::span<const double> x);
// Sample variance with ddof 1 (0 for fewer than two samples).
double variance(std::span<const double> x);
double stddev(std::span<const double> x);

// Two-sided confidence interval of the mean from Student's t with n-1 degrees of freedom.
// Assumes i.i.d. samples; by the central limit theorem it is accurate for non-normal samples
// once n is in the tens. Degenerate (a point) for n < 2.
Interval mean_ci(std::span<const double> x, double level = 0.95);

// The geometric mean of ratios given by their logs, and its interval: exp of the mean log and of
// mean_ci's ends, so the spread across the ratios, not each one's own noise (`compare`'s
// summary, the results index, the ggml summary). A point for one ratio.
struct GeometricMean {
  double value = 0;
  Interval ci;
};
GeometricMean geometric_mean(std::span<const double> log_ratios, double level = 0.95);

// Confidence interval of the standard deviation from the chi-squared distribution. Exact for
// normal samples; for other distributions it is only approximate (too narrow for heavy tails).
Interval stddev_ci(std::span<const double> x, double level = 0.95);

// Wilson score interval of a proportion: `successes` of `trials` independent Bernoulli trials.
// Unlike the normal (Wald) interval p +- z sqrt(p (1 - p) / n), it stays inside [0, 1] and keeps
// close to its nominal coverage near 0 and 1 and for small n (Brown, Cai & DasGupta 2001). With
// no trials it is [0, 1].
Interval wilson_interval(std::int64_t successes, std::int64_t trials, double level = 0.95);

// The same interval for the mean of n independent values in [0, 1] (a mean accuracy across
// seeds): among variables in [0, 1] with mean p the Bernoulli one has the largest variance,
// p (1 - p), so the score interval built on it covers the mean at least as well as it covers a
// proportion, and it stays inside [0, 1] where Student's t does not (a mean accuracy of 0.994
// read "[0.985, 1.003]"). [0, 1] for n = 0 or a mean outside [0, 1] (NaN included).
Interval wilson_interval_of_mean(double mean, std::int64_t n, double level = 0.95);

// Quantile with linear interpolation between order statistics (NumPy's default, "type 7").
double quantile(std::vector<double> x, double p);

// Fraction of samples <= threshold.
double fraction_at_most(std::span<const double> x, double threshold);

}  // namespace sdpa::stats
