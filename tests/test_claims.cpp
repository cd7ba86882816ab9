// The claims report: a verdict for every claim, computed from the records it cites.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <optional>

#include "cli_runner.hpp"
#include "sdpa/claims.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/report.hpp"

using sdpa::json;
using sdpa::claims::Verdict;

namespace {

// A shipped config with every experiment shrunk by `shrink`, run once: same names, same claims.
json run_shrunk(const std::string& config_path, const std::function<void(json&)>& shrink) {
  sdpa::testing::TempDir dir;
  json config = json::parse(sdpa::testing::slurp(config_path));
  for (auto& e : config["experiments"]) shrink(e);
  dir.write("config.json", config.dump());
  const auto r = sdpa::testing::run_cli(
      "run " + (dir / "config.json").string() + " -o " + (dir / "r.json").string(), dir);
  REQUIRE(r.exit_code == 0);
  return sdpa::report::read_result_file((dir / "r.json").string());
}

// configs/seeds.json with a few trials per experiment.
const json& small_seeds_result() {
  static const json result = run_shrunk("configs/seeds.json", [](json& e) {
    e["trials"] = e["name"] == "claim3-2x2" ? 4000 : 3;
    if (e["kind"] != "variance") e["n_q"] = 2;
  });
  return result;
}

// configs/training.json with short runs of a narrow model and two d_k per experiment (the
// claim's verdicts are checked on records set below, so the runs need only be well formed).
const json& small_training_result() {
  static const json result = run_shrunk("configs/training.json", [](json& e) {
    e["d_k"] = {4, 16}, e["d_model"] = 16;
    e["scale"] = {"none", "sqrt_dk"};
    e["steps"] = 60, e["log_every"] = 20, e["seeds"] = 3, e["eval_size"] = 32;
  });
  return result;
}

// configs/stability.json at one small d_k, three rates and tiny runs: seconds.
const json& small_stability_result() {
  static const json result = run_shrunk("configs/stability.json", [](json& e) {
    e["d_k"] = 8, e["d_model"] = 8, e["d_ff"] = 16;
    e["learning_rates"] = {0.001, 0.03, 3};
    e["steps"] = 30, e["log_every"] = 10, e["warmup_steps"] = 5, e["seeds"] = 3;
    e["eval_size"] = 32, e["batch"] = 16;
  });
  return result;
}

std::vector<sdpa::claims::Claim> stability_claims(const json& stability) {
  std::vector<sdpa::claims::Claim> out;
  for (auto& c :
       sdpa::claims::evaluate({{&small_seeds_result(), "r.json"}, {&stability, "s.json"}}))
    if (c.number >= 11) out.push_back(c);
  return out;
}

Verdict verdict_of(const json& result, int number) {
  for (const auto& c : sdpa::claims::evaluate(result, "r.json"))
    if (c.number == number) return c.verdict;
  FAIL("no claim " << number);
  return Verdict::does_not_hold;
}

std::optional<sdpa::claims::Claim> claim_10(const json& training) {
  for (auto& c : sdpa::claims::evaluate({{&small_seeds_result(), "r.json"}, {&training, "t.json"}}))
    if (c.number == 10) return c;
  return std::nullopt;
}

// Makes a training record's statistic a point with a tight interval.
void set_stat(json& stat, double value) {
  stat["value"] = value;
  stat["ci95"] = {value - 0.01, value + 0.01};
}

json& record(json& result, const std::string& experiment, std::size_t index) {
  for (auto& e : result["experiments"])
    if (e["name"] == experiment) return e["records"][index];
  throw std::runtime_error("no experiment " + experiment);
}

}  // namespace

