// The gradient experiment against the softmax Jacobian identity and its bulk asymptote.
#include <doctest/doctest.h>

#include <cmath>

#include "experiment_runner.hpp"

using sdpa::json;
using sdpa::testing::run_cell;

TEST_CASE("the exact Jacobian identity matches E||J g||^2 read off the backward") {
  for (const std::string scale : {"\"sqrt_dk\"", "\"none\""}) {
    const auto r = run_cell(
        "gradient",
        std::string(
            R"("kernel": "naive", "d_k": 16, "n_kv": 256, "n_q": 16, "trials": 64, "scale": )") +
            scale,
        2);
    CAPTURE(scale);
    CHECK(r["jacobian_fro2_from_gradients"]["agrees"] == true);
    // The interval is not vacuous: the measured norm is pinned to within 20 %.
    const auto& ci = r["jacobian_fro2_from_gradients"]["ci95"];
    CHECK(ci[1].get<double>() - ci[0].get<double>() <
          0.2 * r["jacobian_fro2"]["value"].get<double>());
  }
}

TEST_CASE("bulk asymptote of ||J||_F^2 within 10 % for sigma^2 <= 1 and N >= 256") {
  for (const char* shape : {R"("n_kv": 256, "d_k": 256, "scale": "sqrt_dk")",
                            R"("n_kv": 1024, "d_k": 256, "scale": 0.03125)"}) {
    const auto r = run_cell(
        "gradient", std::string(R"("kernel": "naive", "n_q": 16, "trials": 32, )") + shape, 2);
    CAPTURE(shape);
    CHECK(r["regime"] == "bulk");
    const double predicted = r["jacobian_fro2"]["predicted"];
    CHECK(r["jacobian_fro2"]["value"].get<double>() == doctest::Approx(predicted).epsilon(0.10));
  }
}

TEST_CASE("unscaled: participation collapses as d_k grows; the Jacobian norm is not monotone") {
  double previous = 2;
  std::vector<double> norms;
  for (int d_k : {1, 4, 16, 64, 256, 1024}) {
    const auto r = run_cell(
        "gradient",
        R"("kernel": "naive", "n_kv": 256, "n_q": 16, "trials": 16, "scale": "none", "d_k": )" +
            std::to_string(d_k),
        2);
    CAPTURE(d_k);
    const double participation = r["participation"]["value"];
    CHECK(participation < previous);
    previous = participation;
    norms.push_back(r["jacobian_fro2"]["value"]);
  }
  CHECK(previous < 0.05);  // at d_k = 1024 fewer than 5 % of keys receive a gradient
  // It rises first (e^{s2}/N in the bulk) and falls once the weights condense.
  const auto peak = std::max_element(norms.begin(), norms.end()) - norms.begin();
  CHECK(peak > 0);
  CHECK(peak < static_cast<long>(norms.size()) - 1);
}

TEST_CASE("a kernel without a backward is refused for the gradient experiment") {
  try {
    sdpa::testing::cell_count("gradient", R"("kernel": "naive-unstable", "d_k": 4)");
    FAIL("accepted");
  } catch (const sdpa::InputError& e) {
    CHECK(std::string(e.what()).rfind("test.json: /experiments/0/kernel: kernel \"naive-unstable\" "
                                      "has no backward; kernels with one: \"reference\", \"naive\"",
                                      0) == 0);
  }
}

// A sink is an outcome without a value: the identity over the keys' weights (the sink's weight
// taken off the probes' sums) must still match the backward. Without that correction the
// identity overstates the norm whenever the sink holds weight (here about half of each row's).
TEST_CASE("with a sink, the Jacobian identity over the keys still matches the backward") {
  const auto r = run_cell(
      "gradient",
      R"("kernel": "reference", "d_k": 16, "n_kv": 256, "n_q": 16, "trials": 64, "scale": "sqrt_dk", "sink": 6)",
      2);
  CHECK(r["jacobian_fro2_from_gradients"]["agrees"] == true);
  CHECK(r["max_weight"]["value"].get<double>() > 0.3);  // the sink holds a large share
}

// Soft-capping unscaled logits bounds them, but the cap's 1 - tanh^2 takes the gradient of the
// keys it saturates: at d_k = 256 (sigma = 16) with c = 5 almost every logit sits on the cap.
TEST_CASE("soft-capped unscaled scores: the gradient at q.k shrinks as the cap saturates") {
  const std::string cell =
      R"("kernel": "reference", "d_k": 256, "n_kv": 256, "n_q": 16, "trials": 16, "scale": "none", "softcap": )";
  const auto loose = run_cell("gradient", cell + "1000", 2);
  const auto tight = run_cell("gradient", cell + "5", 2);
  CHECK_FALSE(tight["jacobian_fro2_from_gradients"].contains("agrees"));  // no identity with a cap
  CHECK(tight["score_gradient_norm"]["value"].get<double>() <
        0.1 * loose["score_gradient_norm"]["value"].get<double>());
}
