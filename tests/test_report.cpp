// `report` regenerates tables, CSV and plots from result files alone: refusals name the file,
// output is byte-for-byte deterministic, CSV parses back to the same numbers.
#include <doctest/doctest.h>

#include <cstdlib>
#include <sstream>

#include "cli_runner.hpp"
#include "sdpa/escape.hpp"
#include "sdpa/report.hpp"
#include "sdpa/site.hpp"

using sdpa::json;
using sdpa::testing::run_cli;
using sdpa::testing::slurp;
using sdpa::testing::TempDir;

namespace {

const char* kConfig = R"({"name": "r", "seed": 5, "experiments": [
  {"name": "v", "kind": "variance", "d_k": [2, 8], "n_q": 4, "n_kv": 4, "trials": 20, "scale": ["none", "sqrt_dk"]},
  {"name": "e", "kind": "entropy", "d_k": [4, 16], "n_kv": 32, "n_q": 2, "trials": 3, "scale": ["none", "sqrt_dk"]},
  {"name": "g", "kind": "gradient", "d_k": [4, 16], "n_kv": 32, "n_q": 2, "trials": 3, "scale": ["none", "sqrt_dk"]}]})";

// One result file, written once for all the tests here.
std::string result_text() {
  static const std::string text = [] {
    TempDir dir;
    dir.write("c.json", kConfig);
    const auto r =
        run_cli("run " + (dir / "c.json").string() + " -o " + (dir / "r.json").string(), dir);
    REQUIRE(r.exit_code == 0);
    return slurp(dir / "r.json");
  }();
  return text;
}

std::vector<std::string> split(const std::string& line) {  // no quoted fields in these files
  std::vector<std::string> out;
  std::stringstream s(line);
  for (std::string f; std::getline(s, f, ',');) out.push_back(f);
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

}  // namespace

TEST_CASE("refusals name the file and say what is wrong; the other files are still reported") {
  TempDir dir;
  dir.write("ok.json", result_text());
  dir.write("not-result.json", R"({"hello": 1})");
  json other = json::parse(result_text());
  other["schema_version"] = 99;
  dir.write("future.json", other.dump());
  dir.write("truncated.json", result_text().substr(0, result_text().size() / 2));
  const auto r =
      run_cli("report " + (dir / "not-result.json").string() + " " +
                  (dir / "future.json").string() + " " + (dir / "truncated.json").string() + " " +
                  (dir / "missing.json").string() + " " + (dir / "ok.json").string(),
              dir);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find((dir / "not-result.json").string() +
                   ": not an sdpa-bench result file (no schema_version/experiments)") !=
        std::string::npos);
  CHECK(r.err.find(
            (dir / "future.json").string() +
            ": /schema_version: expected 1, found 99 (written by another version of sdpa-bench)") !=
        std::string::npos);
  CHECK(r.err.find((dir / "truncated.json").string() + ": not a complete JSON document") !=
        std::string::npos);
  CHECK(r.err.find((dir / "missing.json").string() + ": cannot open result file") !=
        std::string::npos);
  CHECK(r.out.find("### variance: v") != std::string::npos);  // ok.json still reported
}

