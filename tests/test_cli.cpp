// End to end through the executable: a tiny config run, its result file checked against
// results/schema.json, bad input refused with exit code 2 and nothing written.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include "cli_runner.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/report.hpp"

using sdpa::testing::records_of;
using sdpa::testing::run_cli;
using sdpa::testing::TempDir;

namespace {

const char* kTinyConfig = R"({
  "name": "tiny",
  "seed": 3,
  "experiments": [
    {"name": "v", "kind": "variance", "d_k": [2, 16], "n_q": 4, "n_kv": 5, "trials": 30,
     "scale": ["none", "sqrt_dk"], "kernel": ["reference", "naive"], "cdf_at": [1.6]},
    {"name": "aligned", "kind": "variance", "d_k": 8, "n_q": 6, "n_kv": 6, "trials": 20,
     "alignment": 0.5},
    {"name": "recall", "kind": "training", "d_k": [4, 16], "d_model": 8, "vocab": 4,
     "n_pairs": 2, "steps": 20, "log_every": 10, "seeds": 2, "eval_size": 8, "batch": 4}
  ]
})";

// The problems of a document against results/schema.json (the file as committed), one per line.
std::string schema_errors(const std::string& result_text) {
  const sdpa::JsonSchema schema(sdpa::testing::slurp("results/schema.json"));
  std::string errors;
  for (const auto& p : schema.problems(nlohmann::json::parse(result_text))) errors += p + "\n";
  return errors;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Terminal columns of a UTF-8 line.
std::size_t columns(const std::string& line) {
  return std::size_t(
      std::count_if(line.begin(), line.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

}  // namespace

TEST_CASE("run writes a result file that matches results/schema.json and prints tables") {
  TempDir dir;
  dir.write("tiny.json", kTinyConfig);
  const auto r =
      run_cli("run " + (dir / "tiny.json").string() + " -o " + (dir / "r.json").string(), dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("### variance: v") != std::string::npos);
  CHECK(r.out.find("sqrt_dk: Var(s) [95% CI]") != std::string::npos);
  CHECK(r.err.find("[v] variance: 8 cells in") != std::string::npos);  // not a terminal

  const std::string text = sdpa::testing::slurp(dir / "r.json");
  CHECK(schema_errors(text) == "");
  const auto doc = sdpa::json::parse(text);
  CHECK(doc["config"]["sha256"] == sdpa::sha256_hex(kTinyConfig));
  CHECK(doc["config"]["document"] == sdpa::json::parse(kTinyConfig));
  CHECK(doc["experiments"][0]["records"].size() == 8);
  CHECK(doc["experiments"][1]["records"][0].contains("aligned_score_variance"));
  CHECK(doc["experiments"][2]["records"].size() == 4);
  CHECK(r.out.find("### training: recall: unscaled vs sqrt_dk") != std::string::npos);
  // Nothing but the result file (and the config) is left in the folder: no temporary files.
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(dir.path)) ++files;
  CHECK(files == 2);
}

TEST_CASE("the same config and seed give identical statistics on 1 and 2 threads") {
  TempDir dir;
  dir.write("tiny.json", kTinyConfig);
  const std::string cfg = (dir / "tiny.json").string();
  REQUIRE(run_cli("run " + cfg + " -j 1 -o " + (dir / "a.json").string(), dir).exit_code == 0);
  REQUIRE(run_cli("run " + cfg + " -j 2 -o " + (dir / "b.json").string(), dir).exit_code == 0);
  CHECK(records_of(sdpa::testing::slurp(dir / "a.json")) ==
        records_of(sdpa::testing::slurp(dir / "b.json")));
}

TEST_CASE("a bad config exits 2, names file and path, and writes nothing") {
  TempDir dir;
  dir.write(
      "bad.json",
      R"({"name": "b", "seed": 1, "experiments": [{"name": "v", "kind": "variance", "d_k": 0}]})");
  const std::string out = (dir / "r.json").string();
  const auto r = run_cli("run " + (dir / "bad.json").string() + " -o " + out, dir);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: " + (dir / "bad.json").string() +
                     ": /experiments/0/d_k: expected a positive integer or a non-empty list of "
                     "positive integers, found number 0\n");
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK(run_cli("validate " + (dir / "bad.json").string(), dir).exit_code == 2);
  CHECK(run_cli("run " + (dir / "missing.json").string(), dir).exit_code == 2);
}

TEST_CASE(
    "validate refuses query heads that do not share K/V heads evenly: path, expected, found") {
  TempDir dir;
  dir.write("heads.json", R"({"name": "h", "seed": 1, "experiments": [{"name": "t",
      "kind": "timing", "kernel": "flash", "heads_q": 32, "heads_kv": 6}]})");
  const auto r = run_cli("validate " + (dir / "heads.json").string(), dir);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: " + (dir / "heads.json").string() +
                     ": /experiments/0/heads_q: expected a multiple of heads_kv (6), found 32\n");
}

