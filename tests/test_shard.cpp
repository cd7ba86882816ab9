// Sharded sweeps: every cell in exactly one shard, balanced by estimated cost; shards merged
// into the records of an unsharded run (`compare` calls them identical); shards that do not
// belong together refused by name with exit 2 and nothing written; a shard resumed on its
// own; the Slurm scripts. tests/test_slurm.sh runs them on a real Slurm.
#include <doctest/doctest.h>
#include <signal.h>

#include "cli_runner.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/report.hpp"
#include "sdpa/shard.hpp"

using namespace sdpa::testing;  // the CLI runner and file helpers of cli_runner.hpp
namespace fs = std::filesystem;

namespace {

// Cells of different sizes (costs), two statistics kinds.
const char* kConfig = R"({"name": "sweep", "seed": 3, "experiments": [
 {"name": "v", "kind": "variance", "d_k": [4, 8, 16, 32, 64], "n_q": [8, 16], "n_kv": 16,
  "trials": 30, "scale": ["none", "sqrt_dk"]},
 {"name": "e", "kind": "entropy", "d_k": [4, 16], "n_kv": [8, 64], "n_q": 4, "trials": 20}]})";

// A timing experiment beside a statistics one.
const char* kTimingConfig = R"({"name": "timed", "seed": 4, "experiments": [
 {"name": "t", "kind": "timing", "kernel": ["naive", "reference"], "n_q": 16, "n_kv": 16,
  "d_k": 8, "d_v": 8, "threads": 1, "repetitions": 3, "min_time": 0.002, "warmup_time": 0.001},
 {"name": "v", "kind": "variance", "d_k": [4, 8], "n_q": 4, "n_kv": 4, "trials": 10}]})";

// Six cells, two a shard of three, so that a shard's run can be interrupted between two.
const char* kTwoCellShards = R"({"name": "slow", "seed": 6, "experiments": [
 {"name": "v", "kind": "variance", "d_k": [64, 96, 128], "n_q": 64, "n_kv": 64, "trials": 60,
  "scale": ["none", "sqrt_dk"]}]})";

struct Sweep {
  TempDir dir;
  std::string config = (dir / "sweep.json").string();
  Sweep(const char* text = kConfig) { dir.write("sweep.json", text); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  // Runs `args` and requires it to succeed.
  void ok(const std::string& args) const {
    const auto r = run_cli(args, dir);
    CAPTURE(args);
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
  }
  // Writes shard files s0.json ... for `count` shards.
  void shards(int count) const {
    for (int i = 0; i < count; ++i)
      ok("run " + config + " -j 1 --shard " + std::to_string(i) + "/" + std::to_string(count) +
         " -o " + path("s" + std::to_string(i) + ".json"));
  }
  // A merge that must be refused: exit 2, each of `expected` in its message, nothing written.
  void refused(const std::string& inputs, std::initializer_list<std::string> expected) const {
    const std::string out = path("merged.json");
    const auto r = run_cli("merge " + inputs + " -o " + out, dir);
    CAPTURE(inputs);
    CAPTURE(r.err);
    CHECK(r.exit_code == 2);
    for (const std::string& text : expected) CHECK(r.err.find(text) != std::string::npos);
    CHECK_FALSE(fs::exists(out));
  }
  void refused(const std::string& inputs, const std::string& expected) const {
    refused(inputs, {expected});
  }
};

sdpa::json read_json(const std::string& path) { return sdpa::json::parse(slurp(path)); }
void write_json(const std::string& path, const sdpa::json& doc) {
  // Sealed with a fresh checksum, as a tamperer would: merge's own checks must still refuse.
  std::ofstream(path) << sdpa::report::result_file_text(doc);
}

}  // namespace

