// Statistics helpers against values computed by hand or by known distributions.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

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
