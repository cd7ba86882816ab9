// Bad input, tried as a hostile user would (issue 17): each class of input that crashed, hung,
// gave a wrong number or left a file behind is now refused with exit code 2, a message that
// names the file, JSON path or option, what was expected and what was found, and nothing
// written. Each case asserts all three.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>

#include <set>
#include <tuple>

#include "cli_runner.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/journal.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/npy.hpp"
#include "sdpa/report.hpp"

using namespace sdpa::testing;  // the CLI runner and file helpers of cli_runner.hpp
namespace fs = std::filesystem;

namespace {

const char* kTiny = R"({"name": "tiny", "seed": 7, "experiments": [
  {"name": "v", "kind": "variance", "d_k": [2, 4], "n_q": 3, "n_kv": 3, "trials": 5}]})";

const char* kTiming = R"({"name": "timing", "seed": 1, "experiments": [
  {"name": "t", "kind": "timing", "kernel": "naive", "n_q": 8, "n_kv": 8, "d_k": 4, "d_v": 4,
   "threads": 1, "repetitions": 2, "min_time": 0.001, "warmup_time": 0}]})";

// The names in a folder: what a refused command must leave unchanged.
std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& f : fs::recursive_directory_iterator(dir))
    names.insert(fs::relative(f.path(), dir).string());
  return names;
}

// The result file of `config` run in `dir`: good.json.
std::string result_of(const TempDir& dir, const char* config) {
  dir.write("good-config.json", config);
  const std::string good = (dir / "good.json").string();
  REQUIRE(run_cli("run " + (dir / "good-config.json").string() + " -o " + good, dir).exit_code ==
          0);
  return good;
}

// `[[[...]]]` nested `depth` levels deep.
std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

struct Refused {
  const TempDir& dir;
  std::set<std::string> before = files_in(dir.path);
  // Runs `args` (under a time limit, so a hang fails rather than stalls the suite) and
  // checks exit code 2, the message and that the folder is unchanged.
  void check(const std::string& args, const std::string& message) const {
    CAPTURE(args);
    const auto r = run_cli(args, dir, "timeout 60 ");
    CHECK(r.exit_code == 2);
    CHECK(r.err == "error: " + message + "\n");
    CHECK(files_in(dir.path) == before);
  }
};

}  // namespace

TEST_CASE("class 1: nesting 70 000 levels deep and -j 100000 are refused, not crashes") {
  TempDir dir;
  const std::string deep = (dir / "deep.json").string(), cfg = (dir / "cfg.json").string();
  dir.write("deep.json", nested(70000));
  dir.write("cfg.json", R"({"name": "t", "seed": 1, "experiments": [{"name": "v", "kind":
    "variance", "d_k": )" + nested(70000) +
                            "}]}");
  dir.write("tiny.json", kTiny);
  const std::string tiny = (dir / "tiny.json").string(), out = (dir / "r.json").string();
  // A result file with a deep value where a record has a field.
  REQUIRE(run_cli("run " + tiny + " -o " + out, dir).exit_code == 0);
  auto doc = sdpa::json::parse(slurp(out));
  doc["experiments"][0]["records"][1]["extra"] = "DEEP";
  std::string text = doc.dump();
  text.replace(text.find("\"DEEP\""), 6, nested(70000));
  dir.write("deep-result.json", text);
  fs::remove(out);

  const Refused refused{dir};
  const std::string too_deep =
      ": expected at most 64 levels of lists and objects nested in each other, found more";
  refused.check("validate " + deep, deep + ": /0/0/0/0/0/0/0/0/..." + too_deep);
  refused.check("run " + cfg + " -o " + out, cfg + ": /experiments/0/d_k/0/0/0/0/0/..." + too_deep);
  refused.check("report " + (dir / "deep-result.json").string(),
                (dir / "deep-result.json").string() + ": /experiments/0/records/1/extra/0/0/0/..." +
                    too_deep);
  refused.check("run " + tiny + " -o " + out + " -j 100000",
                "-j,--threads: expected an integer from 1 to 1024, found \"100000\"");
  refused.check("attend --q q.npy --k k.npy --v v.npy --out-dir o -j 100000",
                "-j,--threads: expected an integer from 1 to 1024, found \"100000\"");
}

TEST_CASE("describing a found value and finding deep nesting take no recursion") {
  const auto deep = sdpa::json::parse(nested(100000));
  CHECK(sdpa::describe_found(deep) ==
        "list " + std::string(57, '[') + "...");  // the first 57 characters
  CHECK(sdpa::describe_found(sdpa::json::parse(R"({"a": [1, "x", null], "b": {}})")) ==
        R"(object {"a":[1,"x",null],"b":{}})");
  CHECK(sdpa::nesting_problem(sdpa::json::parse(nested(64))) == "");
  CHECK(sdpa::nesting_problem(sdpa::json::parse(R"({"a": [[1, )" + nested(63) + "]]}")) ==
        "/a/0/1/0/0/0/0/0/...: expected at most 64 levels of lists and objects nested in each "
        "other, found more");
  CHECK_NOTHROW(sdpa::parse_json_text(nested(64)));
  CHECK_THROWS_AS(sdpa::parse_json_text(nested(65)), sdpa::JsonTextError);
}

TEST_CASE("class 2: FIFOs and devices are refused by type, and times have a ceiling") {
  TempDir dir;
  dir.write("timing.json", kTiming);
  const std::string fifo = (dir / "fifo.json").string(), cfg = (dir / "timing.json").string(),
                    out = (dir / "r.json").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const Refused refused{dir};
  refused.check("validate " + fifo, fifo + ": cannot read config: it is a FIFO, expected a file");
  refused.check("report " + fifo,
                fifo + ": cannot read result file: it is a FIFO, expected a file");
  refused.check("validate /dev/zero",
                "/dev/zero: cannot read config: it is a character device, expected a file");
  refused.check("attend --q " + fifo + " --k k.npy --v v.npy --out-dir " + (dir / "o").string(),
                fifo + ": cannot read array: it is a FIFO, expected a .npy file");
  refused.check("run " + cfg + " -o " + out + " -- --benchmark_min_time=1e308",
                "--benchmark_min_time: expected a number in (0, 60], found \"1e308\"");
  refused.check("run " + cfg + " -o " + out + " -- --benchmark_min_warmup_time=inf",
                "--benchmark_min_warmup_time: expected a number in [0, 60], found \"inf\"");
}