TEST_CASE("--shard: I/N or slurm, anything else refused by name") {
  CHECK(sdpa::parse_shard_option("--shard", "0/1") == sdpa::Shard{0, 1});
  CHECK(sdpa::parse_shard_option("--shard", "2/3") == sdpa::Shard{2, 3});
  for (const char* bad : {"3/3", "-1/3", "1/0", "a/3", "1/3x", "", "1", " 1/3", "1/+3", "1/3/4"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(sdpa::parse_shard_option("--shard", bad),
                         doctest::Contains("--shard: expected I/N"), sdpa::InputError);
  }
  for (const char* v : {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
                        "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP"})
    unsetenv(v);
  CHECK_THROWS_WITH_AS(sdpa::parse_shard_option("--shard", "slurm"),
                       doctest::Contains("SLURM_ARRAY_TASK_COUNT is not set"), sdpa::InputError);
  setenv("SLURM_ARRAY_TASK_COUNT", "3", 1);
  CHECK_THROWS_WITH_AS(sdpa::parse_shard_option("--shard", "slurm"),
                       doctest::Contains("SLURM_ARRAY_TASK_ID is not set"), sdpa::InputError);
  setenv("SLURM_ARRAY_TASK_ID", "2", 1);
  setenv("SLURM_ARRAY_TASK_MIN", "0", 1);
  setenv("SLURM_ARRAY_TASK_MAX", "2", 1);
  CHECK(sdpa::parse_shard_option("--shard", "slurm") == sdpa::Shard{2, 3});
  setenv("SLURM_ARRAY_TASK_ID", "3", 1);  // an array 1-3
  CHECK_THROWS_WITH_AS(sdpa::parse_shard_option("--shard", "slurm"),
                       doctest::Contains("SLURM_ARRAY_TASK_ID: expected an integer from 0 to 2"),
                       sdpa::InputError);
  setenv("SLURM_ARRAY_TASK_ID", "x", 1);
  CHECK_THROWS_WITH_AS(sdpa::parse_shard_option("--shard", "slurm"),
                       doctest::Contains("found \"x\""), sdpa::InputError);
  setenv("SLURM_ARRAY_TASK_ID", "1", 1);
  setenv("SLURM_ARRAY_TASK_MAX", "4", 1);  // an array 0-4:2 has 3 tasks too
  CHECK_THROWS_WITH_AS(sdpa::parse_shard_option("--shard", "slurm"),
                       doctest::Contains("SLURM_ARRAY_TASK_MAX: expected 2"), sdpa::InputError);
  for (const char* v : {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
                        "SLURM_ARRAY_TASK_MAX"})
    unsetenv(v);
}

TEST_CASE("shard_cells: every cell in exactly one shard, balanced, the same every time") {
  for (const char* name : {"configs/paper.json", "configs/quick.json", "configs/hardware.json"}) {
    const auto plans = sdpa::make_plan(sdpa::load_config(name));
    std::size_t cells = 0;
    double largest = 0;
    for (const auto& p : plans) {
      cells += p.cells.size();
      for (const auto& c : p.cells) largest = std::max(largest, sdpa::estimated_cost(c));
    }
    for (int count = 1; count <= std::min<int>(7, int(cells)); ++count) {
      CAPTURE(name);
      CAPTURE(count);
      const auto shards = sdpa::shard_cells(plans, count);
      CHECK(shards == sdpa::shard_cells(plans, count));
      REQUIRE(shards.size() == std::size_t(count));
      std::vector<std::vector<int>> seen(plans.size());
      for (std::size_t e = 0; e < plans.size(); ++e) seen[e].assign(plans[e].cells.size(), 0);
      double most = 0, least = 1e300;
      for (const auto& shard : shards) {
        double load = 0;
        for (std::size_t e = 0; e < plans.size(); ++e)
          for (const auto c : shard[e]) {
            ++seen[e][std::size_t(c)];
            load += sdpa::estimated_cost(plans[e].cells[std::size_t(c)]);
          }
        most = std::max(most, load);
        least = std::min(least, load);
      }
      for (const auto& s : seen) CHECK(std::count(s.begin(), s.end(), 1) == long(s.size()));
      // Each cell went to the least loaded shard: no two shards differ by more than a cell.
      CHECK(most - least <= largest);
    }
    CHECK_THROWS_AS(sdpa::shard_cells(plans, int(cells) + 1), sdpa::InputError);
  }
}

TEST_CASE("3 shards merged: the records of an unsharded run, in any order of the files") {
  Sweep s;
  s.ok("run " + s.config + " -j 2 -o " + s.path("whole.json"));
  s.shards(3);
  const std::string merged = s.path("merged.json");
  s.ok("merge " + s.path("s2.json") + " " + s.path("s0.json") + " " + s.path("s1.json") + " -o " +
       merged);
  const auto whole = slurp(s.path("whole.json"));
  CHECK(records_of(slurp(merged)) == records_of(whole));
  // Each shard holds part of the cells, and says which.
  for (int i = 0; i < 3; ++i) {
    const auto doc = read_json(s.path("s" + std::to_string(i) + ".json"));
    CHECK(doc["shard"]["index"] == i);
    CHECK(doc["shard"]["count"] == 3);
    CHECK(doc["config"]["sha256"] == read_json(s.path("whole.json"))["config"]["sha256"]);
    CHECK(records_of(doc.dump()) != records_of(whole));
  }
  const auto doc = read_json(merged);
  CHECK_FALSE(doc.contains("shard"));
  CHECK(doc["merged_from"].size() == 3);
  CHECK(doc["merged_from"][0]["shard"] == 0);
  const auto compared = run_cli("compare " + s.path("whole.json") + " " + merged, s.dir);
  REQUIRE(compared.exit_code == 0);
  CHECK(compared.out.find("| v | variance | 20 | identical |") != std::string::npos);
  CHECK(compared.out.find("| e | entropy | ") != std::string::npos);
  CHECK(compared.out.find("**finding**") == std::string::npos);
  // One shard is the whole run.
  s.ok("run " + s.config + " -j 1 --shard 0/1 -o " + s.path("one.json"));
  s.ok("merge " + s.path("one.json") + " -o " + s.path("one-merged.json"));
  CHECK(records_of(slurp(s.path("one-merged.json"))) == records_of(whole));
}

TEST_CASE("merge refuses shards that do not belong together, naming the file; writes nothing") {
  Sweep s;
  s.shards(3);
  const std::string s0 = s.path("s0.json"), s1 = s.path("s1.json"), s2 = s.path("s2.json");
  s.refused(s0 + " " + s1, "shard 2 of 3 is missing");
  s.refused(s0 + " " + s1 + " " + s1, s1 + ": shard 1 of 3 again");
  s.ok("run " + s.config + " -j 1 -o " + s.path("whole.json"));
  s.refused(s0 + " " + s.path("whole.json"), s.path("whole.json") + ": /shard: not a shard");
  // Another split of the same config.
  s.ok("run " + s.config + " -j 1 --shard 1/2 -o " + s.path("half.json"));
  s.refused(s0 + " " + s.path("half.json"), s.path("half.json") + ": /shard/count: expected 3");
  // Another seed, another config, another suite commit.
  for (const char* pointer : {"/seed", "/config/sha256", "/suite/git_commit"}) {
    auto doc = read_json(s2);
    const sdpa::json::json_pointer p(pointer);
    doc[p] = doc[p].is_number() ? sdpa::json(99) : sdpa::json(std::string(64, 'a'));
    write_json(s.path("other.json"), doc);
    s.refused(s0 + " " + s1 + " " + s.path("other.json"),
              s.path("other.json") + ": " + pointer + ": expected ");
  }
  // A cell in two shards, and one in none.
  auto doc = read_json(s2);
  doc["shard"]["cells"][0][0] = read_json(s0)["shard"]["cells"][0][0];
  doc["experiments"][0]["records"][0] = read_json(s0)["experiments"][0]["records"][0];
  write_json(s.path("dup.json"), doc);
  s.refused(s0 + " " + s1 + " " + s.path("dup.json"), "is also in " + s0);
  doc = read_json(s2);
  doc["shard"]["cells"][0].erase(0);
  doc["experiments"][0]["records"].erase(0);
  write_json(s.path("short.json"), doc);
  s.refused(s0 + " " + s1 + " " + s.path("short.json"), "is in none of the 3 shards");
  // Statistics of different machines do merge: they depend on the config and seed alone.
  doc = read_json(s2);
  doc["machine_id"] = "another-machine";
  write_json(s.path("elsewhere.json"), doc);
  s.ok("merge " + s0 + " " + s1 + " " + s.path("elsewhere.json") + " -o " + s.path("m.json"));
}

TEST_CASE("timing shards of different machines are refused: compared, not merged") {
  Sweep s(kTimingConfig);
  s.shards(2);
  const std::string s0 = s.path("s0.json"), s1 = s.path("s1.json");
  s.ok("merge " + s0 + " " + s1 + " -o " + s.path("same.json"));
  const auto merged = read_json(s.path("same.json"));
  CHECK(merged["experiments"][0]["records"].size() == 2);
  auto doc = read_json(s1);
  REQUIRE(!doc["experiments"][0]["records"].empty());  // the timing cells are split
  REQUIRE(!read_json(s0)["experiments"][0]["records"].empty());
  doc["machine_id"] = "another-machine";
  write_json(s.path("elsewhere.json"), doc);
  s.refused(s0 + " " + s.path("elsewhere.json"),
            {"measured on another-machine, but " + s0 + " was measured on",
             "compared (`sdpa-bench compare`), not merged"});
}

TEST_CASE("a shard resumes on its own: interrupted, then continued to the same records") {
  Sweep s(kTwoCellShards);
  s.ok("run " + s.config + " -j 1 --shard 1/3 -o " + s.path("s1.json"));  // the reference
  const std::string out = s.path("r1.json"), journal = out + ".journal";
  // Interrupted while its first cell runs (held there until the signal: experiments/runner.cpp,
  // SDPA_TEST_HOLD): the run stops after that cell, so the journal holds a cell and the rest is
  // left, however fast the machine.
  const auto child = spawn_cli({"run", s.config, "-j", "1", "--shard", "1/3", "-o", out}, s.dir, {},
                               {"SDPA_TEST_HOLD=0:1"});
  REQUIRE(wait_for_text(child.err, "sdpa-bench: held after computing cell 0", child));
  ::kill(child.pid, SIGINT);
  const auto r = wait_cli(child);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 130);
  REQUIRE(fs::exists(journal));
  CHECK_FALSE(fs::exists(out));
  // Resumed as another shard: refused, the journal kept.
  const auto wrong = run_cli("run " + s.config + " --shard 2/3 --resume -o " + out, s.dir);
  CAPTURE(wrong.err);
  CHECK(wrong.exit_code == 2);
  CHECK(wrong.err.find("this run computes shard 1/3, not shard 2/3") != std::string::npos);
  CHECK(fs::exists(journal));
  s.ok("run --resume " + journal);  // the journal knows its shard
  CHECK(records_of(slurp(out)) == records_of(slurp(s.path("s1.json"))));
  CHECK(read_json(out)["shard"] == read_json(s.path("s1.json"))["shard"]);
  CHECK_FALSE(fs::exists(journal));
}