TEST_CASE("tables for every kind, and byte-identical output from the same inputs") {
  TempDir dir;
  dir.write("r.json", result_text());
  const auto a = run_cli(
      "report " + (dir / "r.json").string() + " --format both --out-dir " + (dir / "a").string(),
      dir);
  const auto b = run_cli(
      "report " + (dir / "r.json").string() + " --format both --out-dir " + (dir / "b").string(),
      dir);
  REQUIRE(a.exit_code == 0);
  REQUIRE(b.exit_code == 0);
  // The index links a page per experiment, which holds its tables.
  const std::string index = slurp(dir / "a" / "README.md");
  std::string readme;
  for (const char* name : {"v", "e", "g"}) {
    CAPTURE(name);
    const std::string page = "experiments/" + std::string(name) + ".md";
    CHECK(index.find("](" + page + ")") != std::string::npos);
    readme += slurp(dir / "a" / page);
    CHECK(slurp(dir / "a" / page) == slurp(dir / "b" / page));
  }
  for (const char* title : {"### variance: v", "### entropy: e", "### gradient: g"})
    CHECK(readme.find(title) != std::string::npos);
  CHECK(index == slurp(dir / "b" / "README.md"));
  // The entropy table shows the fp16 overflow share measured in half precision beside the
  // one derived from lse (drift-tested older files, without it, keep their tables).
  CHECK(readme.find(" (measured ") != std::string::npos);
  CHECK(readme.find("measured: the fp16 share with the softmax computed in half") !=
        std::string::npos);
  for (const char* csv : {"v.csv", "e.csv", "g.csv"}) {
    CAPTURE(csv);
    CHECK(slurp(dir / "a" / "csv" / csv) == slurp(dir / "b" / "csv" / csv));
  }
}

TEST_CASE("an experiment without records is named with a note, not left out") {
  TempDir dir;
  json doc = json::parse(result_text());
  doc["experiments"][1]["records"] = json::array();  // as a run stopped before its first cell
  dir.write("r.json", sdpa::report::result_file_text(doc));
  const auto r = run_cli("report " + (dir / "r.json").string(), dir);
  REQUIRE(r.exit_code == 0);
  const auto at = r.out.find("### entropy: e\n\nNo records:");
  CHECK(at != std::string::npos);
  CHECK(r.out.find("### variance: v") < at);
  CHECK(r.out.find("### gradient: g") > at);
}