TEST_CASE("class 3: Google Benchmark's flags are checked before anything runs") {
  TempDir dir;
  dir.write("timing.json", kTiming);
  const std::string run =
      "run " + (dir / "timing.json").string() + " -o " + (dir / "r.json").string() + " -- ";
  const Refused refused{dir};
  for (const std::string n : {"-5", "0", "2.5", "10001"})
    refused.check(
        run + "--benchmark_repetitions=" + n,
        "--benchmark_repetitions: expected an integer from 1 to 10000, found \"" + n + "\"");
  refused.check(run + "'--benchmark_filter=['",
                "--benchmark_filter: expected a regular expression (POSIX extended, as Google "
                "Benchmark reads it; Unexpected character within '[...]' in regular "
                "expression), found \"[\"");
  refused.check(run + "--benchmark_filter=",
                "--benchmark_filter: expected a regular expression, "
                "found \"\"");
  refused.check(run + "--benchmark_enable_random_interleaving=maybe",
                "--benchmark_enable_random_interleaving: expected true or false, found \"maybe\"");
  refused.check(run + "--benchmark_time_unit=h",
                "--benchmark_time_unit: expected one of ns, us, ms, s, found \"h\"");
  refused.check(run + "--benchmark_list_tests",
                "--benchmark_list_tests: not for `run`: it lists benchmarks instead of running "
                "them, and every cell would be recorded as not run; `sdpa-bench validate CONFIG` "
                "counts the cells");
}

TEST_CASE("class 5: values whose scores leave fp32's range are refused before running") {
  TempDir dir;
  auto config = [&](const std::string& name, const std::string& fields) {
    dir.write(name, R"({"name": "x", "seed": 1, "experiments": [{"name": "e", )" + fields + "}]}");
    return (dir / name).string();
  };
  const std::string scale = config("scale.json", R"("kind": "variance", "d_k": 4, "scale": 1e40)");
  const std::string mean = config("mean.json", R"("kind": "variance", "d_k": 4, "mean_q": 1e39,
    "scale": "none")");
  const std::string std = config("std.json", R"("kind": "variance", "d_k": 4, "std_k": 1e200,
    "scale": "none")");
  const std::string entropy =
      config("entropy.json", R"("kind": "entropy", "d_k": 4, "scale": [1, 1e160])");
  const std::string product = config("product.json", R"("kind": "variance", "d_k": [64, 128],
    "std_q": 1e19, "std_k": 1e19, "scale": "none")");
  const std::string tiny = config("tiny.json", R"("kind": "entropy", "d_k": 4, "std_q": 1e-20,
    "std_k": 1e-20, "scale": "none")");
  const std::string out = " -o " + (dir / "r.json").string();
  const Refused refused{dir};
  refused.check("run " + scale + out,
                scale +
                    ": /experiments/0/scale: scale 1e+40 at d_k 4, outside fp32's normal range "
                    "[1.18e-38, 3.4e+38], where the kernels compute");
  refused.check("validate " + mean, mean +
                                        ": /experiments/0/mean_q: inputs reach about 1e+39 (|mean| "
                                        "+ 10 sd); the kernels compute in fp32 (largest 3.4e+38): "
                                        "reduce the means, standard deviations or scale");
  refused.check("validate " + std, std +
                                       ": /experiments/0/std_k: inputs reach about 1e+201 (|mean| "
                                       "+ 10 sd); the kernels compute in fp32 (largest 3.4e+38): "
                                       "reduce the means, standard deviations or scale");
  refused.check("run " + entropy + out,
                entropy +
                    ": /experiments/0/scale/1: scale 1e+160 at d_k 4, outside fp32's normal range "
                    "[1.18e-38, 3.4e+38], where the kernels compute");
  refused.check(
      "validate " + product,
      product +
          ": /experiments/0: scores c q.k can reach about 6.4e+41 (d_k 64 times the largest "
          "entries 1e+20 and 1e+20, scale 1); the kernels compute in fp32 (largest 3.4e+38): "
          "reduce the means, standard deviations or scale (and 1 more cell(s))");
  refused.check("validate " + tiny,
                tiny +
                    ": /experiments/0: entries of about 1e-20 and 1e-20 (scale 1) make products "
                    "of about 1e-40, below fp32's full precision (2^-102 = 1.97e-31); the kernels "
                    "compute in fp32 (largest 3.4e+38): increase the standard deviations or the "
                    "scale");
}

TEST_CASE(
    "class 5: a soft-cap or sink beyond fp32's range is refused by every kind that takes one") {
  TempDir dir;
  const std::string soft_cap = "the soft-cap must be a positive finite number (0 for none)";
  const std::string sink = "a sink is NaN or +inf (-inf is a sink that takes nothing)";
  int n = 0;
  for (
      const auto& [fields, message] : std::vector<std::pair<std::string, std::string>>{
          {R"("kind": "entropy", "d_k": 4, "scale": 1, "softcap": [30, 1e39])",
           "/softcap/1: " + soft_cap},
          {R"("kind": "entropy", "d_k": 4, "scale": 1, "sink": 1e39)", "/sink: " + sink},
          {R"("kind": "gradient", "d_k": 4, "scale": 1, "softcap": 1e39)", "/softcap: " + soft_cap},
          {R"("kind": "gradient", "d_k": 4, "scale": 1, "sink": ["none", 1e39])",
           "/sink/1: " + sink},
          {R"("kind": "stability", "d_k": 8, "scale": "none", "softcap": 1e39)",
           "/softcap: " + soft_cap},
          {R"("kind": "timing", "kernel": "flash", "softcap": 1e39)", "/softcap: " + soft_cap},
          {R"("kind": "timing", "kernel": "flash", "heads_q": 2, "sinks": {"per_head": [0, 1e39]})",
           "/sinks: " + sink}}) {
    const std::string name = "c" + std::to_string(n++) + ".json";
    dir.write(name, R"({"name": "x", "seed": 1, "experiments": [{"name": "e", )" + fields + "}]}");
    const std::string config = (dir / name).string();
    const Refused refused{dir};
    refused.check("run " + config + " -o " + (dir / "r.json").string(),
                  config + ": /experiments/0" + message);
  }
}