TEST_CASE("every shipped config validates") {
  TempDir dir;
  int configs = 0;
  for (const auto& f : std::filesystem::directory_iterator("configs")) {
    if (f.path().extension() != ".json" || f.path().filename() == "schema.json") continue;
    CAPTURE(f.path().string());
    const auto r = run_cli("validate " + f.path().string(), dir);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find(": valid (") != std::string::npos);
    ++configs;
  }
  CHECK(configs >= 5);  // quick, seeds, hardware, training, paper
}

TEST_CASE("an old parameter name is read under its new one, with a note on stderr") {
  TempDir dir;
  dir.write("old.json", R"({"name": "o", "seed": 1, "experiments": [
    {"name": "v", "kind": "variance", "d_k": 4, "n_q": 4, "n_k": 8, "trials": 3}]})");
  const auto v = run_cli("validate " + (dir / "old.json").string(), dir);
  CHECK(v.exit_code == 0);
  CHECK(v.err == "note: " + (dir / "old.json").string() +
                     ": /experiments/0/n_k: \"n_k\" is the old name of \"n_kv\" (read as n_kv); "
                     "rename it\n");
}

TEST_CASE("validate, list, info, --version and --help") {
  TempDir dir;
  const auto v = run_cli("validate configs/quick.json", dir);
  CHECK(v.exit_code == 0);
  CHECK(v.out.rfind("configs/quick.json: valid (", 0) == 0);

  const auto l = run_cli("list", dir);
  CHECK(l.exit_code == 0);
  CHECK(l.out.find("variance") != std::string::npos);
  CHECK(l.out.find(" bf16 ") != std::string::npos);  // flash-bf16's precision
  // Every kernel's row starts its family, ISA and precision at the header's columns.
  const auto lines = lines_of(l.out);
  const auto header = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
    return line.rfind("  name ", 0) == 0;
  });
  REQUIRE(header != lines.end());
  std::size_t rows = 0;
  for (const auto& k : sdpa::kernel_registry()) {
    const auto row = std::find_if(lines.begin(), lines.end(), [&](const std::string& line) {
      return line.rfind("  " + k.name + " ", 0) == 0;
    });
    REQUIRE(row != lines.end());
    CAPTURE(*row);
    const auto at = [&](const std::string& column) {
      const std::size_t begin = header->find(" " + column + " ") + 1;
      return row->substr(begin, row->find(' ', begin) - begin);
    };
    CHECK(at("family") == k.family);
    CHECK(at("isa") == k.isa);
    CHECK(at("precision") == k.precision);
    ++rows;
  }
  CHECK(rows == sdpa::kernel_registry().size());
  for (const auto& line : lines) {
    CAPTURE(line);
    CHECK(columns(line) <= 100);
  }

  const auto i = run_cli("info", dir);
  REQUIRE(i.exit_code == 0);
  const auto info = sdpa::json::parse(i.out);
  CHECK(info["machine"]["logical_cores"].get<int>() >= 1);
  CHECK(info["suite"]["build_type"].is_string());

  CHECK(run_cli("--version", dir).out.rfind("sdpa-bench 0.1.0", 0) == 0);
  for (const char* sub : {"", "run", "time", "validate", "list", "info", "report", "claims",
                          "compare", "merge", "slurm", "attend"}) {
    const auto h = run_cli(std::string(sub) + " --help", dir);
    CAPTURE(sub);
    CHECK(h.exit_code == 0);
    CHECK(h.out.find("Usage") != std::string::npos);
    // Fits a terminal of 100 columns, and every option says what it takes (a number, a file).
    for (const auto& line : lines_of(h.out)) {
      CAPTURE(line);
      CHECK(columns(line) <= 100);
      CHECK(line.find(" TEXT") == std::string::npos);
    }
  }
  CHECK(run_cli("run --help", dir).out.find("-j,--threads INT") != std::string::npos);
}

