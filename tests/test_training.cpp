// The training experiment: the whole model's gradient against finite differences, learning on
// an easy instance, determinism, and refused configs.
#include <doctest/doctest.h>

#include <cmath>

#include "experiment_runner.hpp"
#include "sdpa/stats.hpp"
#include "training_model.hpp"

using sdpa::json;
using sdpa::testing::run_cell;
namespace training = sdpa::training;

namespace {

// Fourth-order central difference of the loss along one parameter entry.
double difference_quotient(const training::Parameters& p, int tensor, Eigen::Index i, double h,
                           const training::Batch& batch, const training::ModelShape& s,
                           const training::AttentionCore& core) {
  const auto loss = [&](double step) {
    auto moved = p;
    moved.tensor[tensor].data()[i] += step;
    return training::evaluate(moved, batch, s, core).loss;
  };
  return (8 * (loss(h) - loss(-h)) - (loss(2 * h) - loss(-2 * h))) / (12 * h);
}

// A few sequences of a few pairs: small enough for every entry to be checked.
#ifdef SDPA_SANITIZE
constexpr std::int64_t kSequences = 2;
#else
constexpr std::int64_t kSequences = 4;
#endif

}  // namespace

// The reference kernel computes in double but takes and returns fp32, so the loss is known to
// about 3e-8 (a few roundings of O(1) activations by 2^-24). A difference quotient with h = 1e-2
// turns that into ~3e-6 of noise, and the fourth-order stencil keeps its truncation error at
// O(h^4) ~ 1e-8; measured, the largest gap is 1.4e-5 of the tensor's largest entry. The
// tolerance, 1e-4 of that entry, leaves a margin of 7; a wrong factor or a missing term makes
// errors of the order of the gradient itself (dropping the 1/sqrt(2) of one embedding's
// gradient fails 24 entries).
TEST_CASE("the analytic gradient of every parameter matches central differences") {
  for (const bool learned : {true, false}) {
    const training::ModelShape s{.d_model = 6,
                                 .d_k = 3,
                                 .heads = 2,
                                 .vocab = 5,
                                 .n_pairs = 3,
                                 .learned_embeddings = learned};
    sdpa::PhiloxStream rng({.seed = 1});
    const auto p = training::initial_parameters(rng, s, "glorot");
    const auto batch = training::sample_batch(rng, s, kSequences);
    // c = 1 with Glorot weights gives logits of variance 3: softmax neither flat nor one-hot.
    const training::AttentionCore core{sdpa::find_kernel("reference"), 1.0f};
    const auto gradient = training::evaluate(p, batch, s, core).gradient;
    for (int t = training::first_trained(s); t < training::kTensors; ++t) {
      const auto& g = gradient.tensor[t];
      REQUIRE(g.rows() == p.tensor[t].rows());
      REQUIRE(g.cols() == p.tensor[t].cols());
      const double tolerance = 1e-4 * g.cwiseAbs().maxCoeff();
      CHECK(tolerance > 1e-8);  // the tensor receives a gradient at all
      for (Eigen::Index i = 0; i < g.size(); ++i) {
        CAPTURE(learned);
        CAPTURE(t);
        CAPTURE(i);
        CHECK(std::abs(difference_quotient(p, t, i, 1e-2, batch, s, core) - g.data()[i]) <=
              tolerance);
      }
    }
  }
}

namespace {

// Four seeds at least: with fewer, Student's t makes the intervals the checks compare too wide.
#ifdef SDPA_SANITIZE
const std::string kHeldOut = R"("eval_size": 32)";
#else
const std::string kHeldOut = R"("eval_size": 64)";
#endif
const std::string kEasy =
    R"("d_k": 8, "d_model": 16, "vocab": 4, "n_pairs": 2, "steps": 120, "log_every": 20, )"
    R"("seeds": 4, "batch": 16, )" +
    kHeldOut;

double low(const json& statistic) { return statistic["ci95"][0]; }
double high(const json& statistic) { return statistic["ci95"][1]; }

}  // namespace

TEST_CASE("loss falls and the target is reached on an easy instance, with Adam and with SGD") {
  const std::string fields = kEasy + R"(, "scale": "sqrt_dk", "optimizer": ["adam", "sgd"],)" +
                             R"( "learning_rate": [0.01, 0.03])";
  // Adam at 0.01 and SGD at 0.03: cells 0 and 3 of optimizer x learning_rate.
  for (const std::int64_t cell : {0, 3}) {
    const json r = run_cell("training", fields, 2, cell);
    CAPTURE(cell);
    const json& loss = r["curves"]["loss"];
    const double initial_high = loss["ci95"][0][1], final_high = high(r["final_loss"]);
    CHECK(final_high < loss["ci95"][0][0].get<double>());  // the intervals do not overlap
    CHECK(final_high < 0.5 * initial_high);
    // The stored interval is the Wilson interval the table prints, inside [0, 1].
    const json& accuracy = r["final_accuracy"];
    CHECK(accuracy["value"].get<double>() >= 0.9);
    const auto wilson = sdpa::stats::wilson_interval_of_mean(accuracy["value"].get<double>(),
                                                             r["steps_to_target"]["seeds"]);
    CHECK(low(accuracy) == wilson.low);
    CHECK(high(accuracy) == wilson.high);
    CHECK(0 <= low(accuracy));
    CHECK(high(accuracy) <= 1);
    CHECK(r["steps_to_target"]["reached"] == r["steps_to_target"]["seeds"]);
    CHECK(r["nonfinite_steps"]["total"] == 0);
    // Logged at 0, 20, ..., 120; each curve has a value per logged step.
    CHECK(r["curves"]["step"] == json::array({0, 20, 40, 60, 80, 100, 120}));
    CHECK(r["curves"]["grad_norm_w_q"]["mean"].size() == 7);
  }
}

TEST_CASE("same config and seed: bit-identical records on 1 and 2 threads and across runs") {
  const std::string fields = kEasy + R"(, "scale": "none", "heads": 2, "embeddings": "fixed")";
  const std::string one = run_cell("training", fields, 1).dump();
  CHECK(run_cell("training", fields, 2).dump() == one);
  CHECK(run_cell("training", fields, 1).dump() == one);
}

TEST_CASE("configs/training.json is a valid config") {
  CHECK(sdpa::make_plan(sdpa::load_config("configs/training.json")).size() == 2);
}

TEST_CASE("a training config the model cannot run is refused, naming the JSON path") {
  const auto error_of = [](const std::string& fields) {
    try {
      sdpa::testing::cell_count("training", fields);
    } catch (const sdpa::InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(error_of(R"("kernel": ["naive", "naive-unstable"], "d_k": 4)")
            .rfind("test.json: /experiments/0/kernel/1: kernel \"naive-unstable\" has no "
                   "backward; kernels with one: \"reference\", \"naive\"",
                   0) == 0);
  CHECK(error_of(R"("d_k": 4, "vocab": 8, "n_pairs": [4, 9])") ==
        "test.json: /experiments/0/n_pairs/1: expected at most vocab (8: the keys of a sequence "
        "are distinct tokens), found 9");
  CHECK(error_of(R"("d_k": 4, "steps": 10, "log_every": 20)") ==
        "test.json: /experiments/0/log_every: expected at most steps (10), found 20");
  CHECK(error_of(R"("d_k": 4, "optimizer": "adamw")") ==
        "test.json: /experiments/0/optimizer: expected an optimiser (\"adam\" or \"sgd\", with "
        "momentum) or a non-empty list of them, found string \"adamw\"");
}