namespace {

void write_array(const TempDir& dir, const std::string& name,
                 const std::vector<std::int64_t>& shape, float fill, float special = 0,
                 std::size_t at = std::size_t(-1)) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  sdpa::npy::Array a{shape, std::vector<float>(std::size_t(n), fill)};
  for (std::size_t i = 0; i < a.data.size(); ++i) a.data[i] = fill * float(1 + i % 3);
  if (at < a.data.size()) a.data[at] = special;
  sdpa::npy::write((dir / name).string(), a);
}

}  // namespace

TEST_CASE("class 6: attend refuses d_k = 0, non-finite inputs or scale, overflow and bad dO") {
  TempDir dir;
  write_array(dir, "q.npy", {3, 4}, 0.5f);
  write_array(dir, "k.npy", {5, 4}, 0.25f);
  write_array(dir, "v.npy", {5, 2}, 1.0f);
  write_array(dir, "q0.npy", {3, 0}, 0);
  write_array(dir, "k0.npy", {5, 0}, 0);
  write_array(dir, "qnan.npy", {3, 4}, 0.5f, std::nanf(""), 6);
  write_array(dir, "big.npy", {5, 4}, 1e38f);
  write_array(dir, "do.npy", {3, 3}, 1.0f);
  write_array(dir, "huge.npy", {3, 4}, 1e38f);
  write_array(dir, "k1.npy", {5, 4}, 1.0f);
  write_array(dir, "k2.npy", {2, 4}, 0.25f);
  write_array(dir, "v2.npy", {2, 2}, 1.0f);
  auto path = [&](const char* name) { return (dir / name).string(); };
  const std::string kv =
      " --k " + path("k.npy") + " --v " + path("v.npy") + " --out-dir " + path("o");
  const Refused refused{dir};
  refused.check("attend --q " + path("q0.npy") + " --k " + path("k0.npy") + " --v " +
                    path("v.npy") + " --out-dir " + path("o"),
                path("q0.npy") +
                    ": expected a shape without zero dimensions (attention needs a query, a key "
                    "and d >= 1), found (3, 0)");
  for (const char* bad : {"nan", "inf", "-inf"})
    refused.check("attend --q " + path("q.npy") + kv + " --scale=" + bad,
                  std::string("--scale: expected a finite number, found \"") + bad + "\"");
  refused.check("attend --q " + path("q.npy") + kv + " --scale 1e308",
                "--scale: expected 0 or a magnitude in fp32's normal range [1.18e-38, 3.4e+38] "
                "(the kernels compute in fp32), found 1e+308");
  refused.check("attend --q " + path("qnan.npy") + kv,
                path("qnan.npy") + ": expected finite values, found nan at row 1, column 2");
  refused.check("attend --q " + path("q.npy") + " --k " + path("big.npy") + " --v " +
                    path("v.npy") + " --out-dir " + path("o"),
                "the inputs' magnitudes overflow fp32 before the scale applies: q.k reaches "
                "1.8e+39 (largest |Q| 1.5, |K| 3e+38, |V| 3, d_k 4), above fp32's largest "
                "3.4e+38; o.npy would hold non-finite values; reduce the inputs");
  // Issue 40: Q up to 3e38 with a scale of 1.2e-38 (c q.k about 43) overflows in naive's q.k,
  // before the scale; causal with more queries than keys leaves rows that see no key.
  refused.check("attend --q " + path("huge.npy") + " --k " + path("k1.npy") + " --v " +
                    path("v.npy") + " --out-dir " + path("o") + " --scale 1.2e-38 --kernel naive",
                "the inputs' magnitudes overflow fp32 before the scale applies: q.k reaches "
                "3.6e+39 (largest |Q| 3e+38, |K| 3, |V| 3, d_k 4), above fp32's largest "
                "3.4e+38; o.npy would hold non-finite values; reduce the inputs");
  refused.check("attend --causal --q " + path("q.npy") + " --k " + path("k2.npy") + " --v " +
                    path("v2.npy") + " --out-dir " + path("o"),
                "the mask (--causal, --window, --chunk, --prefix, --documents) leaves 1 of 3 "
                "query rows of each head without a key (first row 0, last 0; n_q 3, n_kv 2): "
                "their lse would be -inf; widen the mask or give --sinks");
  refused.check("attend --q " + path("q.npy") + kv + " --grad-out " + path("do.npy"),
                path("do.npy") + ": expected dO shaped like the output (3, 2), found (3, 3)");
}

TEST_CASE("class 7: usage errors exit 2 and name the option or subcommand") {
  TempDir dir;
  dir.write("tiny.json", kTiny);
  const std::string tiny = (dir / "tiny.json").string(), more =
                                                             "\nRun with --help for more "
                                                             "information.";
  const Refused refused{dir};
  refused.check("run " + tiny + " -j 0",
                "-j,--threads: expected an integer from 1 to 1024, found \"0\"");
  refused.check("run " + tiny + " -j two",
                "-j,--threads: expected an integer from 1 to 1024, found \"two\"");
  refused.check("frob",
                "unknown subcommand \"frob\"; expected one of run, time, validate, list, info, "
                "report, claims, compare, merge, slurm, attend" +
                    more);
  refused.check("rnu " + tiny, "unknown subcommand \"rnu\" (did you mean \"run\"?)" + more);
  refused.check("",
                "expected a subcommand (run, time, validate, list, info, report, claims, compare, "
                "merge, slurm, attend), found none" +
                    more);
  refused.check("run", "run: missing config" + more);
  refused.check("run " + tiny + " extra", "run: unexpected argument(s): extra" + more);
  refused.check("run " + tiny + " -o", "run: --output: expected a value, found none" + more);
  refused.check("compare " + tiny, "compare: results: expected at least 2 values, found 1" + more);
  refused.check("report " + tiny + " --format xml",
                "--format: expected one of \"md\", \"csv\", \"both\", found \"xml\"");
}