TEST_CASE("CSV is tidy and parses back to the same numbers") {
  TempDir dir;
  dir.write("r.json", result_text());
  REQUIRE(run_cli("report " + (dir / "r.json").string() + " --format csv --out-dir " +
                      dir.path.string(),
                  dir)
              .exit_code == 0);
  const json doc = json::parse(result_text());
  std::istringstream csv(slurp(dir / "csv" / "v.csv"));
  std::string line;
  std::getline(csv, line);
  const auto header = split(line);
  const auto column = [&](const std::string& name) {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  REQUIRE(column("score_variance.ci95_low") < long(header.size()));
  std::size_t row = 0;
  for (; std::getline(csv, line); ++row) {
    const auto f = split(line);
    const json& r = doc["experiments"][0]["records"][row];
    CHECK(std::stod(f[column("score_variance.value")]) ==
          r["score_variance"]["value"].get<double>());
    CHECK(std::stod(f[column("score_variance.ci95_low")]) ==
          r["score_variance"]["ci95"][0].get<double>());
    CHECK(std::stod(f[column("params.d_k")]) == r["params"]["d_k"].get<double>());
    CHECK(f[column("params.scale")] == r["params"]["scale"].get<std::string>());
  }
  CHECK(row == doc["experiments"][0]["records"].size());  // one row per record
}

TEST_CASE("several files: pages gain the machine, CSV gains machine and file columns") {
  TempDir dir;
  json other = json::parse(result_text());
  other["machine_id"] = "another-machine-4c";
  dir.write("a.json", result_text());
  dir.write("b.json", sdpa::report::result_file_text(other));
  const auto r = run_cli("report " + (dir / "a.json").string() + " " + (dir / "b.json").string() +
                             " --format both --out-dir " + (dir / "out").string(),
                         dir);
  REQUIRE(r.exit_code == 0);
  const std::string page = slurp(dir / "out" / "experiments" / "v.md");
  const auto own = page.find("\n## another-machine-4c, r run\n");
  REQUIRE(own != std::string::npos);
  CHECK(page.find("### variance: v", own) != std::string::npos);
  // The index puts the machines side by side.
  CHECK(slurp(dir / "out" / "README.md").find("another-machine-4c |") != std::string::npos);
  const std::string csv = slurp(dir / "out" / "csv" / "v.csv");
  CHECK(csv.rfind("machine_id,file,", 0) == 0);
  CHECK(csv.find("another-machine-4c," + (dir / "b.json").string()) != std::string::npos);
}

TEST_CASE("plots: gnuplot scripts with SVG and PNG; without gnuplot, a clear message and tables") {
  TempDir dir;
  dir.write("r.json", result_text());
  const auto r = run_cli(
      "report " + (dir / "r.json").string() + " --plots --out-dir " + (dir / "p").string(), dir);
  REQUIRE(r.exit_code == 0);
  for (const char* name : {"v-variance", "e-entropy", "g-jacobian", "g-participation"}) {
    CAPTURE(name);
    CHECK(std::filesystem::exists(dir / "p" / "plots" / (std::string(name) + ".gp")));
    CHECK(std::filesystem::file_size(dir / "p" / "plots" / (std::string(name) + ".svg")) > 1000);
    CHECK(std::filesystem::file_size(dir / "p" / "plots" / (std::string(name) + ".png")) > 1000);
    const std::string page = "experiments/" + std::string(name).substr(0, 1) + ".md";
    CHECK(slurp(dir / "p" / page).find("(../plots/" + std::string(name) + ".svg)") !=
          std::string::npos);
  }
  // The same with a PATH on which there is no gnuplot.
  const auto bare =
      run_cli("report " + (dir / "r.json").string() + " --plots --out-dir " + (dir / "q").string(),
              dir, "PATH=/nonexistent ");
  CHECK(bare.exit_code == 0);
  CHECK(bare.err.find("gnuplot not found") != std::string::npos);
  CHECK(bare.err.find("apt-get install gnuplot-nox") != std::string::npos);
  CHECK(std::filesystem::exists(dir / "q" / "README.md"));
  CHECK_FALSE(std::filesystem::exists(dir / "q" / "plots" / "v-variance.svg"));
}

TEST_CASE("plots: a cell not run is left out of its curve; the table keeps its row") {
  TempDir dir;
  dir.write("c.json", R"({"name": "p", "seed": 2, "experiments": [
    {"name": "tm", "kind": "timing", "kernel": ["naive", "flash"], "n_q": 16, "n_kv": [16, 32, 48], "d_k": 8, "d_v": 8, "repetitions": 2, "min_time": 0.001, "warmup_time": 0}]})");
  REQUIRE(run_cli("run " + (dir / "c.json").string() + " -o " + (dir / "a.json").string(), dir)
              .exit_code == 0);
  // flash at N = 48 as a kernel that refuses its cell records it: no statistics, a reason.
  json doc = json::parse(slurp(dir / "a.json"));
  json& records = doc["experiments"][0]["records"];
  for (json& r : records) r["bound"] = "compute";
  json& last = records.back();
  REQUIRE(last["params"]["kernel"] == "flash");
  REQUIRE(last["params"]["n_kv"] == 48);
  json skipped;
  for (const char* key : {"cell", "params", "threads", "kernel_isa", "flops", "bytes", "intensity",
                          "benchmark_name", "environment"})
    if (last.contains(key)) skipped[key] = last[key];
  skipped["skipped"] = "not run: the kernel refuses the cell: a test's reason";
  last = skipped;
  dir.write("a.json", sdpa::report::result_file_text(doc));
  const auto r = run_cli(
      "report " + (dir / "a.json").string() + " --plots --out-dir " + (dir / "p").string(), dir);
  REQUIRE(r.exit_code == 0);
  const std::string gp = slurp(dir / "p" / "plots" / "tm-throughput.gp");
  const auto flash = gp.find("$p0s1 << EOD\n");
  REQUIRE(flash != std::string::npos);
  const std::string rows = gp.substr(flash, gp.find("EOD\n", flash + 12) - flash);
  CHECK(rows.find("\n16 ") != std::string::npos);
  CHECK(rows.find("\n32 ") != std::string::npos);
  CHECK(rows.find("\n48 ") == std::string::npos);
  CHECK(slurp(dir / "p" / "experiments" / "tm.md").find("| flash | 1×16×48, d 8/8 | ") !=
        std::string::npos);
}

