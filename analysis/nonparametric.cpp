#include "sdpa/nonparametric.hpp"

#include <algorithm>
#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/normal.hpp>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <cmath>
#include <limits>

namespace sdpa::stats {
namespace {

// Mid-ranks (1-based) of the pooled values a ++ b, and the tie sizes.
struct PooledRanks {
  std::vector<double> ranks;  // in pooled order: a's values first
  std::vector<double> ties;   // size of each group of equal values
};

PooledRanks mid_ranks(std::span<const double> a, std::span<const double> b) {
  std::vector<double> pooled(a.begin(), a.end());
  pooled.insert(pooled.end(), b.begin(), b.end());
  std::vector<std::size_t> order(pooled.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](auto i, auto j) { return pooled[i] < pooled[j]; });
  PooledRanks r{std::vector<double>(pooled.size()), {}};
  for (std::size_t lo = 0; lo < order.size();) {
    std::size_t hi = lo;
    while (hi + 1 < order.size() && pooled[order[hi + 1]] == pooled[order[lo]]) ++hi;
    const double rank = (double(lo + 1) + double(hi + 1)) / 2;
    for (std::size_t k = lo; k <= hi; ++k) r.ranks[order[k]] = rank;
    r.ties.push_back(double(hi - lo + 1));
    lo = hi + 1;
  }
  return r;
}

// P(|U - n_a n_b / 2| >= |u - n_a n_b / 2|) over all equally likely splits of the pooled
// mid-ranks into n_a and n_b values. Doubled mid-ranks are integers, so the rank sums are
// counted exactly: ways[k][s] = subsets of k values whose doubled ranks sum to s.
double exact_p(const PooledRanks& r, std::size_t n_a, std::size_t n_b, double u) {
  const std::size_t n = n_a + n_b;
  std::vector<long> doubled;
  long total = 0;
  for (double x : r.ranks) doubled.push_back(std::lround(2 * x)), total += doubled.back();
  std::vector<std::vector<double>> ways(n_a + 1, std::vector<double>(total + 1, 0.0));
  ways[0][0] = 1;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = std::min(i + 1, n_a); k >= 1; --k)
      for (long s = total; s >= doubled[i]; --s) ways[k][s] += ways[k - 1][s - doubled[i]];
  // 2U = doubled rank sum - n_a (n_a + 1); distance from the mean in the same units.
  const long offset = long(n_a * (n_a + 1)), centre = long(n_a * n_b);
  const long observed = std::labs(std::lround(2 * u) - centre);
  double extreme = 0, all = 0;
  for (long s = 0; s <= total; ++s) {
    all += ways[n_a][s];
    if (std::labs(s - offset - centre) >= observed) extreme += ways[n_a][s];
  }
  return extreme / all;
}

double normal_p(const PooledRanks& r, std::size_t n_a, std::size_t n_b, double u) {
  const double n = double(n_a + n_b), nab = double(n_a) * double(n_b);
  double tie_sum = 0;
  for (double t : r.ties) tie_sum += t * t * t - t;
  const double variance = nab / 12 * ((n + 1) - tie_sum / (n * (n - 1)));
  if (variance <= 0) return 1;  // every value tied: no evidence either way
  const double z = std::max(0.0, std::abs(u - nab / 2) - 0.5) / std::sqrt(variance);
  return std::min(1.0, 2 * boost::math::cdf(boost::math::complement(boost::math::normal(), z)));
}

}  // namespace

double median(std::vector<double> x) { return quantile(std::move(x), 0.5); }

double coefficient_of_variation(std::span<const double> x) {
  return x.size() < 2 ? 0 : stddev(x) / mean(x);
}

MedianInterval median_ci(std::vector<double> x, double level) {
  if (x.empty()) return {};
  std::sort(x.begin(), x.end());
  const std::size_t n = x.size();
  const boost::math::binomial_distribution<double> below(double(n), 0.5);
  // coverage(j) = P(j <= B <= n - j) = 1 - 2 P(B <= j - 1), falling as j grows.
  auto coverage = [&](std::size_t j) { return 1 - 2 * boost::math::cdf(below, double(j - 1)); };
  std::size_t j = 1;
  while (2 * (j + 1) <= n + 1 && coverage(j + 1) >= level) ++j;
  return {{x[j - 1], x[n - j]}, std::max(0.0, coverage(j))};
}

MannWhitney mann_whitney(std::span<const double> a, std::span<const double> b, UMethod method) {
  MannWhitney out;
  if (a.empty() || b.empty()) return out;
  const PooledRanks r = mid_ranks(a, b);
  double rank_sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) rank_sum += r.ranks[i];
  out.u = rank_sum - double(a.size()) * double(a.size() + 1) / 2;
  out.exact = method == UMethod::exact ||
              (method == UMethod::automatic && a.size() <= 10 && b.size() <= 10);
  out.p =
      out.exact ? exact_p(r, a.size(), b.size(), out.u) : normal_p(r, a.size(), b.size(), out.u);
  return out;
}

Interval median_ratio_ci(std::span<const double> a, std::span<const double> b, double level,
                         int resamples, std::uint64_t seed) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (a.empty() || b.empty() || resamples < 1) return {nan, nan};
  boost::random::mt19937_64 rng(seed);
  auto resampled_median = [&](std::span<const double> x) {
    boost::random::uniform_int_distribution<std::size_t> pick(0, x.size() - 1);
    std::vector<double> y(x.size());
    for (auto& v : y) v = x[pick(rng)];
    return median(std::move(y));
  };
  std::vector<double> ratios(resamples);
  for (auto& ratio : ratios) {
    const double numerator = resampled_median(a);
    ratio = numerator / resampled_median(b);
  }
  const double tail = (1 - level) / 2;
  return {quantile(ratios, tail), quantile(ratios, 1 - tail)};
}

}  // namespace sdpa::stats