TEST_CASE("run --shard slurm reads the Slurm array task's environment, only when asked") {
  Sweep s;
  s.shards(3);
  const std::string out = s.path("task.json");
  const auto r = run_cli("run " + s.config + " -j 1 --shard slurm -o " + out, s.dir,
                         "env SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=3 ");
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(records_of(slurp(out)) == records_of(slurp(s.path("s2.json"))));
  const auto missing = run_cli("run " + s.config + " --shard slurm -o " + out + "2", s.dir,
                               "env -u SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT=3 ");
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("--shard slurm: SLURM_ARRAY_TASK_ID is not set") != std::string::npos);
  CHECK_FALSE(fs::exists(out + "2"));
  // Under a Slurm array but without --shard, the whole config runs.
  s.ok("run " + s.config + " -j 1 -o " + s.path("all.json"));
  const auto whole = run_cli("run " + s.config + " -j 1 -o " + s.path("all2.json"), s.dir,
                             "env SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=3 ");
  REQUIRE(whole.exit_code == 0);
  CHECK(records_of(slurp(s.path("all2.json"))) == records_of(slurp(s.path("all.json"))));
  const auto too_many = run_cli("run " + s.config + " --shard 99/100 -o " + out + "3", s.dir);
  CHECK(too_many.exit_code == 2);
  CHECK(too_many.err.find("--shard 99/100: the config has 28 cell(s)") != std::string::npos);
}

