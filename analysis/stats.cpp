#include "sdpa/stats.hpp"

#include <algorithm>
#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>

namespace sdpa::stats {

double mean(std::span<const double> x) {
  if (x.empty()) return 0;
  double s = 0;
  for (double v : x) s += v;
  return s / double(x.size());
}

double variance(std::span<const double> x) {
  if (x.size() < 2) return 0;
  const double m = mean(x);
  double s = 0;
  for (double v : x) s += (v - m) * (v - m);
  return s / double(x.size() - 1);
}

double stddev(std::span<const double> x) { return std::sqrt(variance(x)); }

Interval mean_ci(std::span<const double> x, double level) {
  const double m = mean(x);
  if (x.size() < 2) return {m, m};
  boost::math::students_t t(double(x.size() - 1));
  const double half =
      boost::math::quantile(t, 0.5 + level / 2) * stddev(x) / std::sqrt(double(x.size()));
  return {m - half, m + half};
}

GeometricMean geometric_mean(std::span<const double> log_ratios, double level) {
  const Interval ci = mean_ci(log_ratios, level);
  return {std::exp(mean(log_ratios)), {std::exp(ci.low), std::exp(ci.high)}};
}

Interval stddev_ci(std::span<const double> x, double level) {
  const double sd = stddev(x);
  if (x.size() < 2) return {sd, sd};
  const double dof = double(x.size() - 1);
  boost::math::chi_squared chi(dof);
  const double alpha = 1 - level;
  return {sd * std::sqrt(dof / boost::math::quantile(chi, 1 - alpha / 2)),
          sd * std::sqrt(dof / boost::math::quantile(chi, alpha / 2))};
}

namespace {

// The score interval for a mean x / n of n values in [0, 1] (x need not be an integer).
Interval wilson(double x, double n, double level) {
  const double z = boost::math::quantile(boost::math::normal(), 0.5 + level / 2);
  const double z2 = z * z;
  const double center = (x + z2 / 2) / (n + z2);
  const double half = z / (n + z2) * std::sqrt(std::max(0.0, x * (n - x) / n) + z2 / 4);
  // Rounding can put an end a few ulps outside [0, 1], or inside the estimate x / n, when x is
  // 0 or n; a reader refuses a value outside its own interval.
  const double p = x / n;
  return {std::min(p, std::max(0.0, center - half)), std::max(p, std::min(1.0, center + half))};
}

}  // namespace

Interval wilson_interval(std::int64_t successes, std::int64_t trials, double level) {
  if (trials <= 0) return {0, 1};
  return wilson(double(successes), double(trials), level);
}

Interval wilson_interval_of_mean(double mean, std::int64_t n, double level) {
  if (n <= 0 || !(mean >= 0 && mean <= 1)) return {0, 1};
  return wilson(mean * double(n), double(n), level);
}

double quantile(std::vector<double> x, double p) {
  if (x.empty()) return 0;
  std::sort(x.begin(), x.end());
  const double h = p * double(x.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, x.size() - 1);
  return x[lo] + (h - double(lo)) * (x[hi] - x[lo]);
}

double fraction_at_most(std::span<const double> x, double threshold) {
  if (x.empty()) return 0;
  return double(std::count_if(x.begin(), x.end(), [&](double v) { return v <= threshold; })) /
         double(x.size());
}

}  // namespace sdpa::stats
