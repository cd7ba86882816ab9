// Statistics helpers against values computed by hand or by known distributions.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sdpa/sensitivity.hpp"
#include "sdpa/stats.hpp"
#include "sdpa/theory.hpp"

using doctest::Approx;

TEST_CASE("mean, variance and quantiles match NumPy's definitions") {
  const std::vector<double> x = {4, 1, 3, 2};
  CHECK(sdpa::stats::mean(x) == 2.5);
  CHECK(sdpa::stats::variance(x) == Approx(5.0 / 3.0));  // ddof 1
  CHECK(sdpa::stats::quantile(x, 0.5) == 2.5);           // np.quantile default
  CHECK(sdpa::stats::quantile(x, 0.05) == Approx(1.15));
  CHECK(sdpa::stats::fraction_at_most(x, 2) == 0.5);
}

TEST_CASE("mean CI uses Student t") {
  const std::vector<double> x = {1, 2, 3};
  // t_{0.975, 2} = 4.302653; sd = 1; half-width = 4.302653 / sqrt(3).
  const auto ci = sdpa::stats::mean_ci(x);
  CHECK(ci.low == Approx(2 - 4.302653 / std::sqrt(3.0)).epsilon(1e-6));
  CHECK(ci.high == Approx(2 + 4.302653 / std::sqrt(3.0)).epsilon(1e-6));
}

TEST_CASE("geometric mean of ratios: exp of the mean log and of its t interval's ends") {
  const std::vector<double> logs = {std::log(2.0), std::log(0.5), std::log(4.0)};
  const auto g = sdpa::stats::geometric_mean(logs);
  CHECK(g.value == doctest::Approx(std::cbrt(4.0)));  // (2 x 0.5 x 4)^(1/3)
  const auto t = sdpa::stats::mean_ci(logs);
  CHECK(g.ci.low == doctest::Approx(std::exp(t.low)));
  CHECK(g.ci.high == doctest::Approx(std::exp(t.high)));
  CHECK(g.ci.low * g.ci.high == doctest::Approx(g.value * g.value));  // symmetric in the logs
  const std::vector<double> one = {std::log(3.0)};
  CHECK(sdpa::stats::geometric_mean(one).ci.low == doctest::Approx(3.0));
  CHECK(sdpa::stats::geometric_mean(one).ci.high == doctest::Approx(3.0));
}

TEST_CASE("stddev CI uses chi-squared") {
  const std::vector<double> x = {1, 2, 3, 4, 5};
  // chi2_{0.975, 4} = 11.143287, chi2_{0.025, 4} = 0.484419; sd = sqrt(2.5).
  const auto ci = sdpa::stats::stddev_ci(x);
  CHECK(ci.low == Approx(std::sqrt(2.5 * 4 / 11.143287)).epsilon(1e-6));
  CHECK(ci.high == Approx(std::sqrt(2.5 * 4 / 0.484419)).epsilon(1e-6));
}

TEST_CASE("theory: closed forms") {
  sdpa::theory::ScoreModel m;
  m.d_k = 2, m.n_q = 2, m.n_k = 2;
  CHECK(sdpa::theory::score_variance(m) == 2);
  CHECK(sdpa::theory::expected_sample_variance(m) == 1.5);  // the 2 x 2 puzzle
  m.d_k = 64, m.scale = 0.125;
  CHECK(sdpa::theory::score_variance(m) == Approx(1.0));
  CHECK(sdpa::theory::aligned_mean(64, 1, 0.5) == 32);
  CHECK(sdpa::theory::aligned_variance(64, 1, 0.5) == 80);
  CHECK(sdpa::theory::projected_variance("glorot", 512, 64) == Approx(512.0 * 2 / 576));
  CHECK(sdpa::theory::projected_variance("pytorch", 512, 64) == Approx(1.0 / 3));
}

TEST_CASE("Wilson interval: hand-computed ends, inside [0, 1] where the Wald interval is not") {
  // (x + z^2/2) / (n + z^2) -+ z / (n + z^2) sqrt(x (n - x) / n + z^2 / 4), z = 1.959964.
  auto ci = sdpa::stats::wilson_interval(8, 10);
  CHECK(ci.low == Approx(0.4901625).epsilon(1e-6));
  CHECK(ci.high == Approx(0.9433178).epsilon(1e-6));
  ci = sdpa::stats::wilson_interval(0, 10);
  CHECK(ci.low == 0);
  CHECK(ci.high == Approx(0.2775328).epsilon(1e-6));
  ci = sdpa::stats::wilson_interval(10, 10);
  CHECK(ci.low == Approx(0.7224672).epsilon(1e-6));
  CHECK(ci.high == 1);
  // 254 of 256 correct: Wald reads 0.9922 +- 0.0107, past 1; Wilson stays below it.
  ci = sdpa::stats::wilson_interval(254, 256);
  CHECK(ci.low == Approx(0.9719672).epsilon(1e-6));
  CHECK(ci.high == Approx(0.9978549).epsilon(1e-6));
  ci = sdpa::stats::wilson_interval(0, 0);
  CHECK((ci.low == 0 && ci.high == 1));
}