TEST_CASE("slurm writes the array, the per-shard run and the merge after it") {
  Sweep s;
  const std::string folder = s.path("batch");
  const auto r = run_cli(
      "slurm " + s.config + " --shards 3 --out-dir " + folder + " --partition=debug -- --time 5",
      s.dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string array = slurp(folder + "/array.sbatch"),
                    merge = slurp(folder + "/merge.sbatch"), submit = slurp(folder + "/submit.sh");
  CHECK(array.find("#SBATCH --array=0-2\n") != std::string::npos);
  CHECK(array.find(" run " + fs::absolute(s.config).string() +
                   " --shard slurm -o \"$shard\" --resume") != std::string::npos);
  CHECK(merge.find(" merge " + folder + "/shard-0.json " + folder + "/shard-1.json " + folder +
                   "/shard-2.json -o " + folder + "/sweep.json") != std::string::npos);
  CHECK(submit.find("--dependency=afterok:$array") != std::string::npos);
  CHECK(submit.find(" --partition=debug --time 5 ") != std::string::npos);
  CHECK((fs::status(folder + "/submit.sh").permissions() & fs::perms::owner_exec) !=
        fs::perms::none);
  // Refused, nothing written: the options the scripts set, a bad count, more shards than cells.
  for (const std::string& args :
       {std::string(" --shards 3 --array=0-9"), std::string(" --shards 3 -d afterok:1"),
        std::string(" --shards 0"), std::string(" --shards x"), std::string(" --shards 29")}) {
    CAPTURE(args);
    const auto bad = run_cli("slurm " + s.config + " -o " + s.path("nothing") + args, s.dir);
    CAPTURE(bad.err);
    CHECK(bad.exit_code == 2);
    CHECK_FALSE(fs::exists(s.path("nothing")));
  }
}

// Issue 40: sbatch reads unique prefixes of long options and bundled short options, so the
// options the scripts set are refused in every spelling sbatch accepts.
TEST_CASE("slurm refuses the array and the dependency in every spelling sbatch accepts") {
  Sweep s;
  for (const std::string option :
       {"--array=0-9", "--arr=0-9", "--ar=1", "--a=1", "--array", "-a", "-a0-9", "-Ha", "-vd",
        "--dependency=afterok:1", "--depend=afterok:1", "--depen=x", "--dep", "--d=1", "-d",
        "-dafterok:1"}) {
    CAPTURE(option);
    const auto bad = run_cli(
        "slurm " + s.config + " --shards 3 -o " + s.path("nothing") + " -- " + option + " 0-9",
        s.dir);
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("error: slurm: " + option + ": --") != std::string::npos);
    CHECK(bad.err.find(" is set by the scripts") != std::string::npos);
    CHECK_FALSE(fs::exists(s.path("nothing")));
  }
  // Options that only look alike are passed through.
  s.ok("slurm " + s.config + " --shards 3 -o " + s.path("ok") +
       " -- --account=x --delay-boot=1 -p debug -Jdata --comment=d");
}