TEST_CASE(
    "plots: training loss curves at the smallest and largest d_k; throughput per machine side by "
    "side") {
  TempDir dir;
  dir.write("c.json", R"({"name": "p", "seed": 2, "experiments": [
    {"name": "t", "kind": "training", "d_k": [4, 8, 16], "scale": ["none", "sqrt_dk"], "steps": 20, "log_every": 5, "seeds": 2, "eval_size": 16, "batch": 8},
    {"name": "tm", "kind": "timing", "kernel": ["naive", "flash"], "n_q": 16, "n_kv": [16, 32], "d_k": 8, "d_v": 8, "repetitions": 2, "min_time": 0.001, "warmup_time": 0}]})");
  REQUIRE(run_cli("run " + (dir / "c.json").string() + " -o " + (dir / "a.json").string(), dir)
              .exit_code == 0);
  // Both compute-bound; each machine's kernels on roofs of their own (the first's two kernels
  // on different ones, as kernels of two precisions are), the second's ten times higher.
  json mine = json::parse(slurp(dir / "a.json"));
  for (auto& r : mine["experiments"][1]["records"]) {
    r["bound"] = "compute";
    r["roof_gflops"] = r["params"]["kernel"] == "flash" ? 400.0 : 100.0;
  }
  dir.write("a.json", sdpa::report::result_file_text(mine));
  json other = mine;
  other["machine_id"] = "another-machine-4c";
  for (auto& r : other["experiments"][1]["records"]) r["roof_gflops"] = 1e4;  // its scale
  dir.write("b.json", sdpa::report::result_file_text(other));
  // A third machine whose cells are all memory-bound: read in GB/s against its triad.
  json third = mine;
  third["machine_id"] = "memory-machine-2c";
  for (auto& r : third["experiments"][1]["records"]) {
    r["bound"] = "memory";
    r["peak"]["triad_gbs"] = 25.0;
  }
  dir.write("c.json", sdpa::report::result_file_text(third));
  const auto r =
      run_cli("report " + (dir / "a.json").string() + " " + (dir / "b.json").string() + " " +
                  (dir / "c.json").string() + " --plots --out-dir " + (dir / "p").string(),
              dir);
  REQUIRE(r.exit_code == 0);
  const std::string machine = mine["machine_id"];
  const auto plots = dir / "p" / "plots";
  // Loss against step: two panels, d_k = 4 and 16, a line per scale scheme in each.
  const std::string loss = slurp(plots / (machine + "-t-loss.gp"));
  CHECK(loss.find("set multiplot layout 1,2") != std::string::npos);
  CHECK(loss.find("set title 'd_k = 4'") != std::string::npos);
  CHECK(loss.find("set title 'd_k = 16'") != std::string::npos);
  CHECK(loss.find("set title 'd_k = 8'") == std::string::npos);
  CHECK(loss.find("title 'c = none'") != std::string::npos);
  CHECK(loss.find("title 'c = sqrt_dk'") != std::string::npos);
  CHECK(std::filesystem::file_size(plots / (machine + "-t-loss.png")) > 1000);
  // Throughput: one panel per compute-bound machine, both on the y range of the higher roof.
  const std::string side = slurp(plots / "tm-throughput-machines.gp");
  CHECK(side.find("set multiplot layout 1,2") != std::string::npos);
  CHECK(side.find("set title '" + machine + "'") != std::string::npos);
  CHECK(side.find("set title 'another-machine-4c'") != std::string::npos);
  const std::string common = "set yrange [0:11000.000000]";
  const auto first = side.find(common);
  REQUIRE(first != std::string::npos);
  CHECK(side.find(common, side.find("set title 'another-machine-4c'")) != std::string::npos);
  CHECK(std::filesystem::file_size(plots / "tm-throughput-machines.svg") > 1000);
  // Each kernel against its own roof: no line at a peak of another kernel's precision.
  const std::string own = slurp(plots / (machine + "-tm-throughput.gp"));
  const auto rows_of = [&](const std::string& text, const std::string& block) {
    const auto at = text.find(block + " << EOD\n");
    REQUIRE(at != std::string::npos);
    return text.substr(at, text.find("EOD\n", at + block.size() + 8) - at);
  };
  CHECK(rows_of(own, "$p0s0").find(" 100.000000\n") != std::string::npos);  // naive
  CHECK(rows_of(own, "$p0s0").find("400.000000") == std::string::npos);
  CHECK(rows_of(own, "$p0s1").find(" 400.000000\n") != std::string::npos);  // flash
  CHECK(own.find("using 1:6 with lines dt 3 lw 2 lc 1 title 'naive: roof") != std::string::npos);
  CHECK(own.find("using 1:6 with lines dt 3 lw 2 lc 2 title 'flash: roof") != std::string::npos);
  // The memory-bound machine's cells in GB/s, with its triad as the one roof.
  CHECK_FALSE(std::filesystem::exists(plots / "memory-machine-2c-tm-throughput.gp"));
  const std::string memory = slurp(plots / "memory-machine-2c-tm-bandwidth.gp");
  CHECK(memory.find("set ylabel 'GB/s") != std::string::npos);
  CHECK(memory.find(", 25.0 with lines dt 2 lw 2 lc 'black' title 'memory roof") !=
        std::string::npos);
  // Every plot's caption names what it shows and the machine and commit it came from.
  const std::string page = slurp(dir / "p" / "experiments" / "tm.md");
  CHECK(page.find("(../plots/tm-throughput-machines.svg)") != std::string::npos);
  const std::string commit = mine["suite"]["git_commit"];
  CHECK(page.find("*GFLOP/s against N (keys per query), one line per kernel") != std::string::npos);
  CHECK(page.find("From memory-machine-2c, sdpa-bench " + commit) != std::string::npos);
}