TEST_CASE("class 8: output paths are checked before any work") {
  TempDir dir;
  dir.write("tiny.json", kTiny);
  dir.write("timing.json", kTiming);
  fs::create_directories(dir / "folder");
  const std::string tiny = (dir / "tiny.json").string(), out = (dir / "r.json").string();
  const std::string long_name = (dir / (std::string(300, 'a') + ".json")).string();
  const Refused refused{dir};
  refused.check("run " + tiny + " -o " + (dir / "folder").string(),
                "-o " + (dir / "folder").string() + ": it is a directory, expected a regular file");
  refused.check("run " + tiny + " -o /proc/sdpa-bench-test/r.json",
                "-o /proc/sdpa-bench-test/r.json: cannot create files in /proc: No such file or "
                "directory");
  refused.check("run " + tiny + " -o " + long_name,
                "-o " + long_name +
                    ": its name is 305 bytes long, expected at most 247 (the file system's limit, "
                    "less the temporary file's 8)");
  refused.check("run " + tiny + " -o " + tiny,
                "-o " + tiny + ": it is the config (" + tiny + "); choose another file");
  refused.check("run " + (dir / "timing.json").string() + " -o " + out + " --benchmark-json " + out,
                "-o " + out + ": it is Google Benchmark's JSON (" + out + "); choose another file");
  refused.check("claims " + tiny + " -o " + tiny,
                "-o " + tiny + ": it is an input (" + tiny + "); choose another file");
  refused.check("report " + tiny + " --out-dir " + tiny,
                "--out-dir " + tiny + ": it is a file, expected a folder");
  refused.check("compare " + tiny + " " + tiny + " --out-dir " + tiny,
                "--out-dir " + tiny + ": it is a file, expected a folder");
  refused.check("attend --q " + (dir / "folder/o.npy").string() + " --k k --v v --out-dir " +
                    (dir / "folder").string() + " --kernel naive",
                "--out-dir " + (dir / "folder").string() + ": " + (dir / "folder/o.npy").string() +
                    ": it is --q (" + (dir / "folder/o.npy").string() + "); choose another file");

  // A folder written before (csv/ and README.md exist) is one to write again.
  REQUIRE(run_cli("run " + tiny + " -o " + out, dir).exit_code == 0);
  const std::string report = "report " + out + " --format both --out-dir " + (dir / "rep").string();
  REQUIRE(run_cli(report, dir).exit_code == 0);
  const auto again = run_cli(report, dir);
  CAPTURE(again.err);
  CHECK(again.exit_code == 0);
  CHECK(fs::exists(dir / "rep/csv/v.csv"));
}

namespace {

// A finished journal of a config's run (kTiny's), built from that run's own records.
struct JournalFixture {
  TempDir dir;
  std::string text, config = (dir / "tiny.json").string(), result = (dir / "r.json").string(),
                    journal = result + ".journal";
  sdpa::json records;

  explicit JournalFixture(std::string config_text = kTiny) : text(std::move(config_text)) {
    dir.write("tiny.json", text);
    REQUIRE(run_cli("run " + config + " -o " + (dir / "ref.json").string(), dir).exit_code == 0);
    records = sdpa::json::parse(slurp(dir / "ref.json"))["experiments"][0]["records"];
    fs::remove(dir / "ref.json");
  }

  std::string header(const std::string& threads, const std::string& started_at) const {
    return R"({"sdpa_bench_journal": 2, "config_path": ")" + config + R"(", "config_sha256": ")" +
           sdpa::sha256_hex(text) + R"(", "seed": 7, "result": ")" + result +
           R"(", "started_at": )" + started_at + R"(, "threads": )" + threads + "}\n";
  }
  std::string line(std::int64_t cell, const sdpa::json& record) const {
    return sdpa::journal_line({0, cell, 0.01, record}, sdpa::sha256_hex(text)) + "\n";
  }
};

}  // namespace

