// Every kind of bad config gets one exact message: file, JSON path, expected, found.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "sdpa/experiments.hpp"

namespace {

std::string error_of(const std::string& text) {
  try {
    sdpa::parse_config("bad.json", text);
  } catch (const sdpa::InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

// A valid config with one experiment whose body is `fields` (after name and kind).
std::string with_experiment(const std::string& fields) {
  return R"({"name": "t", "seed": 1, "experiments": [{"name": "a", "kind": "variance", )" + fields +
         "}]}";
}

}  // namespace

TEST_CASE("a valid config is accepted and hashed") {
  const auto c =
      sdpa::parse_config("ok.json", with_experiment(R"("d_k": [1, 2], "scale": ["none", 0.5])"));
  CHECK(c.name == "t");
  CHECK(c.seed == 1);
  CHECK(c.sha256.size() == 64);
  const auto plan = sdpa::make_plan(c);
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].cells.size() == 4);
  // Defaults come from the schema; the last axis (scale) varies fastest.
  CHECK(plan[0].cells[1].params["scale"] == 0.5);
  CHECK(plan[0].cells[1].params["d_k"] == 1);
  CHECK(plan[0].cells[2].params["d_k"] == 2);
  CHECK(plan[0].cells[0].params["kernel"] == "reference");
}

TEST_CASE("every shipped config validates") {
  for (const auto& f : std::filesystem::directory_iterator("configs")) {
    if (f.path().filename() == "schema.json" || f.path().extension() != ".json") continue;
    CAPTURE(f.path().string());
    CHECK_NOTHROW(sdpa::load_config(f.path().string()));
  }
}

TEST_CASE("file errors") {
  CHECK_THROWS_WITH_AS(sdpa::load_config("no/such/config.json"),
                       "no/such/config.json: cannot open config: No such file or directory",
                       sdpa::InputError);
  CHECK_THROWS_WITH_AS(sdpa::load_config("configs"),
                       "configs: cannot read config: it is a directory, expected a file",
                       sdpa::InputError);
}

TEST_CASE("not JSON: line and column") {
  CHECK(error_of("{\"name\": \"x\",\n  \"seed\": 1,\n  \"experiments\": [ }\n") ==
        "bad.json:3:20: not valid JSON: syntax error while parsing value - unexpected '}'; "
        "expected '[', '{', or a literal");
  // A number beyond a double is an error of its own (a crash the fuzzer found: it escaped as
  // an exception that is not a parse error).
  CHECK(error_of(R"({"name": "t", "seed": -11e308})") ==
        "bad.json: not valid JSON: number overflow parsing '-11e308'");
  CHECK(error_of("") ==
        "bad.json:1:1: not valid JSON: syntax error while parsing value - unexpected end of "
        "input; expected '[', '{', or a literal");
}

TEST_CASE("wrong types") {
  CHECK(error_of(with_experiment(R"("d_k": [1, "a"])")) ==
        "bad.json: /experiments/0/d_k/1: expected a positive integer or a non-empty list of "
        "positive integers, found string \"a\"");
  CHECK(
      error_of(
          R"({"name": "t", "seed": "42", "experiments": [{"name": "a", "kind": "variance", "d_k": 1}]})") ==
      "bad.json: /seed: expected a non-negative integer (the key of every random stream), "
      "found string \"42\"");
}

TEST_CASE("seed not an integer") {
  CHECK(
      error_of(
          R"({"name": "t", "seed": 1.5, "experiments": [{"name": "a", "kind": "variance", "d_k": 1}]})") ==
      "bad.json: /seed: expected a non-negative integer (the key of every random stream), "
      "found number 1.5");
  CHECK(
      error_of(
          R"({"name": "t", "seed": -1, "experiments": [{"name": "a", "kind": "variance", "d_k": 1}]})") ==
      "bad.json: /seed: expected a non-negative integer (the key of every random stream), "
      "found number -1");
}

TEST_CASE("unknown keys suggest the closest valid key") {
  CHECK(
      error_of(
          R"({"name": "t", "sed": 1, "seed": 1, "experiments": [{"name": "a", "kind": "variance", "d_k": 1}]})") ==
      "bad.json: /sed: unknown key \"sed\" (did you mean \"seed\"?)");
  CHECK(error_of(with_experiment(R"("d_k": 1, "kernal": "naive")")) ==
        "bad.json: /experiments/0/kernal: unknown key \"kernal\" (did you mean \"kernel\"?)");
  CHECK(error_of(with_experiment(R"("d_k": 1, "zzzzzz": 1)")) ==
        "bad.json: /experiments/0/zzzzzz: unknown key \"zzzzzz\"");
}

