// The claims report: a verdict for every claim, computed from the records it cites.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <numeric>
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

// configs/modifiers.json shrunk the same way: the stability sweep at three rates, the entropy
// and gradient experiments at one small d_k.
const json& small_modifiers_result() {
  static const json result = run_shrunk("configs/modifiers.json", [](json& e) {
    if (e["kind"] != "stability") {
      e["d_k"] = 4, e["n_kv"] = 16, e["n_q"] = 2, e["trials"] = 2;
      return;
    }
    e["d_k"] = 8, e["d_model"] = 8, e["d_ff"] = 16;
    e["learning_rates"] = {0.001, 0.03, 3};
    e["steps"] = 30, e["log_every"] = 10, e["warmup_steps"] = 5, e["seeds"] = 3;
    e["eval_size"] = 32, e["batch"] = 16;
  });
  return result;
}

std::vector<sdpa::claims::Claim> modifier_claims(const json& modifiers) {
  std::vector<sdpa::claims::Claim> out;
  for (auto& c :
       sdpa::claims::evaluate({{&small_seeds_result(), "r.json"}, {&modifiers, "m.json"}}))
    if (c.number >= 15) out.push_back(c);
  return out;
}

std::vector<sdpa::claims::Claim> stability_claims(const json& stability) {
  std::vector<sdpa::claims::Claim> out;
  for (auto& c :
       sdpa::claims::evaluate({{&small_seeds_result(), "r.json"}, {&stability, "s.json"}}))
    if (c.number >= 11 && c.number <= 13) out.push_back(c);
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
  REQUIRE(claims.size() == 16);
  for (std::size_t i = 0; i < claims.size(); ++i) {
    CAPTURE(i);
    CHECK(claims[i].number == int(i) + 1);
    CHECK_FALSE(claims[i].reason.empty());
    // Claims 1-9 from the seeds result; 10-16 need other runs: not tested, with no evidence.
    CHECK(claims[i].rows.empty() == (i >= 9));
    CHECK(claims[i].source.empty() == (i >= 9));
    CHECK((claims[i].verdict == Verdict::not_tested) == (i >= 9));
  }
  const std::string md = sdpa::claims::markdown(claims, {"r.json"});
  CHECK(md.find("## Claim 9") != std::string::npos);
  CHECK(md.find(
            "| 10. Without scaling, training becomes slower or less stable. | **not tested** |") !=
        std::string::npos);
  // The header names only the runs whose claims were tested.
  CHECK(md.find("alone (claims 1-6, 8, 9 from a run of `configs/seeds.json`). ") !=
        std::string::npos);
}