TEST_CASE("every claim gets a verdict, a reason, evidence and a source") {
  const auto claims = sdpa::claims::evaluate(small_seeds_result(), "r.json");
  REQUIRE(claims.size() == 9);
  for (std::size_t i = 0; i < claims.size(); ++i) {
    CAPTURE(i);
    CHECK(claims[i].number == int(i) + 1);
    CHECK_FALSE(claims[i].reason.empty());
    CHECK_FALSE(claims[i].rows.empty());
    CHECK_FALSE(claims[i].source.empty());
  }
  const std::string md = sdpa::claims::markdown(claims, {"r.json"});
  CHECK(md.find("## Claim 9") != std::string::npos);
}

TEST_CASE("verdicts follow the records: change a record and the verdict changes") {
  json result = small_seeds_result();
  REQUIRE(verdict_of(result, 1) == Verdict::holds);
  // Claim 1: a variance far from d_k (d_k = 8 is cell 6: d_k varies slower than scale).
  json& v = record(result, "claim1-2-variance", 6)["score_variance"];
  REQUIRE(v["predicted"].get<double>() == doctest::Approx(8).epsilon(0.01));
  v["value"] = 16.0;
  v["ci95"] = {15.9, 16.1};
  CHECK(verdict_of(result, 1) == Verdict::does_not_hold);

  // Claim 5: make both initialisations give unit variance and the claim holds.
  result = small_seeds_result();
  REQUIRE(verdict_of(result, 5) == Verdict::does_not_hold);
  for (std::size_t i : {0, 1}) {
    json& s = record(result, "claim5-projections", i)["score_variance"];
    s["value"] = 1.0;
    s["ci95"] = {0.95, 1.05};
  }
  CHECK(verdict_of(result, 5) == Verdict::holds);

  // Claim 3: if np.var of a 2 x 2 product averaged 2, the "should be 2" claim would hold.
  result = small_seeds_result();
  REQUIRE(verdict_of(result, 3) == Verdict::does_not_hold);
  json& sv = record(result, "claim3-2x2", 0)["sample_variance"];
  sv["value"] = 2.0;
  sv["ci95"] = {1.98, 2.02};
  CHECK(verdict_of(result, 3) == Verdict::holds);

  // Claim 8: participation that stays high means gradients do not vanish.
  result = small_seeds_result();
  for (auto& e : result["experiments"])
    if (e["name"] == "claim8-gradients")
      for (auto& r : e["records"]) r["participation"]["value"] = 0.9;
  CHECK(verdict_of(result, 8) == Verdict::does_not_hold);
}

TEST_CASE("a result file without the seeds experiments is refused, naming what is missing") {
  json result = small_seeds_result();
  result["experiments"].erase(0);
  CHECK_THROWS_WITH_AS(sdpa::claims::evaluate(result, "r.json"),
                       "r.json: no experiment named \"claim1-2-variance\"; the claims report "
                       "reads a result file of configs/seeds.json",
                       sdpa::InputError);
}

TEST_CASE("a claim whose experiment has no records is refused, not held") {
  json result = small_seeds_result();
  result["experiments"][0]["records"] = json::array();
  CHECK_THROWS_WITH_AS(sdpa::claims::evaluate(result, "r.json"),
                       "r.json: experiment \"claim1-2-variance\": expected records for its "
                       "claims, found none (no data)",
                       sdpa::InputError);
}