TEST_CASE("the site: machines side by side, a page per experiment, untrusted text escaped") {
  TempDir dir;
  json doc = json::parse(result_text());
  doc["machine"]["cpu_model"] = "<script>alert(1)</script> & co";
  doc["suite"]["git_commit"] = "0123456789ab-dirty";
  // sysfs's sizes in KiB or MiB, instruction caches left out; any other text kept, escaped.
  doc["machine"]["caches"] = {{{"level", 1}, {"type", "Data"}, {"size", "48K"}},
                              {{"level", 1}, {"type", "Instruction"}, {"size", "64K"}},
                              {{"level", 2}, {"type", "Unified"}, {"size", "2048K"}},
                              {{"level", 3}, {"type", "Unified"}, {"size", "<b>32M"}}};
  dir.write("a.json", sdpa::report::result_file_text(doc));
  json other = json::parse(result_text());
  other["machine_id"] = "another-machine-4c";
  other["machine"]["caches"] = json::array();
  dir.write("b.json", sdpa::report::result_file_text(other));
  const std::string args = (dir / "a.json").string() + " " + (dir / "b.json").string();
  REQUIRE(run_cli("report " + args + " --html " + (dir / "s").string(), dir).exit_code == 0);
  REQUIRE(run_cli("report " + args + " --html " + (dir / "t").string(), dir).exit_code == 0);
  const std::string index = slurp(dir / "s" / "index.html");
  CHECK(index.find("<th class=\"n\">another-machine-4c</th>") != std::string::npos);
  CHECK(index.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; co") != std::string::npos);
  CHECK(index.find("<script") == std::string::npos);
  CHECK(index.find("0123456789ab-dirty <strong>dirty tree</strong>") != std::string::npos);
  CHECK(index.find(
            "<td class=\"n\">L1d 48 KiB, L2 2 MiB, L3 &lt;b&gt;32M</td><td class=\"n\">-</td>") !=
        std::string::npos);
  CHECK(index.find("href=\"experiments/v.html\"") != std::string::npos);
  // Each page links to the copies of the files it was built from.
  const std::string page = slurp(dir / "s" / "experiments" / "v.html");
  CHECK(page.find("href=\"../index.html\"") != std::string::npos);
  CHECK(page.find("<img src=\"../plots/") != std::string::npos);
  for (const auto& link : {std::string("data/another-machine-4c-b.json")}) {
    CHECK(page.find("href=\"../" + link + "\"") != std::string::npos);
    CHECK(slurp(dir / "s" / link) == sdpa::report::result_file_text(other));
  }
  // Byte for byte the same from the same files.
  std::size_t files = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir / "s")) {
    if (!f.is_regular_file()) continue;
    ++files;
    CAPTURE(f.path().string());
    CHECK(slurp(f.path()) == slurp(dir / "t" / std::filesystem::relative(f.path(), dir / "s")));
  }
  CHECK(files > 8);
}