TEST_CASE("unknown experiment kind: the nearest, or the valid ones when none is near") {
  std::string kinds;
  for (const auto& k : sdpa::experiment_kinds())
    kinds += (kinds.empty() ? "\"" : ", \"") + k.name + "\"";
  CHECK(
      error_of(R"({"name": "t", "seed": 1, "experiments": [{"name": "a", "kind": "varience"}]})") ==
      "bad.json: /experiments/0/kind: expected an experiment kind (see `sdpa-bench list`), found "
      "string \"varience\" (did you mean \"variance\"?)");
  CHECK(error_of(R"({"name": "t", "seed": 1, "experiments": [{"name": "a", "kind": "qqqqqq"}]})") ==
        "bad.json: /experiments/0/kind: expected an experiment kind (see `sdpa-bench list`), one "
        "of " +
            kinds + ", found string \"qqqqqq\"");
}

TEST_CASE("the schema knows exactly the registered experiment kinds") {
  const auto& schema = sdpa::config_schema()["definitions"];
  std::vector<std::string> in_schema, registered;
  for (const auto& k : schema["experiment"]["properties"]["kind"]["enum"]) in_schema.push_back(k);
  for (const auto& k : sdpa::experiment_kinds()) {
    registered.push_back(k.name);
    CAPTURE(k.name);
    CHECK(schema.contains(k.name));  // its parameter definition
    for (const auto& axis : k.axes) CHECK(schema[k.name]["properties"].contains(axis));
  }
  CHECK(in_schema == registered);
}

TEST_CASE("unknown kernel: the nearest name, not the list") {
  const std::string msg = error_of(with_experiment(R"("d_k": 1, "kernel": ["naive", "nave"])"));
  CHECK(msg ==
        "bad.json: /experiments/0/kernel/1: unknown kernel \"nave\" (did you mean "
        "\"naive\"?)");
  const std::string far = error_of(with_experiment(R"("d_k": 1, "kernel": "qqqqqqqq")"));
  CHECK(far ==
        "bad.json: /experiments/0/kernel: unknown kernel \"qqqqqqqq\"; `sdpa-bench list` "
        "names the kernels of this machine");
}

TEST_CASE("zero, negative and empty") {
  CHECK(error_of(with_experiment(R"("d_k": 1, "n_q": -3)")) ==
        "bad.json: /experiments/0/n_q: expected a positive integer or a non-empty list of "
        "positive integers, found number -3");
  CHECK(error_of(with_experiment(R"("d_k": 0)")) ==
        "bad.json: /experiments/0/d_k: expected a positive integer or a non-empty list of "
        "positive integers, found number 0");
  CHECK(error_of(with_experiment(R"("d_k": [])")) ==
        "bad.json: /experiments/0/d_k: expected a positive integer or a non-empty list of "
        "positive integers, found an empty list");
  CHECK(error_of(R"({"name": "t", "seed": 1, "experiments": []})") ==
        "bad.json: /experiments: expected a non-empty list of experiments, found an empty list");
  CHECK(error_of(with_experiment(R"("d_k": 1, "trials": 0)")) ==
        "bad.json: /experiments/0/trials: expected a positive integer or a non-empty list of "
        "positive integers, found number 0");
  CHECK(error_of(with_experiment(R"("d_k": 1, "std_q": 0)")) ==
        "bad.json: /experiments/0/std_q: expected a positive number or a non-empty list of "
        "positive numbers, found number 0");
}

TEST_CASE("missing keys and bad scale schemes") {
  CHECK(
      error_of(R"({"name": "t", "experiments": [{"name": "a", "kind": "variance", "d_k": 1}]})") ==
      "bad.json: /: missing required key \"seed\"");
  CHECK(
      error_of(R"({"name": "t", "seed": 1, "experiments": [{"name": "a", "kind": "variance"}]})") ==
      "bad.json: /experiments/0: missing required key \"d_k\"");
  CHECK(error_of(with_experiment(R"("d_k": 1, "scale": "sqrt")")) ==
        "bad.json: /experiments/0/scale: expected a scale scheme (\"none\", \"sqrt_dk\", \"dk\", "
        "\"log_n\" or a positive number) or a non-empty list of them, found string \"sqrt\"");
}