TEST_CASE("slurm: a config path with a newline stays in its comment; names . and .. refused") {
  Sweep s;
  const std::string canary = s.path("pwned");  // what the path would create, run in s.dir
  const fs::path odd = s.dir / "x\ntouch pwned\n.json";
  s.dir.write(odd.filename(), kConfig);
  const std::string folder = s.path("batch");
  s.ok("slurm " + sdpa::shell_quoted(odd.string()) + " --shards 2 -o " + folder);
  for (const char* script : {"array.sbatch", "merge.sbatch", "submit.sh"}) {
    const std::string text = slurp(folder + "/" + script);
    CAPTURE(script);
    CHECK(text.find("# Written by `sdpa-bench slurm` for " + sdpa::visible(odd.string())) !=
          std::string::npos);
    // sh reads the scripts without running them (-n): no syntax error, and nothing ran.
    CHECK(std::system(("sh -n " + folder + "/" + script).c_str()) == 0);
  }
  // The header alone, run: it is all comments.
  const std::string submit = slurp(folder + "/submit.sh");
  s.dir.write("header.sh", submit.substr(0, submit.find("set -eu")));
  CHECK(std::system(("cd " + s.dir.path.string() + " && sh header.sh").c_str()) == 0);
  CHECK_FALSE(fs::exists(canary));
  for (const char* name : {".", ".."}) {
    CAPTURE(name);
    s.dir.write("dots.json", std::string(R"({"name": ")") + name + R"(", "seed": 1,
      "experiments": [{"name": "v", "kind": "variance", "d_k": 2, "trials": 3}]})");
    const auto bad = run_cli("slurm " + s.path("dots.json") + " --shards 1", s.dir);
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find(s.path("dots.json") + ": /name: ") != std::string::npos);
    CHECK_FALSE(fs::exists(s.dir / "slurm"));
  }
}