TEST_CASE("the registry: every claim once, its inputs the shipped configs, in registry order") {
  const auto inputs = sdpa::claims::inputs();
  std::vector<std::string> configs;
  std::vector<int> numbers = {7};  // claim 7 is exact arithmetic: it reads no file
  for (const auto& i : inputs) {
    configs.push_back(i.config);
    CHECK(std::filesystem::exists(i.config));
    numbers.insert(numbers.end(), i.claims.begin(), i.claims.end());
  }
  CHECK(configs == std::vector<std::string>{"configs/seeds.json", "configs/training.json",
                                            "configs/stability.json", "configs/precision.json",
                                            "configs/modifiers.json"});
  std::sort(numbers.begin(), numbers.end());
  std::vector<int> all(16);
  std::iota(all.begin(), all.end(), 1);
  CHECK(numbers == all);
  CHECK(sdpa::claims::inputs_text() ==
        "configs/seeds.json (claims 1-6, 8, 9), configs/training.json (claim 10), "
        "configs/stability.json (claims 11-13), configs/precision.json (claim 14), "
        "configs/modifiers.json (claims 15, 16)");
  // What the Makefile and tests/test_results.cpp read: the same list, one config a line.
  sdpa::testing::TempDir dir;
  const auto listed = sdpa::testing::run_cli("claims --list-inputs", dir);
  CHECK(listed.exit_code == 0);
  CHECK(listed.out ==
        "configs/seeds.json\nconfigs/training.json\nconfigs/stability.json\n"
        "configs/precision.json\nconfigs/modifiers.json\n");
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

TEST_CASE("no verdict from nothing: a claim without comparable cells is not tested") {
  const auto claim = [](const json& result, int number) {
    return sdpa::claims::evaluate(result, "r.json").at(number - 1);
  };
  // The experiment of claims 1 and 2 missing, or without records (a shard that holds none).
  json result = small_seeds_result();
  result["experiments"].erase(0);
  for (int number : {1, 2}) {
    const auto c = claim(result, number);
    CHECK(c.verdict == Verdict::not_tested);
    CHECK(c.rows.empty());
  }
  CHECK(claim(result, 1).reason ==
        "no comparable cells (needs records of experiment `claim1-2-variance` with scale none, "
        "from a run of `configs/seeds.json`)");
  CHECK(claim(result, 3).verdict != Verdict::not_tested);
  result = small_seeds_result();
  result["experiments"][0]["records"] = json::array();
  CHECK(claim(result, 1).verdict == Verdict::not_tested);
  // Records of one scale only: nothing for claim 1 (scale none) to compare.
  result = small_seeds_result();
  for (auto& r : result["experiments"][0]["records"]) r["params"]["scale"] = "sqrt_dk";
  CHECK(claim(result, 1).verdict == Verdict::not_tested);
  CHECK(claim(result, 2).verdict != Verdict::not_tested);
  // Claim 8 with unscaled records only: no pair to compare.
  result = small_seeds_result();
  for (auto& e : result["experiments"])
    if (e["name"] == "claim8-gradients")
      for (auto& r : e["records"]) r["params"]["scale"] = "none";
  CHECK(claim(result, 8).verdict == Verdict::not_tested);
  const std::string md =
      sdpa::claims::markdown(sdpa::claims::evaluate(result, "r.json"), {"r.json"});
  CHECK(md.find("**Verdict: not tested**: no comparable cells (needs records of experiment "
                "`claim8-gradients` unscaled and scaled at the same d_k, from a run of "
                "`configs/seeds.json`).\n\n## Claim 9") != std::string::npos);
}

TEST_CASE("claims refuses a file given twice and names a file no claim reads") {
  const json& seeds = small_seeds_result();
  CHECK_THROWS_WITH_AS(sdpa::claims::evaluate({{&seeds, "a.json"}, {&seeds, "b.json"}}),
                       "b.json: the same result as a.json (a file given twice); give each result "
                       "file once",
                       sdpa::InputError);
  // A second seeds result is not read (claims 1-9 take the first file's); nor is a file of
  // experiments no claim knows.
  json other = seeds;
  other["seed"] = 8;
  json unrelated = seeds;
  for (auto& e : unrelated["experiments"]) e["name"] = "unrelated-" + e["name"].get<std::string>();
  CHECK_THROWS_WITH_AS(
      sdpa::claims::evaluate({{&seeds, "a.json"}, {&other, "b.json"}, {&unrelated, "u.json"}}),
      "b.json: no claim reads it (the claims read runs of configs/seeds.json (claims 1-6, 8, 9), "
      "configs/training.json (claim 10), configs/stability.json (claims 11-13), "
      "configs/precision.json (claim 14), configs/modifiers.json (claims 15, 16))\n"
      "u.json: no claim reads it (the claims read runs of configs/seeds.json (claims 1-6, 8, 9), "
      "configs/training.json (claim 10), configs/stability.json (claims 11-13), "
      "configs/precision.json (claim 14), configs/modifiers.json (claims 15, 16))",
      sdpa::InputError);
  // From the command line: exit 2, nothing written.
  sdpa::testing::TempDir dir;
  dir.write("a.json", sdpa::report::result_file_text(seeds));
  const std::string a = (dir / "a.json").string(), md = (dir / "claims.md").string();
  const auto twice = sdpa::testing::run_cli("claims " + a + " " + a + " -o " + md, dir);
  CHECK(twice.exit_code == 2);
  CHECK(twice.err == "error: " + a + ": the same result as " + a +
                         " (a file given twice); give each result file once\n");
  CHECK_FALSE(std::filesystem::exists(md));
}

TEST_CASE("a statistic a claim decides by that is null is refused with its file and JSON path") {
  json result = small_seeds_result();
  record(result, "claim1-2-variance", 6)["score_mean"]["value"] = nullptr;
  CHECK_THROWS_WITH_AS(sdpa::claims::evaluate(result, "r.json"),
                       "r.json: /experiments/0/records/6/score_mean/value: expected a number, "
                       "found null (claim 1 decides by it)",
                       sdpa::InputError);
  // As `claims` reads it: the result file is valid (null is how a non-finite value is stored).
  sdpa::testing::TempDir dir;
  dir.write("r.json", sdpa::report::result_file_text(result));
  const auto r = sdpa::testing::run_cli("claims " + (dir / "r.json").string(), dir);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: " + (dir / "r.json").string() +
                     ": /experiments/0/records/6/score_mean/value: expected a number, found null "
                     "(claim 1 decides by it)\n");
  // A string or a list there is refused where the file is read, at the same path.
  for (const json& bad : {json("0.5"), json::array({0.5})}) {
    record(result, "claim1-2-variance", 6)["score_mean"]["value"] = bad;
    dir.write("r.json", sdpa::report::result_file_text(result));
    const auto b = sdpa::testing::run_cli("claims " + (dir / "r.json").string(), dir);
    CAPTURE(b.err);
    CHECK(b.exit_code == 2);
    CHECK(b.err.starts_with("error: " + (dir / "r.json").string() +
                            ": /experiments/0/records/6/score_mean/value: expected "));
    CHECK(b.err.find(bad.is_string() ? "found string \"0.5\"" : "found list [0.5]") !=
          std::string::npos);
  }
}