TEST_CASE("mistakes in names get the nearest valid one") {
  TempDir dir;
  dir.write("tiny.json", kTinyConfig);
  const std::string tiny = (dir / "tiny.json").string();
  // The mistaken option alone, wherever it stands: not its value or the config after it.
  for (const std::string& args : {tiny + " --thread 2", "--thread 2 " + tiny}) {
    CAPTURE(args);
    const auto option = run_cli("run " + args, dir);
    CHECK(option.exit_code == 2);
    CHECK(option.err.rfind("error: run: unknown option --thread (did you mean --threads?)\n", 0) ==
          0);
  }
  // A subcommand that does not exist, even with --help, is an error with the nearest name.
  for (const char* typo : {"tme --help", "tme"}) {
    CAPTURE(typo);
    const auto sub = run_cli(typo, dir);
    CHECK(sub.exit_code == 2);
    CHECK(sub.err.rfind("error: unknown subcommand \"tme\" (did you mean \"time\"?)\n", 0) == 0);
    CHECK(sub.out == "");
  }
  const auto kernel = run_cli("time --kernel flsh --print-config", dir);
  CHECK(kernel.exit_code == 2);
  CHECK(kernel.err == "error: time: --kernel: unknown kernel \"flsh\" (did you mean \"flash\"?)\n");
}

TEST_CASE("renamed output options: the old spelling still works, with a note") {
  TempDir dir;
  dir.write("tiny.json", kTinyConfig);
  const std::string r = (dir / "r.json").string();
  REQUIRE(run_cli("run " + (dir / "tiny.json").string() + " -o " + r, dir).exit_code == 0);
  const auto now = run_cli("report " + r + " --format csv --out-dir " + (dir / "a").string(), dir);
  CHECK(now.exit_code == 0);
  CHECK(now.err.find("note:") == std::string::npos);
  const auto old = run_cli("report " + r + " --format csv --out " + (dir / "b").string(), dir);
  CHECK(old.exit_code == 0);
  CHECK(old.err.rfind("note: report --out is now --out-dir; the old spelling will go\n", 0) == 0);
  std::size_t files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir / "a/csv")) {
    CAPTURE(f.path());
    CHECK(sdpa::testing::slurp(f.path()) ==
          sdpa::testing::slurp(dir / "b/csv" / f.path().filename()));
    ++files;
  }
  CHECK(files > 0);
}

TEST_CASE("tables are aligned for a terminal and stay the same Markdown") {
  const std::string md =
      "### t\n\n| kernel | shape | GFLOP/s |\n|---|---:|---:|\n| flash | 1×16×16 | 3.5 |\n"
      "| naive-long | 2 | 12.25 |\n\nnote | not a table\n| a | b |\n";
  const std::string aligned = sdpa::report::aligned_tables(md);
  CHECK(aligned ==
        "### t\n\n| kernel     |   shape | GFLOP/s |\n| ---------- | ------: | ------: |\n"
        "| flash      | 1×16×16 |     3.5 |\n| naive-long |       2 |   12.25 |\n\nnote | not a "
        "table\n| a | b |\n");
  CHECK(sdpa::report::aligned_tables("") == "");
}

TEST_CASE("report regenerates the tables from a result file alone") {
  TempDir dir;
  dir.write("tiny.json", kTinyConfig);
  const auto r =
      run_cli("run " + (dir / "tiny.json").string() + " -o " + (dir / "r.json").string(), dir);
  REQUIRE(r.exit_code == 0);
  const auto rep = run_cli("report " + (dir / "r.json").string(), dir);
  CHECK(rep.exit_code == 0);
  CHECK(rep.out == r.out);  // the tables `run` printed, byte for byte

  dir.write("trunc.json", sdpa::testing::slurp(dir / "r.json").substr(0, 200));
  const auto t = run_cli("report " + (dir / "trunc.json").string(), dir);
  CHECK(t.exit_code == 2);
  CHECK(t.err.find((dir / "trunc.json").string() + ": not a complete JSON document") !=
        std::string::npos);
}