TEST_CASE("class 9: journals are checked against the config, line by line") {
  JournalFixture f;
  const std::string resume = "run --resume " + f.journal;
  auto check = [&](const std::string& journal_text, const std::string& message) {
    f.dir.write("r.json.journal", journal_text);
    const Refused refused{f.dir};
    refused.check(resume, message);
    CHECK(slurp(f.journal) == journal_text);  // kept as it was
    fs::remove(f.journal);
  };
  const std::string ok_header = f.header("1", "\"2026-01-01T00:00:00Z\"");
  check(f.header("0", "\"2026-01-01T00:00:00Z\""),
        f.journal +
            ":1: corrupt journal line: /threads: expected a thread count from 1 to 1024 "
            "(results do not depend on it), found number 0");
  check(f.header("null", "\"2026-01-01T00:00:00Z\""),
        f.journal +
            ":1: corrupt journal line: /threads: expected a thread count from 1 to 1024 "
            "(results do not depend on it), found null");
  check(f.header("1", "\"yesterday\""),
        f.journal +
            ":1: corrupt journal line: /started_at: expected a UTC time such as "
            "\"2026-01-31T12:00:00Z\", found string \"yesterday\"");
  // Another cell's record under this cell's index, with a valid checksum.
  check(ok_header + f.line(0, f.records[0]) + f.line(1, f.records[0]) + f.line(0, f.records[0]),
        f.journal +
            ":3: corrupt journal line: its record is not that of cell 1 of experiment 0 "
            "(its cell index or parameters differ from the plan's)");
  // An edited value: the checksum no longer matches.
  std::string edited = f.line(1, f.records[1]);
  edited.replace(edited.find("\"seconds\":0.01"), 14, "\"seconds\":0.02");
  check(ok_header + f.line(0, f.records[0]) + edited + f.line(0, f.records[0]),
        f.journal +
            ":3: corrupt journal line: /sha256: the checksum does not match the line's "
            "contents (edited or damaged)");
  // A journal of the previous format.
  std::string v1 = ok_header;
  v1.replace(v1.find("\"sdpa_bench_journal\": 2"), 23, "\"sdpa_bench_journal\": 1");
  check(v1, f.journal +
                ":1: corrupt journal line: /sdpa_bench_journal: expected journal version "
                "2, found number 1 (written by another version of sdpa-bench: remove the "
                "journal to start afresh)");

  // A whole journal of correct lines resumes to the records of an uninterrupted run.
  f.dir.write("r.json.journal", ok_header + f.line(1, f.records[1]));
  const auto r = run_cli(resume, f.dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(sdpa::json::parse(slurp(f.result))["experiments"][0]["records"] == f.records);
}

TEST_CASE(
    "class 9: a journal's roofline record is typed and in range: its peak is measured again") {
  // A run measures each peak once more at its end, on the peak's threads: a journal's record of
  // 100 000 threads (checksum and all) is refused, not started. Whether it measured a peak is a
  // boolean, not anything JSON can say (nlohmann's type error escaped the runner: exit 1).
  JournalFixture f(R"({"name": "roof", "seed": 7, "experiments": [{"name": "r",
    "kind": "roofline", "isa": "scalar", "threads": 1, "repetitions": 1, "min_time": 0.001,
    "llc_multiple": 2}]})");
  const std::string header = f.header("1", "\"2026-01-01T00:00:00Z\"");
  const std::string threads = "its peak: /threads: expected a thread count from 1 to 1024, found ";
  const std::string supported = "its /supported: expected a boolean, found ";
  for (const auto& [field, value, message] :
       {std::tuple{"threads", sdpa::json(100000), threads + "number 100000"},
        std::tuple{"threads", sdpa::json("1"), threads + "string \"1\""},
        std::tuple{"threads", sdpa::json(true), threads + "boolean true"},
        std::tuple{"threads", sdpa::json(1.5), threads + "number 1.5"},
        std::tuple{"supported", sdpa::json("yes"), supported + "string \"yes\""},
        std::tuple{"supported", sdpa::json(1), supported + "number 1"},
        std::tuple{"supported", sdpa::json(nullptr), supported + "null"}}) {
    sdpa::json record = f.records[0];
    record[field] = value;
    const std::string journal = header + f.line(0, record);
    f.dir.write("r.json.journal", journal);
    const auto refused = run_cli("run --resume " + f.journal, f.dir, "timeout 60 ");
    CAPTURE(refused.err);
    CHECK(refused.exit_code == 2);  // after "resuming ...: 1 of 1 cells done"
    CHECK(refused.err.find("\nerror: " + f.journal + ":2: corrupt journal line: " + message +
                           "\n") != std::string::npos);
    CHECK(slurp(f.journal) == journal);
    CHECK(!fs::exists(f.result));
    fs::remove(f.journal);
  }
  f.dir.write("r.json.journal", header + f.line(0, f.records[0]));
  const auto r = run_cli("run --resume " + f.journal, f.dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  const auto peak = sdpa::json::parse(slurp(f.result))["machine"]["peak"][0];
  CHECK(peak.at("first").at("fma_gflops") == f.records[0]["fma_gflops"]["value"]);
  CHECK(peak.at("recheck").at("fma_gflops") > 0);

  // A timing cell's own quick peak is in no roofline record: its record's copy restores it.
  JournalFixture t(R"({"name": "t", "seed": 7, "experiments": [{"name": "t", "kind": "timing",
    "kernel": "naive", "n_q": 4, "n_kv": 4, "d_k": 4, "d_v": 4, "threads": 1, "repetitions": 2,
    "min_time": 0.001, "warmup_time": 0}]})");
  sdpa::json journaled = t.records[0];  // as a journal has it: the copy before its recheck
  for (const char* key : {"first", "recheck"}) journaled["peak"].erase(key);
  journaled["peak"]["fma_gflops"] = t.records[0]["peak"]["first"]["fma_gflops"];
  journaled["peak"]["triad_gbs"] = t.records[0]["peak"]["first"]["triad_gbs"];
  t.dir.write("r.json.journal", t.header("1", "\"2026-01-01T00:00:00Z\"") + t.line(0, journaled));
  // A copy of another thread count than its record's is refused; one from another machine's
  // recheck (an ISA this build cannot measure) is kept as it was measured, not crashed on.
  sdpa::json foreign = journaled;
  foreign["peak"]["threads"] = 2;
  t.dir.write("r.json.journal", t.header("1", "\"2026-01-01T00:00:00Z\"") + t.line(0, foreign));
  const auto other = run_cli("run --resume " + t.journal, t.dir, "timeout 60 ");
  CHECK(other.exit_code == 2);
  CHECK(other.err.find("\nerror: " + t.journal +
                       ":2: corrupt journal line: its /peak/threads: expected the record's "
                       "/threads\n") != std::string::npos);
  foreign = journaled;
  foreign["value_peak"] = journaled["peak"];
  foreign["value_peak"]["isa"] = "sve2-128";
  foreign["value_peak"]["first"] = {{"fma_gflops", 1}, {"triad_gbs", 1}};
  t.dir.write("r.json.journal", t.header("1", "\"2026-01-01T00:00:00Z\"") + t.line(0, foreign));
  const auto kept = run_cli("run --resume " + t.journal, t.dir, "timeout 60 ");
  CAPTURE(kept.err);
  CHECK(kept.exit_code == 0);
  const auto kept_doc = sdpa::json::parse(slurp(t.result));
  CHECK(kept_doc["machine"]["peak"].size() == 2);
  CHECK(!kept_doc["experiments"][0]["records"][0].contains("value_peak"));  // naive: one ISA
  fs::remove(t.result);
  t.dir.write("r.json.journal", t.header("1", "\"2026-01-01T00:00:00Z\"") + t.line(0, journaled));
  const auto timed = run_cli("run --resume " + t.journal, t.dir);
  CAPTURE(timed.err);
  REQUIRE(timed.exit_code == 0);
  const auto doc = sdpa::json::parse(slurp(t.result));
  sdpa::json copy = doc["experiments"][0]["records"][0].at("peak");
  CHECK(doc["machine"].at("peak") == sdpa::json::array({copy}));
  CHECK(copy.at("first") == sdpa::json{{"fma_gflops", journaled["peak"]["fma_gflops"]},
                                       {"triad_gbs", journaled["peak"]["triad_gbs"]}});
  CHECK(copy.at("recheck").at("fma_gflops") > 0);
  // Its % of peak derived again against the better of the two measurements.
  const auto& rec = doc["experiments"][0]["records"][0];
  CHECK(rec.at("percent_of_peak").get<double>() ==
        doctest::Approx(100 * rec["gflops"]["value"].get<double>() /
                        copy["fma_gflops"].get<double>()));
}