// Issue 40: shards edited and resealed (a fresh checksum) are still checked against the plan.
TEST_CASE("merge re-derives each record's cell, checks the embedded config, refuses extras") {
  Sweep s;
  s.shards(2);
  const std::string s0 = s.path("s0.json"), s1 = s.path("s1.json");
  // Two records' parameters swapped between their cells.
  auto doc = read_json(s1);
  auto& records = doc["experiments"][0]["records"];
  REQUIRE(records.size() >= 2);
  const sdpa::json first = records[0]["params"];
  REQUIRE(first != records[1]["params"]);
  records[0]["params"] = records[1]["params"];
  records[1]["params"] = first;
  write_json(s.path("swapped.json"), doc);
  s.refused(s0 + " " + s.path("swapped.json"),
            s.path("swapped.json") + ": /experiments/0/records/0/params: expected " + first.dump() +
                " (cell " + records[0]["cell"].dump() + "'s parameters in the config's plan)");
  // The embedded config edited, its SHA-256 left as it was.
  doc = read_json(s1);
  doc["config"]["document"]["experiments"][0]["trials"] = 31;
  write_json(s.path("config.json"), doc);
  s.refused(s0 + " " + s.path("config.json"), s.path("config.json") +
                                                  ": /config/document: differs from " + s0 +
                                                  "'s, yet both carry the config's SHA-256 ");
  // An experiment the config does not have.
  doc = read_json(s1);
  doc["experiments"].push_back(doc["experiments"][0]);
  doc["experiments"].back()["name"] = "extra";
  doc["shard"]["cells"].push_back(doc["shard"]["cells"][0]);
  write_json(s.path("extra.json"), doc);
  s.refused(s0 + " " + s.path("extra.json"),
            s.path("extra.json") +
                ": /experiments/2/name: \"extra\" is not in the config's plan "
                "(2 experiment(s))");
  // A count far above the most shards there can be: said, not a failed allocation.
  doc = read_json(s1);
  doc["shard"]["count"] = std::int64_t(1000000000000000);
  write_json(s.path("count.json"), doc);
  s.refused(s0 + " " + s.path("count.json"),
            s.path("count.json") +
                ": /shard/count: expected an integer >= 1, at most 100000, "
                "found number 1000000000000000");
}

// Issue 40: every JSON type error carries its path, in a shard as in any result file.
TEST_CASE("merge: null, a string or a list for a number is named by its shard and JSON path") {
  Sweep s(kTimingConfig);
  s.shards(2);
  const std::string s0 = s.path("s0.json"), s1 = s.path("s1.json");
  for (const char* pointer :
       {"/shard/index", "/duration_s", "/experiments/0/duration_s", "/experiments/0/records/0/cell",
        "/experiments/0/records/0/time_s/value"})
    for (const sdpa::json& value : {sdpa::json(nullptr), sdpa::json("1"), sdpa::json::array({1})}) {
      auto doc = read_json(s1);
      if (!doc.contains(sdpa::json::json_pointer(pointer))) doc = read_json(s0);
      REQUIRE(doc.contains(sdpa::json::json_pointer(pointer)));
      const std::string other = doc == read_json(s1) ? s0 : s1;
      doc[sdpa::json::json_pointer(pointer)] = value;
      write_json(s.path("bad.json"), doc);
      CAPTURE(pointer);
      CAPTURE(value.dump());
      const std::string found = value.is_null()     ? "found null"
                                : value.is_string() ? "found string \"1\""
                                                    : "found list [1]";
      s.refused(other + " " + s.path("bad.json"),
                {s.path("bad.json") + ": " + pointer + ": expected ", found});
    }
}

TEST_CASE("merge refuses an edited shard by name; --allow-edited merges it, marked edited") {
  Sweep s;
  s.shards(2);
  const std::string s0 = s.path("s0.json"), s1 = s.path("s1.json");
  std::string text = slurp(s1);
  const auto at = text.find("\"duration_s\": ");
  REQUIRE(at != std::string::npos);
  text.insert(at + 14, "1");  // a longer duration, the checksum as it was
  s.dir.write("s1.json", text);
  s.refused(s0 + " " + s1, s1 + ": /contents_sha256: does not match the file's contents: edited "
                                "after it was written (or damaged); read it anyway with "
                                "--allow-edited");
  s.ok("merge --allow-edited " + s0 + " " + s1 + " -o " + s.path("m.json"));
  const auto merged = read_json(s.path("m.json"));
  CHECK(merged["edited"] == true);
  // The merge carries its own checksum: read without the flag, it is still marked.
  const auto r = run_cli("report " + s.path("m.json"), s.dir);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("### variance: v [edited]") != std::string::npos);
}