namespace {

const char* kTimingConfig = R"({
  "name": "timing-tiny",
  "seed": 11,
  "experiments": [
    {"name": "roof", "kind": "roofline", "isa": ["scalar", "avx2"], "threads": 1, "repetitions": 2,
     "min_time": 0.005, "llc_multiple": 2},
    {"name": "t", "kind": "timing", "kernel": ["naive", "reference"], "n_q": 16, "n_kv": 16,
     "d_k": 8, "d_v": 8, "threads": 1, "repetitions": 5, "min_time": 0.002, "warmup_time": 0.001},
    {"name": "v", "kind": "variance", "d_k": 4, "n_q": 4, "n_kv": 4, "trials": 10}
  ]
})";

}  // namespace

TEST_CASE("timing runs: schema, machine.peak, Google Benchmark's JSON, then compare") {
  TempDir dir;
  dir.write("timing.json", kTimingConfig);
  const std::string cfg = (dir / "timing.json").string(), a = (dir / "a.json").string(),
                    b = (dir / "b.json").string(), gb = (dir / "a-gb.json").string();
  const auto r = run_cli("run " + cfg + " -o " + a + " --benchmark-json " + gb, dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(run_cli("run " + cfg + " -o " + b, dir).exit_code == 0);
  CHECK(r.out.find("### roofline: roof") != std::string::npos);
  CHECK(r.out.find("| triad GB/s | triad median | triad CV |") != std::string::npos);  // its spread
  CHECK(r.out.find("| FMA at the end | triad at the end |") != std::string::npos);     // rechecked
  CHECK(r.out.find("### timing: t") != std::string::npos);

  const std::string text = sdpa::testing::slurp(a);
  CHECK(schema_errors(text) == "");
  const auto doc = sdpa::json::parse(text);
  const auto& peaks = doc["machine"]["peak"];
  REQUIRE(peaks.size() >= 1);
  CHECK(peaks[0]["isa"] == "scalar");
  for (const auto& peak : peaks) {
    // Measured again after the last cell: each ceiling the better of the two measurements.
    const auto &first = peak.at("first"), &again = peak.at("recheck");
    for (const char* key : {"fma_gflops", "triad_gbs"})
      CHECK(peak.at(key) == std::max(first.at(key).get<double>(), again.at(key).get<double>()));
  }
  for (const auto& rec : doc["experiments"][1]["records"]) {
    // % of peak refers to the machine.peak entry of the kernel's ISA and thread count, as it
    // stands after the recheck.
    CHECK(std::find(peaks.begin(), peaks.end(), rec["peak"]) != peaks.end());
    CHECK(rec["peak"]["isa"] == rec["kernel_isa"]);
    CHECK(rec["percent_of_peak"].get<double>() ==
          doctest::Approx(100 * rec["gflops"]["value"].get<double>() /
                          rec["peak"]["fma_gflops"].get<double>()));
    CHECK(rec["time_s"]["samples"].size() == 5);
  }

  // Google Benchmark's own JSON, as compare.py reads it: one document for the whole run.
  const auto gb_doc = sdpa::json::parse(sdpa::testing::slurp(gb));
  REQUIRE(gb_doc.contains("context"));
  REQUIRE(gb_doc["benchmarks"].is_array());
  std::size_t repetitions = 0;
  for (const auto& run : gb_doc["benchmarks"])
    if (run["run_type"] == "iteration") ++repetitions;
  CHECK(repetitions == 10);  // two cells of five
  CHECK(gb_doc["benchmarks"][0]["name"].get<std::string>().rfind("naive/forward/", 0) == 0);

  const auto c = run_cli("compare " + a + " " + b, dir);
  CAPTURE(c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(c.out.find("### timing: B = " + b + " against A = " + a) != std::string::npos);
  CHECK(c.out.find("| naive | 1×16×16, d 8/8 | 1 | forward |") != std::string::npos);
  CHECK(c.out.find("| reference | 1×16×16, d 8/8 | 1 | forward |") != std::string::npos);
  CHECK(c.out.find("| v | variance | 2 | identical |") != std::string::npos);
  CHECK(c.out.find("### peaks") != std::string::npos);
  CHECK(c.out.find("without a match") == std::string::npos);

  const auto csv =
      run_cli("compare " + a + " " + b + " --format csv --out-dir " + (dir / "cmp").string(), dir);
  REQUIRE(csv.exit_code == 0);
  CHECK(csv.out.rfind("# summary: B = ", 0) == 0);  // the summary leads
  CHECK(csv.out.find("\nkernel,shape,threads,direction,") != std::string::npos);
  CHECK(std::filesystem::exists(dir / "cmp/compare.md"));
  CHECK(sdpa::testing::slurp(dir / "cmp/compare-1.csv").rfind("B against A,", 0) == 0);
  CHECK(sdpa::testing::slurp(dir / "cmp/compare-2.csv").rfind("kernel,shape,", 0) == 0);

  const auto bad = run_cli("compare " + a + " " + (dir / "missing.json").string(), dir);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "error: " + (dir / "missing.json").string() +
                       ": cannot open result file: No such file or directory\n");
  CHECK(run_cli("compare " + a, dir).exit_code != 0);  // a comparison needs two files
}

TEST_CASE("Google Benchmark's flags after --: passed through, checked before anything runs") {
  TempDir dir;
  dir.write("timing.json", kTimingConfig);
  const std::string cfg = (dir / "timing.json").string(), out = (dir / "r.json").string();
  const auto r = run_cli(
      "run " + cfg + " -o " + out + " -- --benchmark_filter=reference --benchmark_repetitions=6",
      dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = sdpa::json::parse(sdpa::testing::slurp(out));
  const auto& records = doc["experiments"][1]["records"];
  CHECK(records[0]["skipped"] == "not run: not selected by --benchmark_filter");
  CHECK(records[1]["repetitions"] == 6);  // the flag wins over the config's 5
  CHECK(r.out.find("| naive | 1×16×16, d 8/8 | 1 | forward | not run |") != std::string::npos);
  CHECK(schema_errors(sdpa::testing::slurp(out)) == "");

  const std::string never = (dir / "never.json").string();
  const auto unknown =
      run_cli("run " + cfg + " -o " + never + " -- --benchmark_filter=x --frobnicate", dir);
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err ==
        "error: arguments after --: expected Google Benchmark flags (--benchmark_...=VALUE; list "
        "them with `sdpa-bench run CONFIG -- --help`), found \"--frobnicate\"\n");
  CHECK_FALSE(std::filesystem::exists(never));
  const auto format = run_cli("run " + cfg + " -o " + never +
                                  " -- --benchmark_out=x.csv "
                                  "--benchmark_out_format=csv",
                              dir);
  CHECK(format.exit_code == 2);
  CHECK(format.err.find("--benchmark_out_format=csv: expected json") != std::string::npos);
  CHECK(run_cli("list -- --benchmark_filter=x", dir).exit_code == 2);
}

namespace {

// `sdpa-bench time` options and the config file they stand for, written out by hand.
const char* kTimeOptions =
    "time --kernel naive,reference --heads 4/2,2 --n-q 1,3 --n-kv 16 --d 8 -j 1 "
    "--repetitions 2 --min-time 0.002 --warmup-time 0.001";
const char* kTimeConfig = R"({
  "name": "time", "seed": 0,
  "experiments": [
    {"name": "roofline", "kind": "roofline", "isa": ["scalar"], "threads": 1},
    {"name": "time-heads-4-2-d-8", "kind": "timing", "kernel": ["naive", "reference"],
     "heads_q": 4, "heads_kv": 2, "n_q": [1, 3], "n_kv": 16, "d_k": 8, "d_v": 8, "threads": 1,
     "repetitions": 2, "min_time": 0.002, "warmup_time": 0.001},
    {"name": "time-heads-2-2-d-8", "kind": "timing", "kernel": ["naive", "reference"],
     "heads_q": 2, "heads_kv": 2, "n_q": [1, 3], "n_kv": 16, "d_k": 8, "d_v": 8, "threads": 1,
     "repetitions": 2, "min_time": 0.002, "warmup_time": 0.001}
  ]
})";