TEST_CASE("class 9: a live run's journal is locked; a second run is told it is alive") {
  TempDir dir;
  // The first run holds after computing its only cell until it is killed (experiments/
  // runner.cpp, SDPA_TEST_HOLD), its journal open and locked: alive however slow the others.
  dir.write("held.json", R"({"name": "held", "seed": 1, "experiments": [{"name": "v",
    "kind": "variance", "d_k": 8, "n_q": 8, "n_kv": 8, "scale": "none", "trials": 4}]})");
  const std::string config = (dir / "held.json").string(), result = (dir / "r.json").string(),
                    journal = result + ".journal";
  const auto child =
      spawn_cli({"run", config, "-j", "1", "-o", result}, dir, {}, {"SDPA_TEST_HOLD=0:2"});
  REQUIRE(wait_for_text(child.err, "sdpa-bench: held after computing cell 0", child));
  const std::string header = slurp(journal);
  const auto second = run_cli({"run", config, "-o", result}, dir);
  const auto resumed = run_cli({"run", "--resume", journal}, dir);
  const bool still_running = ::kill(child.pid, 0) == 0 && !fs::exists(result);
  ::kill(child.pid, SIGKILL);
  wait_cli(child);
  REQUIRE(still_running);
  CHECK(second.exit_code == 2);
  CHECK(second.err == "error: " + journal + ": another run of " + result +
                          " is writing this journal now (it holds its lock); wait for it to "
                          "finish or stop it, or give this run another -o\n");
  CHECK(resumed.exit_code == 2);
  CHECK(resumed.err == "error: " + journal +
                           ": another run is writing this journal now (it holds its lock); wait "
                           "for it to finish or stop it, or give this run another -o\n");
  CHECK(slurp(journal).rfind(header, 0) == 0);  // neither run touched it
  // Once the first run is gone, its lock is too: the journal can be resumed (which the tests
  // of test_resume.cpp do).
  CHECK_FALSE(sdpa::journal_is_live(journal));
  CHECK_NOTHROW(sdpa::JournalWriter::reopen(journal));
}

TEST_CASE("class 10: duplicate keys, empty values and library messages") {
  TempDir dir;
  dir.write("dup.json", R"({"name": "t", "seed": 1, "experiments": [{"name": "v",
    "kind": "variance", "d_k": 2, "trials": 3, "d_k": 4}]})");
  dir.write("tiny.json", kTiny);
  const std::string dup = (dir / "dup.json").string(), tiny = (dir / "tiny.json").string();
  const Refused refused{dir};
  refused.check("validate " + dup, dup +
                                       ": /experiments/0/d_k: duplicate key \"d_k\" (each key may "
                                       "appear once in an object; the last would silently win)");
  refused.check("run " + tiny + " -o ''", "run: --output: expected a value, found an empty string");
  refused.check("run " + tiny + " --benchmark-json ''",
                "run: --benchmark-json: expected a value, found an empty string");
  refused.check("claims " + tiny + " -o ''",
                "claims: --output: expected a value, found an empty string");
  refused.check("attend --q q --k k --v v --out-dir ''",
                "attend: --out-dir: expected a value, found an empty string");
}

TEST_CASE("class 10: result files with no data, an unknown kind or impossible times") {
  TempDir dir;
  const std::string good = result_of(dir, kTiming);
  const auto doc = sdpa::json::parse(slurp(good));
  REQUIRE(doc["experiments"][0]["records"].size() == 1);
  auto edited = [&](const std::string& name, auto edit) {
    auto d = doc;
    edit(d);
    dir.write(name, d.dump());
    return (dir / name).string();
  };
  const auto none = edited("none.json", [](auto& d) { d["experiments"] = sdpa::json::array(); });
  const auto empty =
      edited("empty.json", [](auto& d) { d["experiments"][0]["records"] = sdpa::json::array(); });
  const auto bogus = edited("bogus.json", [](auto& d) { d["experiments"][0]["kind"] = "bogus"; });
  const auto negative = edited("negative.json", [](auto& d) {
    d["experiments"][0]["records"][0]["time_s"]["value"] = -8e-6;
  });
  const auto denormal = edited("denormal.json", [](auto& d) {
    d["experiments"][0]["records"][0]["time_s"]["samples"][0] = 1e-310;
  });
  const Refused refused{dir};
  const std::string out = " --out-dir " + (dir / "out").string();
  for (const std::string& cmd : {std::string("report "), std::string("report") + out + " "}) {
    refused.check(cmd + none, none + ": /experiments: expected at least one experiment, found []");
    refused.check(cmd + empty, empty +
                                   ": /experiments: expected at least one record, found none "
                                   "in 1 experiment(s) (no data)");
    CAPTURE(cmd);
    const auto r = run_cli(cmd + bogus, dir, "timeout 60 ");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(bogus + ": /experiments/0/kind: expected one of ") != std::string::npos);
    CHECK(r.err.find("timing") != std::string::npos);
    CHECK(r.err.find("found \"bogus\"") != std::string::npos);
    CHECK(files_in(dir.path) == refused.before);
  }
  refused.check("compare " + good + " " + negative,
                negative +
                    ": /experiments/0/records/0/time_s/value: expected seconds > 0 (a positive "
                    "normal number), found -8e-06");
  refused.check("compare " + denormal + " " + good,
                denormal +
                    ": /experiments/0/records/0/time_s/samples/0: expected seconds > 0 (a "
                    "positive normal number), found 1e-310");
  refused.check("claims " + empty, empty +
                                       ": /experiments: expected at least one record, found "
                                       "none in 1 experiment(s) (no data)");
}

