// The reading side of the stability experiment on records built by hand: which rates train, how
// far logits grow, when softmax counts as saturated, and the paired sensitivity difference.
#include <doctest/doctest.h>

#include <cmath>

#include "sdpa/stability_analysis.hpp"

namespace sa = sdpa::stability_analysis;
using sdpa::json;

namespace {

json rate(double lr, int trained, int runs, json max_logit, json entropy) {
  json layer = {{"max_logit", max_logit}, {"entropy", entropy}};
  return {{"learning_rate", lr},
          {"trained", {{"count", trained}, {"runs", runs}}},
          {"curves", {{"layers", json::array({layer})}}}};
}

}  // namespace

TEST_CASE("a rate trains when more than half of its seeds reach the target") {
  CHECK(sa::rate_trains(rate(0.1, 3, 4, {}, {})));
  CHECK_FALSE(sa::rate_trains(rate(0.1, 2, 4, {}, {})));  // half is not more than half
  CHECK_FALSE(sa::rate_trains(rate(0.1, 0, 3, {}, {})));
  const json record = {
      {"learning_rates",
       {rate(0.01, 3, 3, {}, {}), rate(0.1, 1, 3, {}, {}), rate(1, 2, 3, {}, {})}}};
  CHECK(sa::trainable_rates(record) == std::vector<double>{0.01, 1});
}

TEST_CASE(
    "logit growth: initial and peak over blocks, lowest entropy after step 0, nulls skipped") {
  json r = rate(1, 0, 2, {2.0, 5.0, nullptr}, {2.0, 0.5, nullptr});
  // A second block: larger at initialisation, lower entropy at step 0 (ignored), peak 30.
  json second = {{"max_logit", {3.0, 30.0, 20.0}}, {"entropy", {0.01, 1.0, 0.9}}};
  r["curves"]["layers"].push_back(second);
  const auto g = sa::logit_growth(r);
  CHECK(g.initial == 3);
  CHECK(g.peak == 30);
  CHECK(g.factor() == 10);
  CHECK(g.lowest_entropy == 0.5);
  // Saturated below 0.1 ln N: ln 17 = 2.833, so 0.5 is not, 0.28 is.
  CHECK_FALSE(sa::saturates(g, 17));
  CHECK(sa::saturates({1, 10, 0.28}, 17));
  // A run that logged nothing finite after step 0: no peak beyond the initial value.
  const auto h = sa::logit_growth(rate(1, 0, 1, {4.0, nullptr}, {2.0, nullptr}));
  CHECK(h.peak == 4);
  CHECK(std::isnan(h.lowest_entropy));
  CHECK_FALSE(sa::saturates(h, 17));  // NaN never counts as saturated
}

TEST_CASE("paired sensitivity difference: per seed, Student-t interval; unequal seeds refused") {
  const json a = {{"sensitivity", {{"per_seed", {0.5, 0.7, 0.6}}}}};
  const json b = {{"sensitivity", {{"per_seed", {0.2, 0.3, 0.4}}}}};
  const auto d = sa::sensitivity_difference(a, b);
  REQUIRE(d.has_value());
  CHECK(d->mean == doctest::Approx(0.3));  // differences 0.3, 0.4, 0.2
  CHECK(d->seeds == 3);
  // sd 0.1, t(0.975, 2) = 4.302653: half-width 0.1 * 4.302653 / sqrt(3).
  CHECK(d->high - d->mean == doctest::Approx(0.1 * 4.302653 / std::sqrt(3.0)).epsilon(1e-6));
  CHECK(d->low > 0);
  const json c = {{"sensitivity", {{"per_seed", {0.2, 0.3}}}}};
  CHECK_FALSE(sa::sensitivity_difference(a, c).has_value());
}