TEST_CASE("claim 10 (training) comes from a training result; its verdict follows the records") {
  CHECK(sdpa::claims::evaluate(small_seeds_result(), "r.json")[9].reason ==
        "no comparable cells (needs a `training` experiment with scale none and sqrt_dk at the "
        "same d_k, from a run of `configs/training.json`)");
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

  // Issue 40: `report` printed a training loss of -1e+308 outside its own interval. A loss cannot
  // be negative: the file is refused when read, naming it and the JSON path, exit 2.
  json tampered = small_training_result();
  tampered["experiments"][0]["records"][1]["final_loss"]["value"] = -1e308;
  sdpa::testing::TempDir dir;
  dir.write("t.json", sdpa::report::result_file_text(tampered));
  const std::string file = (dir / "t.json").string();
  const auto r = sdpa::testing::run_cli("report " + file, dir);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("error: " + file +
                   ": /experiments/0/records/1/final_loss/value: expected a number >= 0 (null "
                   "where not finite), found number -1e+308") != std::string::npos);
  // The stored accuracy interval is the Wilson interval the table prints, inside [0, 1].
  for (const auto& e : small_training_result()["experiments"])
    for (const auto& rec : e["records"]) {
      const json& acc = rec["final_accuracy"];
      CHECK(acc["interval"] == "wilson");
      CHECK(acc["ci95"][0].get<double>() >= 0);
      CHECK(acc["ci95"][1].get<double>() <= 1);
    }
}

TEST_CASE("claims 11-13 (stability) come from a stability result; verdicts follow the records") {
  for (int number : {11, 12, 13})
    CHECK(sdpa::claims::evaluate(small_seeds_result(), "r.json")[number - 1].verdict ==
          Verdict::not_tested);
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

  // Schemes that have no comparable cells (issue 40: "does not hold" from zero cells): none of
  // none, sqrt_dk or qk_norm, only dk and log_n.
  c = with([](json& r) {
    for (auto& record : r)
      if (record["params"]["scale"] != "dk") record["params"]["scale"] = "log_n";
  });
  for (const auto& claim : c) {
    CAPTURE(claim.number);
    CHECK(claim.verdict == Verdict::not_tested);
    CHECK(claim.rows.empty());
    CHECK(claim.reason.rfind("no comparable cells (needs a `stability` experiment with scale ",
                             0) == 0);
  }
}