TEST_CASE("Wilson interval of a mean in [0, 1]: the proportion's at whole counts, inside [0, 1]") {
  // A mean of 0/1 values is a proportion: the same interval.
  auto a = sdpa::stats::wilson_interval_of_mean(0.8, 10), b = sdpa::stats::wilson_interval(8, 10);
  CHECK(a.low == Approx(b.low));
  CHECK(a.high == Approx(b.high));
  // The training table's mean accuracy 0.994 across 8 seeds: Student's t read [0.985, 1.003].
  a = sdpa::stats::wilson_interval_of_mean(0.994, 8);
  CHECK(a.low > 0);
  CHECK(a.high <= 1);
  CHECK(a.low < 0.994);
  CHECK(a.high > 0.994);
  // Between whole counts it lies between its neighbours' intervals.
  const auto lo = sdpa::stats::wilson_interval(7, 10), hi = sdpa::stats::wilson_interval(8, 10);
  a = sdpa::stats::wilson_interval_of_mean(0.75, 10);
  CHECK((lo.low < a.low && a.low < hi.low && lo.high < a.high && a.high < hi.high));
  // Nothing known: [0, 1].
  a = sdpa::stats::wilson_interval_of_mean(std::numeric_limits<double>::quiet_NaN(), 4);
  CHECK((a.low == 0 && a.high == 1));
  a = sdpa::stats::wilson_interval_of_mean(0.5, 0);
  CHECK((a.low == 0 && a.high == 1));
}

TEST_CASE("learning-rate sensitivity as Wortsman et al. define it, on hand-computed sweeps") {
  using sdpa::stats::lr_sensitivity;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // l0 = 2: the capped losses 1.5, 0.5, 0.2, 1.0, 2.0 average 1.04; the best is 0.2.
  CHECK(lr_sensitivity(std::vector<double>{1.5, 0.5, 0.2, 1.0, 3.0}, 2.0) == Approx(0.84));
  // A run that blew up counts as l0 (1) and is not the best: (0.4 + 1 + 0.1) / 3 - 0.1.
  CHECK(lr_sensitivity(std::vector<double>{0.4, nan, 0.1}, 1.0) == Approx(0.4));
  // The same loss at every rate: no sensitivity.
  CHECK(lr_sensitivity(std::vector<double>{0.3, 0.3, 0.3}, 1.0) == 0);
  // Every rate ends above l0: the paper's formula goes negative (2 - 3).
  CHECK(lr_sensitivity(std::vector<double>{3, 4}, 2.0) == -1);
  CHECK(std::isnan(lr_sensitivity(std::vector<double>{nan, nan}, 2.0)));
  CHECK(std::isnan(lr_sensitivity(std::vector<double>{}, 2.0)));
}

TEST_CASE("learning-rate sensitivity across seeds: mean, Student-t interval cut at 0") {
  // Two rates far below l0 = 5: the sensitivity is half their gap, 0.2, 0.4 and 0.6.
  const std::vector<std::vector<double>> losses = {{0.1, 0.5}, {0.1, 0.9}, {1.4, 0.2}};
  const std::vector<double> l0 = {5, 5, 5};
  const auto s = sdpa::stats::lr_sensitivity_across_seeds(losses, l0);
  REQUIRE(s.per_seed.size() == 3);
  CHECK(s.per_seed[0] == Approx(0.2));
  CHECK(s.per_seed[2] == Approx(0.6));
  CHECK(s.mean == Approx(0.4));
  // sd 0.2, t_{0.975, 2} = 4.302653: 0.4 -+ 0.496830, whose lower end -0.0968 is cut to 0.
  CHECK(s.ci.low == 0);
  CHECK(s.ci.high == Approx(0.4 + 4.302653 * 0.2 / std::sqrt(3.0)).epsilon(1e-6));
  // A seed whose sweep never trained may be negative: then nothing is cut.
  const auto never =
      sdpa::stats::lr_sensitivity_across_seeds({{0.1, 0.5}, {6, 7}}, std::vector<double>{5, 5});
  CHECK(never.per_seed[1] == -1);
  CHECK(never.ci.low < 0);
  CHECK_THROWS(sdpa::stats::lr_sensitivity_across_seeds(losses, std::vector<double>{5}));
}
