// Distribution-free statistics of timings against values worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "sdpa/nonparametric.hpp"

using doctest::Approx;
using sdpa::stats::UMethod;

TEST_CASE("Mann-Whitney U with ties: exact permutation p counted by hand") {
  // a = {1, 2, 2}, b = {2, 3, 4}. Pooled and sorted: 1a 2a 2a 2b 3b 4b; the three 2s share the
  // mid-rank (2 + 3 + 4) / 3 = 3, so the ranks are 1, 3, 3, 3, 5, 6. R_a = 1 + 3 + 3 = 7 and
  // U_a = R_a - 3 * 4 / 2 = 1 (pairs a > b: none; the two a = 2 tie with b = 2: 1/2 each).
  // Exact: the 20 ways to give 3 of the ranks {1, 3, 3, 3, 5, 6} to a have sums
  //   {1,3,3} x3 = 7, {1,3,5} x3 = 9, {1,3,6} x3 = 10, {1,5,6} = 12,
  //   {3,3,3} = 9, {3,3,5} x3 = 11, {3,3,6} x3 = 12, {3,5,6} x3 = 14,
  // i.e. U = sum - 6. |U - 4.5| >= |1 - 4.5| = 3.5 means U <= 1 or U >= 8: sums 7 (3 ways) and
  // 14 (3 ways), so p = 6 / 20 = 0.3.
  const std::vector<double> a = {1, 2, 2}, b = {2, 3, 4};
  const auto exact = sdpa::stats::mann_whitney(a, b);
  CHECK(exact.u == 1);
  CHECK(exact.exact);
  CHECK(exact.p == Approx(0.3));
  // Swapping the samples mirrors U (U_a + U_b = n_a n_b) and keeps the two-sided p.
  const auto swapped = sdpa::stats::mann_whitney(b, a);
  CHECK(swapped.u == 8);
  CHECK(swapped.p == Approx(0.3));

  // Normal approximation of the same samples: one tie group of t = 3, so
  //   Var(U) = n_a n_b / 12 [(N + 1) - sum(t^3 - t) / (N (N - 1))] = 9/12 (7 - 24/30) = 4.65,
  //   z = (|1 - 4.5| - 0.5) / sqrt(4.65) = 3 / 2.156386 = 1.391217,
  //   p = 2 (1 - Phi(1.391217)) = 0.164160.
  const auto normal = sdpa::stats::mann_whitney(a, b, UMethod::normal);
  CHECK(normal.u == 1);
  CHECK_FALSE(normal.exact);
  CHECK(normal.p == Approx(0.164160).epsilon(1e-5));
}

TEST_CASE("Mann-Whitney U: complete separation and identical samples") {
  // Five against five, fully separated: U = 0 and only 2 of the C(10, 5) = 252 splits are as
  // extreme (U = 0 or U = 25): p = 2 / 252.
  const std::vector<double> fast = {1, 2, 3, 4, 5}, slow = {6, 7, 8, 9, 10};
  const auto r = sdpa::stats::mann_whitney(fast, slow);
  CHECK(r.u == 0);
  CHECK(r.p == Approx(2.0 / 252));
  // All values tied: every split gives the same U, so p = 1 either way.
  const std::vector<double> same = {3, 3, 3, 3, 3};
  CHECK(sdpa::stats::mann_whitney(same, same).p == Approx(1));
  CHECK(sdpa::stats::mann_whitney(same, same, UMethod::normal).p == 1);
  // Larger samples go to the normal approximation automatically.
  std::vector<double> big_a, big_b;
  for (int i = 0; i < 12; ++i) big_a.push_back(i), big_b.push_back(i + 0.5);
  CHECK_FALSE(sdpa::stats::mann_whitney(big_a, big_b).exact);
}

TEST_CASE("median interval from order statistics") {
  // n = 10: P(B <= 1) = 11/1024, so j = 2 covers 1 - 22/1024 = 0.978516 >= 0.95, while j = 3
  // covers only 1 - 2 * 56/1024 = 0.890625: the interval is [x_(2), x_(9)].
  const std::vector<double> x = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  const auto m = sdpa::stats::median_ci(x);
  CHECK(m.ci.low == 2);
  CHECK(m.ci.high == 9);
  CHECK(m.coverage == Approx(1 - 22.0 / 1024));
  CHECK(sdpa::stats::median(x) == 5.5);
  // n = 5 cannot reach 95 %: [min, max] with coverage 1 - 2/32.
  const auto small = sdpa::stats::median_ci({3, 1, 2, 5, 4});
  CHECK(small.ci.low == 1);
  CHECK(small.ci.high == 5);
  CHECK(small.coverage == Approx(0.9375));
}

TEST_CASE("bootstrap interval of a ratio of medians") {
  // Constant samples: every resample has the same medians, so the interval is the point 2.
  const std::vector<double> two = {2, 2, 2, 2, 2}, one = {1, 1, 1, 1, 1};
  const auto point = sdpa::stats::median_ratio_ci(two, one);
  CHECK(point.low == 2);
  CHECK(point.high == 2);
  // Fixed seed: the same interval every time.
  const std::vector<double> a = {1.0, 1.2, 0.9, 1.1, 1.05, 0.95},
                            b = {2.0, 2.2, 1.9, 2.1, 2.3, 1.8};
  const auto first = sdpa::stats::median_ratio_ci(a, b), again = sdpa::stats::median_ratio_ci(a, b);
  CHECK(first.low == again.low);
  CHECK(first.high == again.high);
  CHECK(first.contains(sdpa::stats::median(a) / sdpa::stats::median(b)));

  // Known answer: a ~ 2 * LogNormal(0, 0.1) and b ~ LogNormal(0, 0.1) have medians 2 and 1,
  // so the true ratio is 2. Over 200 synthetic pairs of 20 values each, the 95 % interval must
  // cover it about 95 % of the time; 200 draws put the count within [178, 198] unless the
  // method is off (binomial 99.9 % range around 190 is about 180-197).
  std::mt19937_64 rng(12345);
  std::lognormal_distribution<double> noise(0.0, 0.1);
  int covered = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> x(20), y(20);
    for (auto& v : x) v = 2 * noise(rng);
    for (auto& v : y) v = noise(rng);
    covered += sdpa::stats::median_ratio_ci(x, y, 0.95, 1000).contains(2.0);
  }
  CHECK(covered >= 178);
  CHECK(covered <= 198);
}

TEST_CASE("noisy: coefficient of variation above 5 %") {
  CHECK_FALSE(sdpa::stats::noisy(std::vector<double>{1.00, 1.01, 0.99, 1.00, 1.02}));
  CHECK(sdpa::stats::noisy(std::vector<double>{1.0, 1.0, 1.0, 1.0, 1.3}));
  // sd of {0.95, 1.05} is 0.0707 around a mean of 1: above 5 %.
  CHECK(sdpa::stats::coefficient_of_variation(std::vector<double>{0.95, 1.05}) ==
        Approx(0.0707107));
  CHECK_FALSE(sdpa::stats::noisy(std::vector<double>{7.0}));  // one value: no spread known
}