TEST_CASE("several problems are all reported, one per line") {
  CHECK(error_of(with_experiment(R"("d_k": 0, "trials": 0)")) ==
        "bad.json: /experiments/0/d_k: expected a positive integer or a non-empty list of "
        "positive integers, found number 0\n"
        "bad.json: /experiments/0/trials: expected a positive integer or a non-empty list of "
        "positive integers, found number 0");
}

TEST_CASE("duplicate experiment names") {
  CHECK(error_of(R"({"name": "t", "seed": 1, "experiments": [
        {"name": "a", "kind": "variance", "d_k": 1}, {"name": "a", "kind": "variance", "d_k": 2}]})") ==
        "bad.json: /experiments/1/name: duplicate experiment name \"a\"");
}

TEST_CASE("semantic checks: aligned inputs and memory") {
  CHECK(error_of(with_experiment(R"("d_k": 4, "alignment": 0.5, "n_q": 3)")) ==
        "bad.json: /experiments/0/alignment: aligned inputs pair query i with key i, so n_q and "
        "n_kv must be one and the same value; found n_q [3] and n_kv [64]");
  const std::string msg =
      error_of(with_experiment(R"("d_k": 1000000, "n_q": 1000000, "n_k": 1000000)"));
  CHECK(msg.rfind("bad.json: /experiments/0: needs about ", 0) == 0);
  CHECK(msg.find("GiB available; reduce the sizes") != std::string::npos);
  // The per-trial results count too: a trillion trials of a tiny product ended in bad_alloc.
  const std::string trials =
      error_of(with_experiment(R"("d_k": 1, "n_q": 2, "n_k": 2, "trials": 1000000000000)"));
  CHECK(trials.rfind("bad.json: /experiments/0: needs about ", 0) == 0);
}

TEST_CASE("a grid too large to expand is refused before it is expanded") {
  // 200^3 = 8 million cells: expanding them exhausted memory before this check.
  std::string list;
  for (int i = 1; i <= 200; ++i) list += (i > 1 ? ", " : "") + std::to_string(i);
  CHECK(error_of(with_experiment("\"d_k\": [" + list + "], \"n_q\": [" + list + "], \"n_k\": [" +
                                 list + "], \"scale\": \"none\"")) ==
        "bad.json: /experiments/0: the grid has 8000000 cells (the product of the lengths of its "
        "lists), expected at most 100000");
  // 200 x 200 x 6 = 240 000 cells took the fuzzer's 10 s to validate under the sanitizers.
  CHECK(error_of(with_experiment("\"d_k\": [" + list + "], \"n_q\": [" + list +
                                 "], \"n_k\": [1, 2, 3, 4, 5, 6], \"scale\": \"none\"")) ==
        "bad.json: /experiments/0: the grid has 240000 cells (the product of the lengths of its "
        "lists), expected at most 100000");
}

TEST_CASE("variance's old n_k is read as n_kv, with a note; both at once are refused") {
  const auto old = sdpa::parse_config("old.json", with_experiment(R"("d_k": 4, "n_k": [8, 16])"));
  CHECK(old.notes == std::vector<std::string>{
                         "old.json: /experiments/0/n_k: \"n_k\" is the old name of \"n_kv\" (read "
                         "as n_kv); rename it"});
  const auto now = sdpa::parse_config("new.json", with_experiment(R"("d_k": 4, "n_kv": [8, 16])"));
  CHECK(now.notes.empty());
  // The same grid, in the same order: the same cells (and so the same random streams).
  const auto a = sdpa::make_plan(old)[0], b = sdpa::make_plan(now)[0];
  REQUIRE(a.cells.size() == 4);  // n_kv 8 and 16, each with the two default scales
  for (std::size_t i = 0; i < a.cells.size(); ++i) CHECK(a.cells[i].params == b.cells[i].params);
  CHECK_FALSE(a.params.contains("n_k"));
  CHECK(error_of(with_experiment(R"("d_k": 4, "n_k": 8, "n_kv": 8)")) ==
        "bad.json: /experiments/0/n_k: \"n_k\" is the old name of \"n_kv\"; give only \"n_kv\"");
}