TEST_CASE("claims 15-16 (soft-cap, sink) come from a modifiers result; verdicts follow records") {
  // The modifiers' sweep is not the scale schemes' evidence: claims 11-13 stay untested by it.
  for (const auto& claim : sdpa::claims::evaluate(
           {{&small_seeds_result(), "r.json"}, {&small_modifiers_result(), "m.json"}}))
    if (claim.number >= 11 && claim.number <= 13) CHECK(claim.verdict == Verdict::not_tested);

  // Records of the sweep (axes softcap, sink, scale; the last fastest): r[0] no cap, no sink,
  // unscaled; r[2] no cap, learned sink; r[4] soft-cap 5, no sink. Every rate first made flat
  // (logit 1 throughout, entropy ln N, gradients unchanged), so that only the edits decide.
  const double ln_n = std::log(9.0);
  const auto with = [&](const std::function<void(json & records)>& edit) {
    json m = small_modifiers_result();
    for (auto& e : m["experiments"])
      if (e["kind"] == "stability") {
        for (auto& r : e["records"])
          for (auto& rate : r["learning_rates"])
            for (auto& layer : rate["curves"]["layers"]) {
              for (auto& x : layer["max_logit"]) x = 1.0;
              for (auto& h : layer["entropy"]) h = ln_n;
              for (const char* g : {"grad_norm_w_q", "grad_norm_w_k"})
                for (auto& x : layer[g]) x = 1.0;
            }
        edit(e["records"]);
      }
    return modifier_claims(m);
  };
  const auto saturate = [](json& rate) {  // logits 1 -> 20, entropy 0.01
    for (auto& layer : rate["curves"]["layers"]) {
      for (std::size_t i = 1; i < layer["max_logit"].size(); ++i) layer["max_logit"][i] = 20.0;
      for (std::size_t i = 1; i < layer["entropy"].size(); ++i) layer["entropy"][i] = 0.01;
    }
  };
  const auto set_outcome = [](json& rate, int trained, int diverged) {
    rate["trained"]["count"] = trained, rate["diverged"]["count"] = diverged;
  };

  // Nothing saturates: neither claim has a comparable cell.
  auto c = with([](json&) {});
  REQUIRE(c.size() == 2);
  for (const auto& claim : c) {
    CAPTURE(claim.number);
    CHECK(claim.verdict == Verdict::not_tested);
    CHECK(claim.reason.rfind("no comparable cells (needs a `stability` experiment with ", 0) == 0);
  }

  // Claim 15: unbounded logits saturate at rate 3; soft-capped they stay at 1 <= 5 and train
  // without divergence: holds. Capped but not training there: does not hold.
  c = with([&](json& r) {
    saturate(r[0]["learning_rates"][2]), set_outcome(r[4]["learning_rates"][2], 3, 0);
  });
  CHECK(c[0].verdict == Verdict::holds);
  CHECK(c[0].rows.size() == 1);
  CHECK(c[0].source.find("`softcap-sink-lr` of m.json") != std::string::npos);
  c = with([&](json& r) {
    saturate(r[0]["learning_rates"][2]), set_outcome(r[4]["learning_rates"][2], 0, 3);
  });
  CHECK(c[0].verdict == Verdict::does_not_hold);
  // A capped run whose logit passes its cap is not bounded, trained or not.
  c = with([&](json& r) {
    saturate(r[0]["learning_rates"][2]), saturate(r[4]["learning_rates"][2]);
    set_outcome(r[4]["learning_rates"][2], 3, 0);
  });
  CHECK(c[0].verdict == Verdict::does_not_hold);

  // Claim 16: with a learned sink the entropy falls at rate 0.03; its W_Q, W_K gradient ends at
  // half its initial norm: holds; at 1/100 of it: does not.
  const auto end_gradient = [](json& rate, double last) {
    for (auto& layer : rate["curves"]["layers"])
      for (const char* g : {"grad_norm_w_q", "grad_norm_w_k"}) layer[g].back() = last;
  };
  c = with([&](json& r) {
    saturate(r[2]["learning_rates"][1]), end_gradient(r[2]["learning_rates"][1], 0.5);
  });
  CHECK(c[1].verdict == Verdict::holds);
  CHECK(c[1].rows.size() == 1);
  c = with([&](json& r) {
    saturate(r[2]["learning_rates"][1]), end_gradient(r[2]["learning_rates"][1], 0.01);
  });
  CHECK(c[1].verdict == Verdict::does_not_hold);
}

TEST_CASE("claim 14 (precision) comes from a precision result; its verdict follows the records") {
  // Without a precision result claim 14 is not tested.
  CHECK(sdpa::claims::evaluate(small_seeds_result(), "r.json")[13].verdict == Verdict::not_tested);
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
  // Scaled records only: no group has a pair to compare, so no verdict (it was "does not hold").
  c = with([&](json& r) {
    for (auto& record : r) record["params"]["scale"] = "sqrt_dk";
  });
  CHECK(c.verdict == Verdict::not_tested);

  // Issue 40: a negative RMS error ("-1 [0, 0.006534]") is refused where the file is read,
  // naming the file and the JSON path: a statistic that cannot be negative, outside its interval.
  json negative = precision;
  json& o_rms = negative["experiments"][0]["records"][7]["error"]["total"]["o_rms"];
  o_rms["value"] = -1;
  o_rms["ci95"] = {0, 0.006534};
  CHECK_THROWS_WITH_AS(
      sdpa::report::parse_result_file("p.json", negative.dump()),
      doctest::Contains("p.json: /experiments/0/records/7/error/total/o_rms/value: "
                        "expected a number >= 0 (null where not finite), found "
                        "number -1"),
      sdpa::InputError);
  // Within [0, inf) but outside its own interval: refused too.
  o_rms["value"] = 0.5;
  CHECK_THROWS_WITH_AS(sdpa::report::parse_result_file("p.json", negative.dump()),
                       "p.json: /experiments/0/records/7/error/total/o_rms/value: expected a "
                       "value inside its own 95 % interval [0,0.006534], found 0.5",
                       sdpa::InputError);
}