// Issue 40: result files from other machines are untrusted. Names that try to run a command
// in a plot script or leave the output folder are drawn, tabulated and written escaped.
TEST_CASE("class 11: hostile names in a result file run nothing and stay inside --out-dir") {
  TempDir dir;
  const std::string good = result_of(dir, kTiny);
  const auto doc = sdpa::json::parse(slurp(good));
  const std::string canary = (dir / "pwned").string();
  const std::vector<std::string> names = {
      "x\n!touch " + canary + "\n",
      "x'\nsystem \"touch " + canary + "\"\n'",
      "../../../escape/evil",
      "`touch " + canary + "` $(touch " + canary + ") <b>|</b> [l](http://x)",
      std::string(5000, 'n'),
      std::string("nul\0!touch ", 11) + canary};
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    CAPTURE(sdpa::visible(name.substr(0, 60)));
    auto d = doc;
    d["experiments"][0]["name"] = name;
    for (auto& r : d["experiments"][0]["records"]) r["params"]["scale"] = name;
    const std::string file = (dir / ("hostile" + std::to_string(i) + ".json")).string();
    dir.write(fs::path(file).filename(), sdpa::report::result_file_text(d));
    // A folder with a quote in its name too: gnuplot ran through sh, quoted for gnuplot.
    const fs::path out = dir / "deep" / "it's" / ("out" + std::to_string(i));
    const auto before = files_in(dir.path);
    const auto r = run_cli("report " + file + " --plots --format both --out-dir " +
                               sdpa::shell_quoted(out.string()) + " --html " +
                               sdpa::shell_quoted((out / "site").string()),
                           dir, "timeout 120 ");
    CAPTURE(r.err);
    CHECK(r.exit_code == 0);
    CHECK_FALSE(fs::exists(canary));
    // Everything new is --out-dir, a folder on its way or under it.
    const std::string inside = fs::relative(out, dir.path).string();
    for (const auto& f : files_in(dir.path))
      if (!before.contains(f)) CHECK((f.starts_with(inside) || inside.starts_with(f + "/")));
    CHECK_FALSE(fs::exists(dir / "escape"));
    const std::string csv = slurp(out / "csv" / (sdpa::safe_file_name(name) + ".csv"));
    CHECK(csv.find(sdpa::csv_field(name)) != std::string::npos);
    const std::string stem = sdpa::safe_file_name(name + "-variance");
    const std::string gp = slurp(out / "plots" / (stem + ".gp"));
    CHECK(gp.find("set title " + sdpa::gnuplot_quoted(name) + " noenhanced\n") !=
          std::string::npos);
    CHECK(gp.find(sdpa::gnuplot_quoted("c = " + name).substr(1, 60)) != std::string::npos);
    CHECK(fs::file_size(out / "plots" / (stem + ".svg")) > 1000);
    const std::string page = slurp(out / "experiments" / (sdpa::safe_file_name(name) + ".md"));
    CHECK(page.find("### variance: " + sdpa::markdown_text(name)) != std::string::npos);
    CHECK(page.find("(../plots/" + stem + ".svg)") != std::string::npos);
    const std::string html =
        slurp(out / "site" / "experiments" / (sdpa::safe_file_name(name) + ".html"));
    CHECK(html.find("<h1>" + sdpa::html_text(name) + "</h1>") != std::string::npos);
    CHECK(html.find("<img src=\"../plots/" + stem + ".svg\"") != std::string::npos);
  }
}

// The same through a timing experiment: its name titles the plots and each record's kernel
// parameter a series.
TEST_CASE("class 11: a timing experiment's name and kernel run nothing in its plots") {
  TempDir dir;
  const std::string good = result_of(dir, R"({"name": "timing", "seed": 1, "experiments": [
    {"name": "t", "kind": "timing", "kernel": "naive", "n_q": 8, "n_kv": [8, 16], "d_k": 4,
     "d_v": 4, "threads": 1, "repetitions": 2, "min_time": 0.001, "warmup_time": 0}]})");
  auto doc = sdpa::json::parse(slurp(good));
  const std::string canary = (dir / "pwned").string();
  const std::string name = "t\n!touch " + canary + "\n";
  const std::string kernel = "k'\nsystem \"touch " + canary + "\"\n'`touch " + canary + "`";
  doc["experiments"][0]["name"] = name;
  for (auto& r : doc["experiments"][0]["records"]) r["params"]["kernel"] = kernel;
  dir.write("hostile.json", sdpa::report::result_file_text(doc));
  const fs::path out = dir / "out";
  const auto r = run_cli("report " + (dir / "hostile.json").string() +
                             " --plots --format both --out-dir " + out.string(),
                         dir, "timeout 120 ");
  CAPTURE(r.err);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(fs::exists(canary));
  // The plot is of throughput or of bandwidth, as the cells fall against this host's roof (a
  // sanitizer build measures a lower peak): whichever was written names both strings.
  int plots = 0;
  for (const char* what : {"-throughput", "-bandwidth"}) {
    const std::string stem = sdpa::safe_file_name(name + what);
    if (!fs::exists(out / "plots" / (stem + ".gp"))) continue;
    ++plots;
    CAPTURE(stem);
    const std::string gp = slurp(out / "plots" / (stem + ".gp"));
    CHECK(gp.find("set title " + sdpa::gnuplot_quoted(name) + " noenhanced\n") !=
          std::string::npos);
    CHECK(gp.find(sdpa::gnuplot_quoted(kernel).substr(1, 40)) != std::string::npos);
    CHECK(fs::file_size(out / "plots" / (stem + ".svg")) > 1000);
  }
  CHECK(plots >= 1);
}

TEST_CASE("class 11: gnuplot failing is an error naming the plot") {
  TempDir dir;
  const std::string good = result_of(dir, kTiny);
  // A gnuplot that fails, first on PATH.
  fs::create_directories(dir / "bin");
  dir.write("bin/gnuplot", "#!/bin/sh\necho 'gnuplot: broken' >&2\nexit 3\n");
  fs::permissions(dir / "bin" / "gnuplot", fs::perms(0755));
  const fs::path out = dir / "it's out";
  const auto r =
      run_cli("report " + good + " --plots --out-dir " + sdpa::shell_quoted(out.string()), dir,
              "PATH=" + (dir / "bin").string() + ":$PATH ");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("error: report --plots: gnuplot failed on " +
                   (out / "plots" / "v-variance.gp").string() +
                   " (exit code 3): the plot v-variance is not rendered") != std::string::npos);
}