TEST_CASE("claim 10 (training) comes from a training result; its verdict follows the records") {
  CHECK(sdpa::claims::markdown(sdpa::claims::evaluate(small_seeds_result(), "r.json"), {"r.json"})
            .find("Claim 10 (does unscaled attention train slower or less stably?) needs a "
                  "result file with a `training` experiment") != std::string::npos);
  const auto measured = claim_10(small_training_result());
  REQUIRE(measured.has_value());
  CHECK(measured->rows.size() == 4);  // two experiments, two d_k each
  CHECK(measured->source.find("`recall-adam` of t.json") != std::string::npos);

  // Unscaled identical to scaled everywhere: no difference, the claim does not hold.
  json t = small_training_result();
  for (auto& e : t["experiments"])
    for (auto& r : e["records"]) {
      set_stat(r["final_loss"], 0.5);
      set_stat(r["steps_to_target"]["censored_mean"], 30);
      set_stat(r["nonfinite_steps"]["seed_fraction"], 0);
    }
  const auto none = claim_10(t);
  CHECK(none->verdict == Verdict::does_not_hold);
  CHECK(none->reason.find("slower") == std::string::npos);
  // A diverged run stores its non-finite loss as null: reported, not an error.
  json diverged = t;
  diverged["experiments"][0]["records"][0]["final_loss"] = {{"value", nullptr},
                                                            {"ci95", {nullptr, nullptr}}};
  const auto with_null = claim_10(diverged);
  REQUIRE(with_null.has_value());
  CHECK(with_null->rows[0][4] == "non-finite");
  // Unscaled slower at the largest d_k of both experiments: it holds.
  auto slow_unscaled_at_16 = [](json& e) {
    for (auto& r : e["records"])
      if (r["params"]["scale"] == "none" && r["params"]["d_k"] == 16)
        set_stat(r["steps_to_target"]["censored_mean"], 60);
  };
  for (auto& e : t["experiments"]) slow_unscaled_at_16(e);
  const auto both = claim_10(t);
  CHECK(both->verdict == Verdict::holds);
  CHECK(both->reason.find("recall-adam from d_k = 16 on") != std::string::npos);
  CHECK(both->reason.find("slower, not less stable") != std::string::npos);
  // In one experiment only: qualified.
  t["experiments"][1] = small_training_result()["experiments"][1];
  for (auto& r : t["experiments"][1]["records"]) {
    set_stat(r["final_loss"], 0.5);
    set_stat(r["steps_to_target"]["censored_mean"], 30);
  }
  CHECK(claim_10(t)->verdict == Verdict::holds_with_qualification);
}

TEST_CASE("claims 11-13 (stability) come from a stability result; verdicts follow the records") {
  CHECK(sdpa::claims::markdown(sdpa::claims::evaluate(small_seeds_result(), "r.json"), {"r.json"})
            .find("Claims 11-13 (learning-rate range, logit growth, QK-norm) need a result file "
                  "with a `stability` experiment") != std::string::npos);
  const auto measured = stability_claims(small_stability_result());
  REQUIRE(measured.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(measured[i].number == int(i) + 11);
    CHECK_FALSE(measured[i].reason.empty());
    CHECK_FALSE(measured[i].rows.empty());
    CHECK(measured[i].source.find("`lr-sweep` of s.json") != std::string::npos);
  }
  CHECK(measured[1].rows.size() == 5);  // one per scheme

  // Records: none, sqrt_dk, dk, log_n, qk_norm, in the config's order.
  const auto with = [](const std::function<void(json & records)>& edit) {
    json s = small_stability_result();
    edit(s["experiments"][0]["records"]);
    return stability_claims(s);
  };
  const auto set_trained = [](json& record, std::vector<int> counts) {
    for (std::size_t i = 0; i < counts.size(); ++i)
      record["learning_rates"][i]["trained"]["count"] = counts[i];
  };
  // Claim 11: unscaled trains at one rate, 1/sqrt(d_k) at two: narrower.
  auto c = with([&](json& r) { set_trained(r[0], {3, 0, 0}), set_trained(r[1], {3, 3, 0}); });
  CHECK(c[0].verdict == Verdict::holds);
  c = with([&](json& r) { set_trained(r[0], {3, 3, 0}), set_trained(r[1], {3, 3, 0}); });
  CHECK(c[0].verdict == Verdict::does_not_hold);

  // Claim 13: per-seed sensitivities of 1/sqrt(d_k) above QK-norm's by 0.3 +- 0.1: holds; equal:
  // does not.
  const auto set_sensitivity = [](json& record, const std::vector<double>& per_seed) {
    record["sensitivity"]["per_seed"] = per_seed;
  };
  c = with([&](json& r) {
    set_sensitivity(r[1], {0.5, 0.7, 0.6}), set_sensitivity(r[4], {0.2, 0.3, 0.4});
  });
  CHECK(c[2].verdict == Verdict::holds);
  c = with([&](json& r) {
    set_sensitivity(r[1], {0.5, 0.7, 0.6}), set_sensitivity(r[4], {0.5, 0.7, 0.6});
  });
  CHECK(c[2].verdict == Verdict::does_not_hold);

  // Claim 12: unscaled logits that never grow (flat at 1, entropy at ln N) make it fail.
  c = with([](json& r) {
    for (auto& rate : r[0]["learning_rates"])
      for (auto& layer : rate["curves"]["layers"]) {
        for (auto& x : layer["max_logit"]) x = 1.0;
        for (auto& h : layer["entropy"]) h = std::log(9.0);
      }
  });
  CHECK(c[1].verdict == Verdict::does_not_hold);
}