// Found by fuzz_report: a result file's path with ")" and "<script>" ended the Markdown link to
// it early, and the rest of the path was raw HTML. Both writers link to it as one URL token.
TEST_CASE("the site: a link to a file with a hostile path stays one link") {
  const std::string path = "m`touch p<script>wnp)](x).json";
  sdpa::site::Page page{"index", "t", {}};
  page.sections.push_back({.heading = "", .links = {{path, path}}});
  const std::string md = sdpa::site::markdown(page), html = sdpa::site::html(page);
  CHECK(md.find("](" + sdpa::url_path(path) + ")\n") != std::string::npos);
  CHECK(md.find("<script") == std::string::npos);
  CHECK(html.find("href=\"" + sdpa::url_path(path) + "\"") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
}

TEST_CASE("a timing record's bound says when it read the last-level cache, not memory") {
  using sdpa::report::timing_bound;
  json r = {{"bound", "memory"}, {"fits_llc", true}};
  CHECK(timing_bound(r) == "memory, fits LLC");
  r["fits_llc"] = false;
  CHECK(timing_bound(r) == "memory");
  r.erase("fits_llc");  // a record from before fits_llc
  CHECK(timing_bound(r) == "memory");
  CHECK(timing_bound({{"bound", "compute"}, {"fits_llc", true}}) == "compute");
  CHECK(timing_bound({{"bound", nullptr}}) == "-");
  CHECK(timing_bound(json::object()) == "-");
}

TEST_CASE("csv and plots need an output folder") {
  TempDir dir;
  dir.write("r.json", result_text());
  const auto r = run_cli("report " + (dir / "r.json").string() + " --format csv", dir);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: report: --format csv|both and --plots write files; give --out-dir DIR\n");
}

TEST_CASE("a timing row names its documents and temperature, and older records name neither") {
  json p = json::parse(R"({"batch_heads": 1, "heads_q": 40, "heads_kv": 8, "n_q": 1,
                           "n_kv": 32768, "d_k": 128, "d_v": 128, "causal": true})");
  const std::string plain = "40/8×1×32768, d 128/128, causal";
  CHECK(sdpa::report::timing_shape(p) == plain);
  p["documents"] = 0, p["temperature"] = nullptr;  // the defaults: no mask, no modifier
  CHECK(sdpa::report::timing_shape(p) == plain);
  p["documents"] = 512, p["temperature"] = "llama4";
  CHECK(sdpa::report::timing_shape(p) == plain + ", documents of 512, temperature llama4");
  p["documents"] = json::parse(R"({"starts": [0, 3]})"), p["temperature"] = 1.5;
  CHECK(sdpa::report::timing_shape(p) == plain + ", documents at [0,3], temperature 1.5");
}