TEST_CASE("class 12: report, compare and claims refuse an edited result file by name") {
  TempDir dir;
  const std::string good = result_of(dir, kTiny);
  const std::string text = slurp(good);
  REQUIRE(text.find("\"contents_sha256\"") != std::string::npos);
  // A value edited (the seed), the checksum left as it was; and the checksum removed.
  std::string edited = text;
  const auto seed = edited.find("\"seed\": 7");
  REQUIRE(seed != std::string::npos);
  edited.replace(seed, 9, "\"seed\": 8");
  dir.write("edited.json", edited);
  auto doc = sdpa::json::parse(text);
  doc.erase("contents_sha256");
  dir.write("unsealed.json", doc.dump(1));
  const std::string e = (dir / "edited.json").string(), u = (dir / "unsealed.json").string();
  const std::string tail =
      ": edited after it was written (or damaged); read it anyway with --allow-edited, which "
      "marks it edited in every output";
  const Refused refused{dir};
  refused.check("report " + e, e + ": /contents_sha256: does not match the file's contents" + tail);
  refused.check("report " + u, u + ": /contents_sha256: missing: the file has no checksum" + tail);
  refused.check("compare " + good + " " + e,
                e + ": /contents_sha256: does not match the file's contents" + tail);
  refused.check("claims " + e, e + ": /contents_sha256: does not match the file's contents" + tail);
  // Read anyway: marked in the tables, the index, the CSV and the plots.
  const fs::path out = dir / "out";
  const auto r = run_cli(
      "report --allow-edited " + e + " --format both --plots --out-dir " + out.string(), dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string readme = slurp(out / "README.md");
  CHECK(readme.find("| `" + e + "` (edited) |") != std::string::npos);
  CHECK(slurp(out / "experiments" / "v.md").find("### variance: v [edited]") != std::string::npos);
  const std::string csv = slurp(out / "csv" / "v.csv");
  CHECK(csv.starts_with("edited,"));
  CHECK(csv.find("\ntrue,") != std::string::npos);
  CHECK(slurp(out / "plots" / "v-variance.gp").find("set title 'v [edited]'") != std::string::npos);
  const auto c = run_cli("compare --allow-edited " + good + " " + e, dir);
  CHECK(c.exit_code == 0);
  CHECK(c.out.find(e + " (edited) against " + good) != std::string::npos);
}

// Issue 40: every JSON type error carries its path. Null (how a non-finite number is stored), a
// string or a list where a number belongs: exit 2, the message names the file and the JSON
// pointer, never the JSON library's bare "type must be number, but is null".
TEST_CASE("class 14: null, a string or a list for a number is named by its file and JSON path") {
  TempDir dir;
  const std::string good = result_of(dir, kTiming);
  const auto doc = sdpa::json::parse(slurp(good));
  const std::vector<sdpa::json> values = {nullptr, "0.5", sdpa::json::array({0.5})};
  for (const std::string pointer :
       {"/experiments/0/records/0/time_s/value", "/experiments/0/records/0/time_s/ci95/1",
        "/experiments/0/records/0/threads", "/duration_s"})
    for (const auto& value : values)
      for (const std::string& command :
           {std::string("report"), "report --html " + (dir / "site").string(), "compare " + good}) {
        auto bad = doc;
        bad[sdpa::json::json_pointer(pointer)] = value;
        dir.write("bad.json", sdpa::report::result_file_text(bad));
        const std::string file = (dir / "bad.json").string();
        const auto r = run_cli(command + " " + file, dir, "timeout 60 ");
        CAPTURE(command);
        CAPTURE(pointer);
        CAPTURE(value.dump());
        CAPTURE(r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.err.find("error: " + file + ": " + pointer + ": expected ") != std::string::npos);
        CHECK(r.err.find(value.is_null()     ? "found null"
                         : value.is_string() ? "found string \"0.5\""
                                             : "found list [0.5]") != std::string::npos);
        CHECK(r.err.find("json.exception") == std::string::npos);
        CHECK_FALSE(fs::exists(dir / "site"));
      }
}

TEST_CASE("class 13: sizes whose products overflow 64 bits are refused at validation") {
  TempDir dir;
  dir.write("heads.json", R"({"name": "t", "seed": 1, "experiments": [
    {"name": "t", "kind": "timing", "kernel": "naive", "n_q": 8, "n_kv": 8, "d_k": 4, "d_v": 4,
     "batch_heads": 4611686018427387905, "batch": 4, "repetitions": 2, "min_time": 0.001,
     "warmup_time": 0}]})");
  dir.write("seeds.json", R"({"name": "s", "seed": 1, "experiments": [
    {"name": "s", "kind": "training", "d_k": 4, "steps": 20, "log_every": 5,
     "seeds": 4611686018427387904, "eval_size": 16, "batch": 8}]})");
  const std::string heads = (dir / "heads.json").string(), seeds = (dir / "seeds.json").string();
  const Refused refused{dir};
  refused.check("validate " + heads,
                heads +
                    ": /experiments/0: batch_heads 4611686018427387905 x batch 4 x heads_q 1 x "
                    "n_q 8 x n_kv 8 x d_k 4 overflows a 64-bit integer: expected a product of at "
                    "most 9223372036854775807 (2^63 - 1); reduce the sizes");
  refused.check("validate " + seeds,
                seeds +
                    ": /experiments/0: cells 2 x seeds 4611686018427387904 x steps 20 overflows a "
                    "64-bit integer: expected a product of at most 9223372036854775807 (2^63 - "
                    "1); reduce the sizes");
  // The issue's stability config: 2^62 seeds passed validate and ended in std::bad_alloc.
  dir.write("stability.json", R"({"name": "s", "seed": 1, "experiments": [
    {"name": "s", "kind": "stability", "d_k": 8, "d_model": 8, "d_ff": 16,
     "learning_rates": [0.001, 0.03, 3], "steps": 30, "log_every": 10,
     "seeds": 4611686018427387904, "eval_size": 32, "batch": 16}]})");
  const std::string stability = (dir / "stability.json").string();
  for (const std::string& command :
       {"validate " + stability, "run " + stability + " -o " + (dir / "s-out.json").string()}) {
    const auto r = run_cli(command, dir, "timeout 60 ");
    CAPTURE(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.starts_with("error: " + stability + ": /experiments/0: cells "));
    CHECK(r.err.find(" x seeds 4611686018427387904 x steps 30 overflows a 64-bit integer") !=
          std::string::npos);
    CHECK_FALSE(fs::exists(dir / "s-out.json"));
  }
}

TEST_CASE("class 13: a count above its maximum is told the maximum") {
  // A journal's /shard/count of 100001 read "expected an integer >= 1, found number 100001".
  const sdpa::JsonSchema schema(R"({"type": "object", "properties": {"count":
    {"type": "integer", "minimum": 1, "maximum": 100000}}})");
  const auto problems = schema.problems(sdpa::json::parse(R"({"count": 100001})"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "/count: expected an integer >= 1, at most 100000, found number 100001");
}