TEST_CASE("claim 14 (precision) comes from a precision result; its verdict follows the records") {
  // Without a precision result there is no claim 14 (and results/claims.md stays as committed).
  for (const auto& c : sdpa::claims::evaluate(small_seeds_result(), "r.json")) CHECK(c.number < 14);
  // configs/precision.json at three d_k, N = 64, few rows and seeds: well under a second.
  static const json precision = run_shrunk("configs/precision.json", [](json& e) {
    e["d_k"] = {4, 64, 256}, e["n_kv"] = 64, e["n_q"] = 4, e["trials"] = 4;
  });
  const auto claim = [](const json& p) -> std::optional<sdpa::claims::Claim> {
    for (auto& c : sdpa::claims::evaluate({{&small_seeds_result(), "r.json"}, {&p, "p.json"}}))
      if (c.number == 14) return c;
    return std::nullopt;
  };
  const auto measured = claim(precision);
  REQUIRE(measured);
  CHECK(measured->rows.size() == 3);  // flash-bf16 only: fp32 is not half precision
  CHECK(measured->source.find("`claim14-precision` of p.json") != std::string::npos);

  // Records: kernel (flash, flash-bf16) x d_k (4, 64, 256) x scale (none, sqrt_dk).
  const auto with = [&](const std::function<void(json & records)>& edit) {
    json p = precision;
    edit(p["experiments"][0]["records"]);
    return *claim(p);
  };
  const auto set_error = [](json& record, double value) {
    json& stat = record["error"]["total"]["o_rms"];
    stat["value"] = value;
    stat["ci95"] = {0.9 * value, 1.1 * value};
  };
  // Unscaled 3x the scaled error at d_k 64 and 256, equal at 4: loses from 64 on.
  auto c = with([&](json& r) {
    for (int d = 0; d < 3; ++d) set_error(r[6 + 2 * d], d == 0 ? 0.004 : 0.012);
    for (int d = 0; d < 3; ++d) set_error(r[7 + 2 * d], 0.004);
  });
  CHECK(c.verdict == Verdict::holds);
  CHECK(c.reason.find("loses from d_k = 64 on, while 1/sqrt(d_k) keeps the O error within "
                      "0.0044 (1.126 u)") != std::string::npos);
  // Equal everywhere: it never loses.
  c = with([&](json& r) {
    for (int i = 6; i < 12; ++i) set_error(r[i], 0.004);
  });
  CHECK(c.verdict == Verdict::does_not_hold);
  // Non-finite rows unscaled at the largest d_k count as a loss from there on.
  c = with([&](json& r) {
    for (int i = 6; i < 12; ++i) set_error(r[i], 0.004);
    r[10]["nonfinite_rows"] = 0.5;
  });
  CHECK(c.verdict == Verdict::holds);
  CHECK(c.reason.find("loses from d_k = 256 on") != std::string::npos);
}