// Each experiment's name and kind, and its cells' indices and values of the kind's axes (what a
// record's params hold), a line each; keys sorted, as the order of a config's keys is its own.
std::string cells_of(const std::vector<sdpa::ExperimentPlan>& plan) {
  std::string cells;
  for (const auto& e : plan)
    for (const auto& c : e.cells) {
      nlohmann::json axes = nlohmann::json::object();
      for (const auto& axis : e.kind->axes)
        if (c.params.contains(axis)) axes[axis] = nlohmann::json::parse(c.params[axis].dump());
      cells +=
          e.name + " " + e.kind->name + " " + std::to_string(c.index) + " " + axes.dump() + "\n";
    }
  return cells;
}

}  // namespace

TEST_CASE("time: the cells of the config its options stand for") {
  TempDir dir;
  const auto printed = run_cli(std::string(kTimeOptions) + " --print-config", dir);
  CAPTURE(printed.err);
  REQUIRE(printed.exit_code == 0);
  const auto from_options = sdpa::make_plan(sdpa::parse_config("printed", printed.out));
  const auto from_file = sdpa::make_plan(sdpa::parse_config("file", kTimeConfig));
  CHECK(cells_of(from_options) == cells_of(from_file));
  const std::string cells = cells_of(from_file);
  CHECK(std::count(cells.begin(), cells.end(), '\n') == 1 + 2 * 2 * 2);  // roofline, 2 x 2 x 2

  // Run: the records are those cells, the table the one `report` prints of the result file.
  const std::string out = (dir / "t.json").string();
  const auto r = run_cli(std::string(kTimeOptions) + " -o " + out, dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  const auto doc = sdpa::json::parse(sdpa::testing::slurp(out));
  CHECK(schema_errors(sdpa::testing::slurp(out)) == "");
  std::string recorded;
  for (const auto& e : doc["experiments"])
    for (const auto& rec : e["records"])
      recorded += e["name"].get<std::string>() + " " + e["kind"].get<std::string>() + " " +
                  rec["cell"].dump() + " " + nlohmann::json::parse(rec["params"].dump()).dump() +
                  "\n";
  CHECK(recorded == cells);
  CHECK(r.out == run_cli("report " + out, dir).out);
  CHECK(r.out.find("### timing: time-heads-4-2-d-8") != std::string::npos);

  // Without -o: the same table, no file left behind.
  const auto bare = run_cli(std::string(kTimeOptions), dir);
  CHECK(bare.exit_code == 0);
  CHECK(bare.out.find("### timing: time-heads-2-2-d-8") != std::string::npos);
  CHECK(bare.err.find("result file:") == std::string::npos);
}

TEST_CASE("time: the roofline measures each kernel's own roofs, its int8 dots' and fp32's") {
  TempDir dir;
  std::string kernels, isas;
  for (const char* name : {"flash@avx2", "flash-kv-int8@avx2", "flash@sse4", "blas"})
    if (const sdpa::Kernel* k = sdpa::find_kernel(name)) {
      kernels += (kernels.empty() ? "" : ",") + std::string(name);
      for (const std::string& isa : k->roof_isas())
        if (isas.find('"' + isa + '"') == std::string::npos)
          isas += (isas.empty() ? "\"" : ",\"") + isa + "\"";
    }
  if (kernels.empty()) return;  // none of them on this architecture
  const auto printed = run_cli("time --kernel " + kernels + " --print-config", dir);
  CAPTURE(printed.err);
  REQUIRE(printed.exit_code == 0);
  const auto doc = sdpa::json::parse(printed.out);
  CHECK(doc["experiments"][0]["isa"].dump() == "[" + isas + "]");
  // Alone, the int8 entry brings both of its roofs: the scores' dots and P V's fp32.
  if (sdpa::find_kernel("flash-kv-int8@avx2") &&
      sdpa::find_kernel("flash-kv-int8@avx2")->dot_isa == "avx2-int8") {
    const auto alone = run_cli("time --kernel flash-kv-int8@avx2 --print-config", dir);
    REQUIRE(alone.exit_code == 0);
    CHECK(sdpa::json::parse(alone.out)["experiments"][0]["isa"].dump() ==
          R"(["avx2-int8","avx2"])");
  }
}

TEST_CASE("time: a bad value names its option, as a config's would name its path") {
  TempDir dir;
  const auto zero = run_cli("time --kernel naive --n-kv 16,0 --print-config", dir);
  CHECK(zero.exit_code == 2);
  CHECK(zero.err ==
        "error: time: --n-kv: expected a positive integer or a non-empty list of positive "
        "integers, found number 0\n");
  const auto heads = run_cli("time --kernel flash --heads 32/6 --print-config", dir);
  CHECK(heads.exit_code == 2);
  CHECK(heads.err == "error: time: --heads: expected a multiple of heads_kv (6), found 32\n");
  CHECK(run_cli("time --n-kv 16", dir).exit_code == 2);  // --kernel is required
}
