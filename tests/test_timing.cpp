// The roofline and timing kinds run directly (no CLI): config checks, peaks that make sense
// on this machine, and timing records that keep every repetition.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "experiment_runner.hpp"
#include "peak_measure.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/peak.hpp"

namespace {

using sdpa::testing::error_of;

// Runs every cell of the config's first experiment, sharing peaks as a run would.
std::vector<sdpa::json> run_cells(const std::string& experiment,
                                  sdpa::RunShared* shared = nullptr) {
  const auto config = sdpa::parse_config(
      "t.json", R"({"name": "t", "seed": 5, "experiments": [)" + experiment + "]}");
  const auto plan = sdpa::make_plan(config);
  std::vector<sdpa::json> records;
  for (const auto& cell : plan[0].cells)
    records.push_back(plan[0].kind->run_cell({cell, config.seed, 0, 1, shared}));
  return records;
}

}  // namespace

TEST_CASE("timing: a kernel without a backward is refused for backward and both") {
  std::string with;
  for (const auto& k : sdpa::kernel_registry())
    if (k.backward) with += (with.empty() ? "\"" : ", \"") + k.name + "\"";
  const std::string advice =
      with.empty() ? " (no kernel on this machine has a backward)" : " or choose one of " + with;
  CHECK(
      error_of(
          R"({"name": "a", "kind": "timing", "kernel": "naive-unstable", "direction": "backward"})") ==
      "bad.json: /experiments/0/direction: direction \"backward\" needs a backward pass, but "
      "kernel(s) \"naive-unstable\" have none; time them \"forward\" only" +
          advice);
  CHECK(error_of(R"({"name": "a", "kind": "timing", "kernel": ["naive", "naive-unstable"],
                     "direction": ["forward", "both"]})") ==
        "bad.json: /experiments/0/direction/1: direction \"both\" needs a backward pass, but "
        "kernel(s) \"naive-unstable\" have none; time them \"forward\" only" +
            advice);
}

TEST_CASE("timing: heads_q must be a multiple of heads_kv; zero heads are refused") {
  CHECK(error_of(R"({"name": "a", "kind": "timing", "kernel": "flash", "heads_q": [8, 6],
                     "heads_kv": 4})") ==
        "bad.json: /experiments/0/heads_q/1: expected a multiple of heads_kv (4), found 6");
  CHECK(error_of(R"({"name": "a", "kind": "timing", "kernel": "flash", "heads_q": 3,
                     "heads_kv": [1, 2]})") ==
        "bad.json: /experiments/0/heads_q: expected a multiple of heads_kv (2), found 3");
  CHECK(error_of(R"({"name": "a", "kind": "timing", "kernel": "flash", "heads_kv": 0})")
            .find("/experiments/0/heads_kv") != std::string::npos);
  CHECK(error_of(R"({"name": "a", "kind": "timing", "kernel": "flash", "heads_q": 8,
                     "heads_kv": 2})") == "(accepted)");
}

TEST_CASE("timing: a grouped decode cell carries its memory roofline") {
  sdpa::RunShared shared;
  // 2 sequences x 4 query heads sharing 2 K/V heads, one causal query against 40 keys: the
  // mask aligned to the end lets it see every key.
  const auto records = run_cells(
      R"({"name": "t", "kind": "timing", "kernel": "flash", "batch": 2, "heads_q": 4,
          "heads_kv": 2, "n_q": 1, "n_kv": 40, "d_k": 8, "d_v": 4, "causal": true,
          "threads": 1, "repetitions": 3, "min_time": 0.002, "warmup_time": 0.001})",
      &shared);
  REQUIRE(records.size() == 1);
  const auto& r = records[0];
  const sdpa::Shape shape{.batch_heads = 8, .n_q = 1, .n_kv = 40, .d_k = 8, .d_v = 4, .group = 2};
  CHECK(r["benchmark_name"].get<std::string>().rfind(
            "flash/forward/bh:8/group:2/nq:1/nkv:40/dk:8/dv:4/causal:1/threads:1", 0) == 0);
  const double flops = r["flops"], bytes = r["bytes"];
  CHECK(flops == 8 * 40 * 2.0 * (8 + 4));  // every key of the cache: not halved by the mask
  // Q and O per query head, K and V once per K/V head (4 of them), fp32.
  CHECK(bytes == 4.0 * (8 * 8 + 4 * 40 * 8 + 4 * 40 * 4 + 8 * 4));
  CHECK(bytes == sdpa::forward_bytes(shape, sdpa::Mask{.causal = true}));
  CHECK(r["intensity"].get<double>() == doctest::Approx(flops / bytes));
  const double median = r["time_s"]["value"];
  CHECK(r["gbs"]["value"].get<double>() == doctest::Approx(bytes / median / 1e9));
  const double fma = r["peak"]["fma_gflops"], triad = r["peak"]["triad_gbs"];
  const double roof = r["roof_gflops"];
  CHECK(roof <= fma);
  CHECK(roof <= r["intensity"].get<double>() * triad * (1 + 1e-12));
  CHECK(roof == doctest::Approx(std::min(fma, flops / bytes * triad)));
  CHECK(r["bound"] == (flops / bytes * triad < fma ? "memory" : "compute"));
  CHECK(r["percent_of_roof"].get<double>() ==
        doctest::Approx(100 * r["gflops"]["value"].get<double>() / roof));
  CHECK(r["percent_of_roof"].get<double>() >= r["percent_of_peak"].get<double>());
  // A few KiB: within any last-level cache the machine lists.
  if (sdpa::last_level_cache_bytes())
    CHECK(r["fits_llc"] == true);
  else
    CHECK_FALSE(r.contains("fits_llc"));
}

TEST_CASE("flops: the causal mask's exact count of visible pairs") {
  // Square: row i sees i + 1 keys, n (n + 1) / 2 pairs. Decode: n_q queries at the end of a
  // cache of n_kv see n_kv - n_q + i + 1 keys each.
  CHECK(sdpa::forward_flops({.n_q = 10, .n_kv = 10, .d_k = 3, .d_v = 5},
                            sdpa::Mask{.causal = true}) == 55 * 2.0 * 8);
  CHECK(sdpa::forward_flops({.n_q = 4, .n_kv = 100, .d_k = 3, .d_v = 5},
                            sdpa::Mask{.causal = true}) == (97 + 98 + 99 + 100) * 2.0 * 8);
  CHECK(sdpa::forward_flops({.batch_heads = 3, .n_q = 4, .n_kv = 100, .d_k = 3, .d_v = 5},
                            sdpa::Mask{.causal = false}) == 3 * 400 * 2.0 * 8);
  // More queries than keys: the first rows see nothing.
  CHECK(sdpa::forward_flops({.n_q = 5, .n_kv = 2, .d_k = 1, .d_v = 1},
                            sdpa::Mask{.causal = true}) == (1 + 2) * 2.0 * 2);
}

TEST_CASE("timing: another machine's kernel validates and its cells are recorded as not run") {
  // No CPU runs both the x86 and the Arm ISAs, so some known ISA is missing here.
  std::string other;
  for (const auto& isa : sdpa::peak::known_isas())
    if (!sdpa::peak::isa_supported(isa) && other.empty()) other = "flash@" + isa;
  REQUIRE(!other.empty());
  CHECK(sdpa::kernel_elsewhere(other));
  CHECK_FALSE(sdpa::kernel_elsewhere("flash"));
  CHECK_FALSE(sdpa::kernel_elsewhere("flash@avx1024"));
  CHECK_FALSE(sdpa::kernel_elsewhere("nosuch@avx2"));
  CHECK(*sdpa::kernel_elsewhere(other) == "this CPU or build has no " + other);
  const auto records = run_cells(R"({"name": "t", "kind": "timing", "kernel": ")" + other +
                                 R"(", "n_q": 16, "n_kv": 16, "d_k": 8, "d_v": 8, "threads": 1,
                                    "direction": "both"})");
  REQUIRE(records.size() == 1);
  CHECK(records[0]["skipped"] == "not run: this CPU or build has no " + other);
  CHECK(records[0]["kernel_isa"] == other.substr(other.find('@') + 1));
  CHECK_FALSE(records[0].contains("time_s"));
  // The record schema's environment, whole: a result file with this record must validate.
  CHECK(records[0]["environment"].contains("load_average_end"));
  // Statistics need a kernel that runs here.
  CHECK(error_of(R"({"name": "a", "kind": "variance", "kernel": ")" + other + R"(", "d_k": 4})")
            .find("/experiments/0/kernel: unknown kernel \"" + other + "\"") != std::string::npos);
}

TEST_CASE("timing: a peer this build lacks validates and its cells are recorded as not run") {
  // The ggml entries exist in every build: registered where cmake/ggml.cmake built ggml, and
  // otherwise known as absent, with the reason, so configs/models.json runs in either.
  for (const char* name : {"ggml", "ggml-kv-f16", "ggml-kv-q8_0", "ggml-kv-q4_0"}) {
    CAPTURE(name);
    const auto why = sdpa::kernel_elsewhere(name);
    CHECK((sdpa::find_kernel(name) == nullptr) == why.has_value());
    const auto records = run_cells(R"({"name": "t", "kind": "timing", "kernel": ")" +
                                   std::string(name) + R"(", "heads_q": 4, "heads_kv": 2,
                                      "n_q": 1, "n_kv": 64, "d_k": 32, "d_v": 32, "threads": 1,
                                      "repetitions": 1, "min_time": 0.001})");
    REQUIRE(records.size() == 1);
    if (why) {
      CHECK(why->starts_with("this build has no " + std::string(name) + ": "));
      CHECK(why->size() > std::string("this build has no : ").size() + std::strlen(name));
      CHECK(records[0]["skipped"] == "not run: " + *why);
      CHECK(records[0]["kernel_isa"] == "");
      CHECK_FALSE(records[0].contains("time_s"));
      CHECK(records[0]["environment"].contains("load_average_end"));
      // Statistics need a kernel that runs here; the message says why this one cannot.
      CHECK(error_of(R"({"name": "a", "kind": "variance", "kernel": ")" + std::string(name) +
                     R"(", "d_k": 4})")
                .find("/experiments/0/kernel: kernel \"" + std::string(name) +
                      "\" cannot run here: " + *why) != std::string::npos);
    } else {
      CHECK(records[0].contains("time_s"));
    }
  }
}

TEST_CASE("timing and roofline: schema messages") {
  CHECK(error_of(R"({"name": "a", "kind": "timing", "kernel": "naive", "threads": "many"})") ==
        "bad.json: /experiments/0/threads: expected a thread count (a positive integer or \"all\", "
        "the run's threads) or a non-empty list of them, found string \"many\"");
  CHECK(error_of(R"({"name": "a", "kind": "timing"})") ==
        "bad.json: /experiments/0: missing required key \"kernel\"");
  CHECK(
      error_of(R"({"name": "a", "kind": "timing", "kernel": "naive", "direction": "sideways"})") ==
      "bad.json: /experiments/0/direction: expected a direction (\"forward\", \"backward\", "
      "\"both\": one forward and one backward per call) or a non-empty list of them, found "
      "string \"sideways\"");
  CHECK(error_of(R"({"name": "a", "kind": "roofline", "isa": ["avx2", "avx1024"]})") ==
        "bad.json: /experiments/0/isa/1: expected an instruction set (\"scalar\", \"sse4\", "
        "\"sse4-int8\", \"avx2\", \"avx2-int8\", \"avx-vnni\", \"avx512\", \"avx512-int8\", "
        "\"avx512-bf16\", \"avx512-vnni\", "
        "\"neon\", \"neon-dotprod\", \"sve-256\", \"sve2-128\") or a non-empty list of them, found "
        "string "
        "\"avx1024\"");
  CHECK(error_of(R"({"name": "a", "kind": "roofline", "min_time": 0})") ==
        "bad.json: /experiments/0/min_time: expected a positive number of seconds (at most 60) per "
        "repetition, found number 0");
}

TEST_CASE("roofline: positive peaks for every ISA this CPU runs, recorded for the machine") {
  sdpa::RunShared shared;
  const auto records = run_cells(
      R"({"name": "r", "kind": "roofline", "threads": 1, "repetitions": 2, "min_time": 0.01,
          "llc_multiple": 2})",
      &shared);
  // The default is every ISA the suite knows, those of other architectures included.
  REQUIRE(records.size() == sdpa::peak::known_isas().size());
  std::map<std::string, double> fma;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string isa = sdpa::peak::known_isas()[i];
    CAPTURE(isa);
    const auto& r = records[i];
    CHECK(r["supported"] == sdpa::peak::isa_supported(isa));
    if (!r["supported"].get<bool>()) continue;
    CHECK(r["fma_gflops"]["value"].get<double>() > 0);
    CHECK(r["triad_gbs"]["value"].get<double>() > 0);
    CHECK(r["fma_gflops"]["samples"].size() == 2);
    // The spread of each ceiling: the CV of its repetitions, recomputed here from the samples.
    for (const char* ceiling : {"fma_gflops", "triad_gbs"}) {
      const auto& x = r[ceiling]["samples"];
      const double a = x[0], b = x[1], mean = (a + b) / 2;
      CHECK(r[ceiling]["cv"].get<double>() ==
            doctest::Approx(std::abs(a - b) / std::sqrt(2.0) / mean));
    }
    // Past the last-level cache the OS lists; a machine that lists none records null, never a
    // guess (its footprint assumes 32 MiB).
    const auto llc = sdpa::last_level_cache_bytes();
    CHECK(r["llc_bytes"] == (llc ? sdpa::json(*llc) : sdpa::json(nullptr)));
    CHECK(r["triad_footprint_bytes"].get<double>() >= 2 * llc.value_or(32.0 * (1 << 20)));
    fma[isa] = r["fma_gflops"]["value"];
  }
  CHECK(fma.count("scalar") == 1);
  // Which peak is higher is a speed, not a fact a test can rely on under load: bench_kernels
  // reports the wide targets' peaks against the scalar loop's.
  CHECK(shared.peaks.size() == fma.size());
  CHECK(shared.peaks[0]["source"] == "roofline");
}

TEST_CASE("timing: every repetition kept, statistics and % of peak from the run's peaks") {
  sdpa::RunShared shared;
  const auto records = run_cells(
      R"({"name": "t", "kind": "timing", "kernel": "naive", "n_q": 16, "n_kv": [16, 24], "d_k": 8,
          "d_v": 4, "causal": true, "threads": 1, "repetitions": 6, "min_time": 0.002,
          "warmup_time": 0.001})",
      &shared);
  REQUIRE(records.size() == 2);
  const auto& r = records[1];
  CHECK(r["threads"] == 1);
  CHECK(r["flops"] == sdpa::forward_flops({1, 16, 24, 8, 4}, sdpa::Mask{.causal = true}));
  CHECK(r["benchmark_name"].get<std::string>().rfind(
            "naive/forward/bh:1/nq:16/nkv:24/dk:8/dv:4/causal:1/threads:1", 0) == 0);
  const auto& t = r["time_s"];
  REQUIRE(t["samples"].size() == 6);
  CHECK(t["iterations"].size() == 6);
  CHECK(t["ci95"][0].get<double>() <= t["value"].get<double>());
  CHECK(t["value"].get<double>() <= t["ci95"][1].get<double>());
  CHECK(t["ci_coverage"].get<double>() >= 0.95);  // 6 repetitions reach 1 - 2/64
  CHECK(r["noisy"] == (t["cv"].get<double>() > 0.05));
  CHECK(r["gflops"]["value"].get<double>() ==
        doctest::Approx(r["flops"].get<double>() / t["value"].get<double>() / 1e9));
  // No roofline ran first: the cell measured a quick peak for its ISA and left it for the run.
  REQUIRE(shared.peaks.size() == 1);
  CHECK(shared.peaks[0]["isa"] == "scalar");
  CHECK(shared.peaks[0]["source"] == "quick measurement by a timing cell");
  CHECK(r["peak"] == shared.peaks[0]);
  CHECK(r["percent_of_peak"].get<double>() ==
        doctest::Approx(100 * r["gflops"]["value"].get<double>() /
                        r["peak"]["fma_gflops"].get<double>()));
  for (const char* key :
       {"cpu_governor", "frequency_scaling", "affinity", "load_average_start", "load_average_end"})
    CHECK(r["environment"].contains(key));
}

TEST_CASE("timing: OpenBLAS is read against the best fp32 ISA, not a dot-product roof") {
  const auto isas = sdpa::peak::supported_isas();
  const std::string peak = sdpa::peak::roof_isa("openblas");
  const char* const dots[] = {"sse4-int8",   "avx2-int8",   "avx-vnni",    "avx512-int8",
                              "avx512-bf16", "avx512-vnni", "neon-dotprod"};
  for (const char* roof : dots) {
    CAPTURE(roof);
    CHECK(sdpa::peak::dot_product_isa(roof));
    CHECK(peak != roof);
    CHECK(sdpa::peak::roof_isa(roof) == (sdpa::peak::isa_supported(roof) ? roof : ""));
  }
  // The widest fp32 ISA this CPU runs: the last supported one but the dot-product roofs.
  std::string widest;
  for (const auto& isa : isas)
    if (std::find(std::begin(dots), std::end(dots), isa) == std::end(dots)) widest = isa;
  CHECK(peak == widest);
  CHECK_FALSE(sdpa::peak::dot_product_isa(widest));
}

TEST_CASE("timing: an @isa entry is read against its own ISA's peak, not the widest here") {
  // Peaks as a roofline would leave them, each ISA's a different number, the widest the
  // largest: a record divided by another ISA's peak shows in its percent_of_peak.
  sdpa::RunShared shared;
  const auto isas = sdpa::peak::supported_isas();
  for (std::size_t i = 0; i < isas.size(); ++i)
    for (int threads : {1, 2})
      sdpa::store_peak(shared.peaks, {{"isa", isas[i]},
                                      {"threads", threads},
                                      {"fma_gflops", 1000.0 * double(i + 1)},
                                      {"triad_gbs", 10.0},
                                      {"source", "roofline"}});
  std::vector<std::string> names;
  std::string kernels;
  for (const auto& k : sdpa::kernel_registry())
    if (k.name.find('@') != std::string::npos) {
      names.push_back(k.name);
      kernels += (kernels.empty() ? "\"" : ", \"") + k.name + "\"";
    }
  REQUIRE_FALSE(kernels.empty());
  const auto records = run_cells(R"({"name": "t", "kind": "timing", "kernel": [)" + kernels +
                                     R"(], "n_q": 32, "n_kv": 32, "d_k": 32, "d_v": 32,
                                    "threads": 1, "repetitions": 2, "min_time": 0.001,
                                    "warmup_time": 0.001})",
                                 &shared);
  REQUIRE(records.size() == names.size());  // one cell per kernel, in the list's order
  int timed = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    const std::string& name = names[i];
    CAPTURE(name);
    if (r.contains("skipped")) continue;
    ++timed;
    const sdpa::Kernel& k = *sdpa::find_kernel(name);
    // The ISA after the @, or the dot-product roof the entry names (flash-kv-int8@avx2's
    // avx2-int8): never that of another entry. This cell is no decode shape, so the int8
    // entries run fp32 tiles and read against their fp32 ISA's peak alone.
    CHECK(k.roof_isa() == (k.dot_isa.empty() ? name.substr(name.find('@') + 1) : k.dot_isa));
    const std::string own = k.fp32_isa.empty() ? k.roof_isa() : k.fp32_isa;
    REQUIRE(r["peak"].is_object());
    CHECK(r["peak"]["isa"] == own);
    CHECK_FALSE(r.contains("value_peak"));
    CHECK(r["peak"] == *sdpa::find_peak(shared.peaks, own, 1));
    CHECK(r["percent_of_peak"].get<double>() ==
          doctest::Approx(100 * r["gflops"]["value"].get<double>() /
                          (*sdpa::find_peak(shared.peaks, own, 1))["fma_gflops"].get<double>()));
  }
  CHECK(timed > 0);
  CHECK(shared.peaks.size() == 2 * isas.size());  // no quick measurement: every peak was there
  // On an AVX-512 host: flash@avx2 against AVX2's peak, not AVX-512's.
  for (std::size_t i = 0; i < records.size(); ++i)
    if (names[i] == "flash@avx2" && sdpa::peak::isa_supported("avx512"))
      CHECK(records[i]["peak"]["isa"] == "avx2");
}

TEST_CASE("timing: an int8 decode reads its scores against its dots' peak, P V against fp32's") {
  // Each ISA's peak a different number, as above, so a record divided by the wrong one shows.
  sdpa::RunShared shared;
  const auto isas = sdpa::peak::supported_isas();
  for (std::size_t i = 0; i < isas.size(); ++i)
    sdpa::store_peak(shared.peaks, {{"isa", isas[i]},
                                    {"threads", 1},
                                    {"fma_gflops", 1000.0 * double(i + 1)},
                                    {"triad_gbs", 10.0},
                                    {"source", "roofline"}});
  const auto fma = [&](const std::string& isa) {
    return (*sdpa::find_peak(shared.peaks, isa, 1))["fma_gflops"].get<double>();
  };
  int timed = 0;
  for (const auto& k : sdpa::kernel_registry()) {
    if (k.fp32_isa.empty() || k.name.find('@') == std::string::npos) continue;
    CAPTURE(k.name);
    // Two queries of a head against 48 keys, d_k 32 and d_v 16: the scores are 2/3 of the FLOPs.
    const auto records = run_cells(R"({"name": "t", "kind": "timing", "kernel": ")" + k.name +
                                       R"(", "n_q": 2, "n_kv": 48, "d_k": 32, "d_v": 16,
                                      "threads": 1, "repetitions": 2, "min_time": 0.001,
                                      "warmup_time": 0.001})",
                                   &shared);
    REQUIRE(records.size() == 1);
    const auto& r = records[0];
    REQUIRE(r.contains("time_s"));
    ++timed;
    const sdpa::Kernel::Roofs roofs = k.roofs({.n_q = 2, .n_kv = 48, .d_k = 32, .d_v = 16});
    CHECK(roofs.scores == k.roof_isa());
    CHECK(roofs.values == k.fp32_isa);
    CHECK(roofs.scores != roofs.values);
    CHECK(r["peak"]["isa"] == roofs.scores);
    CHECK(r["value_peak"]["isa"] == roofs.values);
    // Each product's FLOPs at its own peak: 2/3 at the dots', 1/3 at fp32's.
    const double peak = 1 / (2.0 / 3 / fma(roofs.scores) + 1.0 / 3 / fma(roofs.values));
    CHECK(peak < std::max(fma(roofs.scores), fma(roofs.values)));
    CHECK(peak > std::min(fma(roofs.scores), fma(roofs.values)));
    const double gflops = r["gflops"]["value"];
    CHECK(r["percent_of_peak"].get<double>() == doctest::Approx(100 * gflops / peak));
    const double intensity = r["intensity"];
    CHECK(r["roof_gflops"].get<double>() == doctest::Approx(std::min(peak, intensity * 10.0)));
    CHECK(r["bound"] == (intensity * 10.0 < peak ? "memory" : "compute"));
  }
  // Every x86-64 CPU with AVX2 has flash-kv-int8@avx2 (vpmaddubsw); an aarch64 one with the
  // dot-product extension flash-kv-int8@neon-dotprod.
  if (sdpa::peak::isa_supported("avx2")) CHECK(timed > 0);
  CHECK(shared.peaks.size() == isas.size());  // no quick measurement: every peak was there
}

TEST_CASE("hardware.json times every instruction-set entry this build registers") {
  const sdpa::Config config = sdpa::load_config("configs/hardware.json");
  std::set<std::string> timed;
  for (const auto& e : config.document["experiments"])
    if (e["kind"] == "timing")
      for (const auto& k : e["kernel"]) timed.insert(k.get<std::string>());
  for (const auto& k : sdpa::kernel_registry()) {
    CAPTURE(k.name);
    if (k.name.find('@') != std::string::npos) CHECK(timed.contains(k.name));
  }
}

TEST_CASE("timing: memory is each kernel's own formula, the peers' n_q x n_kv scores included") {
  // Eigen and OpenBLAS materialise every score of a head: at n_q = n_kv = 300 000 that is
  // 360 GB, refused before anything runs (estimated with flash's formula, such a cell used to
  // validate and die in std::bad_alloc). Flash holds one key tile per thread: the same cell fits.
  const std::string shape = R"("n_q": 300000, "n_kv": 300000, "d_k": 64, "d_v": 64})";
  for (const char* kernel : {"eigen", "blas"}) {
    CAPTURE(kernel);
    const std::string e = error_of(R"({"name": "a", "kind": "timing", "kernel": ")" +
                                   std::string(kernel) + "\", " + shape);
    CHECK(e.rfind("bad.json: /experiments/0: needs about ", 0) == 0);
    CHECK(e.find("GiB available; reduce the sizes") != std::string::npos);
  }
  CHECK(error_of(R"({"name": "a", "kind": "timing", "kernel": "flash", )" + shape) == "(accepted)");
}

TEST_CASE("timing: the memory estimate counts K and V once per K/V head") {
  // 32 query heads sharing 4 K/V heads, 2^20 keys of d 128: K and V are 4 GiB in fp32, Q and O
  // a few KiB. Counting K and V per query head made it 32 GiB (issue 40).
  sdpa::Config config;
  config.document = sdpa::json::parse(R"({"name": "m", "seed": 1, "experiments": [
    {"name": "t", "kind": "timing", "kernel": "flash", "heads_q": 32, "heads_kv": 4,
     "n_q": 1, "n_kv": 1048576, "d_k": 128, "d_v": 128}]})");
  const auto plan = sdpa::make_plan(config);
  const double bytes = plan[0].kind->memory_bytes(plan[0].cells[0].params, 1);
  const double kv = 2.0 * 4 * 1048576 * 128 * 4;
  CHECK(bytes >= kv);
  CHECK(bytes < 1.1 * kv);
}

TEST_CASE("timing: masks and score modifiers are refused with their config path") {
  const std::string head = R"({"name": "a", "kind": "timing", "kernel": "reference", )";
  const auto error = [&](const std::string& fields) { return error_of(head + fields + "}"); };
  CHECK(error(R"("window": [null, 0])") ==
        "bad.json: /experiments/0/window/1: a window of 0 keys: expected at least 1");
  CHECK(error(R"("window": {"left": -2, "right": null})") ==
        "bad.json: /experiments/0/window: the left extent -2 is below 0 (null: unbounded)");
  CHECK(error(R"("window": {"left": 3})").find("/experiments/0/window") != std::string::npos);
  CHECK(error(R"("chunk": [16, -1])") ==
        "bad.json: /experiments/0/chunk/1: the chunk length is below 0");
  CHECK(error(R"("softcap": -1)") ==
        "bad.json: /experiments/0/softcap: the soft-cap must be a "
        "positive finite number (0 for none)");
  CHECK(error(R"("heads_q": 4, "sinks": {"per_head": [0, 1, 2]})") ==
        "bad.json: /experiments/0/sinks: per_head has 3 sinks, expected one per query head "
        "(heads_q 4)");
  CHECK(error(R"("prefix": -3)") == "bad.json: /experiments/0/prefix: the prefix is below 0");
  CHECK(error(R"("window": [4, {"left": 2, "right": 1}], "chunk": 8, "softcap": 30,
                 "alibi": true, "sinks": [null, 0.5, {"per_head": [1]}])") == "(accepted)");
  // Documents and temperatures: each refusal names the value's path.
  const std::string not_positive = "a temperature is not a positive finite number";
  for (const auto& [fields, expected] : std::vector<std::pair<std::string, std::string>>{
           {R"("documents": [4, -1])",
            "/documents/1: documents of -1 tokens: expected at least 1 (0: one document)"},
           {R"("n_kv": 16, "documents": {"starts": [0, 8, 16]})",
            "/documents: a document starts at 16, past the sequence of 16 keys"},
           {R"("documents": [0, {"starts": [1, 4]}])",
            "/documents/1: the first document does not start at position 0"},
           {R"("documents": {"starts": [0, 4, 4]})",
            "/documents: document starts do not ascend (document 2)"},
           {R"("temperature": [1.5, 0])", "/temperature/1: " + not_positive},
           {R"("temperature": -2)", "/temperature: " + not_positive},
           {R"("temperature": 1e39)", "/temperature: " + not_positive}})
    CHECK(error(fields) == "bad.json: /experiments/0" + expected);
  CHECK(error(R"("documents": {"starts": []})").find("/experiments/0/documents") !=
        std::string::npos);
  CHECK(error(R"("temperature": "llama3")").find("/experiments/0/temperature") !=
        std::string::npos);
  // A cell too large to run is refused by its memory, before a document start or a row's
  // temperature is allocated for it.
  for (const char* huge : {R"("n_q": 1, "n_kv": 35184372088832, "documents": 1)",
                           R"("n_q": 35184372088832, "n_kv": 1, "temperature": "llama4")"})
    CHECK(error(huge).rfind("bad.json: /experiments/0: needs about ", 0) == 0);
  CHECK(error(R"("n_kv": 300, "documents": [0, 5, 300, {"starts": [0, 3]}],
                 "temperature": [null, 2, "llama4"])") == "(accepted)");
}

TEST_CASE("timing: a masked, modified cell counts visible pairs and its error uses its modifier") {
  // Soft-cap 0.5 on scores of about +-1, ALiBi and sinks: an error sample that ignored any of
  // them would be off by far more than rounding.
  const auto records = run_cells(R"({"name": "t", "kind": "timing", "kernel": "reference",
      "heads_q": 4, "heads_kv": 2, "n_q": 12, "n_kv": 20, "d_k": 8, "d_v": 4, "causal": true,
      "window": 5, "softcap": 0.5, "alibi": true, "sinks": {"per_head": [-1, 0, 1, 2]},
      "threads": 1, "repetitions": 2, "min_time": 0.001, "warmup_time": 0})");
  REQUIRE(records.size() == 1);
  const sdpa::json& r = records[0];
  const sdpa::Shape shape{.batch_heads = 4, .n_q = 12, .n_kv = 20, .d_k = 8, .d_v = 4, .group = 2};
  const sdpa::Mask mask{.causal = true, .window_left = 4, .window_right = 0};
  CHECK(sdpa::visible_pairs(shape, mask) == 12 * 5);
  CHECK(r["flops"] == sdpa::forward_flops(shape, mask));
  CHECK(r["benchmark_name"].get<std::string>().rfind(
            "reference/forward/bh:4/group:2/nq:12/nkv:20/dk:8/dv:4/causal:1/window:4,0/"
            "softcap:0.5/alibi/sinks/threads:1",
            0) == 0);
  REQUIRE(r["error"].is_object());
  CHECK(r["error"]["rows"] == 32);
  CHECK(r["error"]["o_rms"].get<double>() < 1e-6);
  CHECK(r["error"]["o_max"].get<double>() < 1e-6);
}

TEST_CASE("timing: a kernel that does not run a cell's mask or modifier records it as not run") {
  // ALiBi on 3 heads (slopes no ggml max_bias gives) or a soft-cap: the first kernel here that
  // refuses either. Once every kernel runs both, the path has nothing to exercise: said, not
  // counted as checked.
  const sdpa::Shape shape{.batch_heads = 3, .n_q = 8, .n_kv = 8, .d_k = 32, .d_v = 32};
  const std::vector<float> slopes = sdpa::alibi_slopes(3);
  for (const auto& [fields, mod] :
       {std::pair{std::string(R"("alibi": true)"), sdpa::ScoreMod{.alibi_slopes = slopes}},
        std::pair{std::string(R"("softcap": 2)"), sdpa::ScoreMod{.softcap = 2}}})
    for (const sdpa::Kernel& k : sdpa::kernel_registry()) {
      const std::string why = k.refusal(shape, {}, mod);
      if (why.empty() || !k.refusal(shape, {}, {}).empty()) continue;
      CAPTURE(k.name);
      const auto records = run_cells(R"({"name": "t", "kind": "timing", "kernel": ")" + k.name +
                                     R"(", "heads_q": 3, "heads_kv": 3, "n_q": 8, "n_kv": 8,
                                        "d_k": 32, "d_v": 32, "threads": 1, )" +
                                     fields + "}");
      REQUIRE(records.size() == 1);
      CHECK(records[0]["skipped"] == "not run: the kernel refuses the cell: " + why);
      CHECK(records[0]["kernel_isa"] == k.isa);
      CHECK_FALSE(records[0].contains("time_s"));
      return;
    }
  MESSAGE("no kernel of this build refuses ALiBi on 3 heads or a soft-cap: path not exercised");
}

TEST_CASE("timing: documents and a temperature reach the kernel, its counts and its name") {
  // Packed documents of 5 tokens over 12 keys (starts 0, 5, 10) under the causal mask: 33
  // visible pairs where the causal mask alone has 78. A temperature of 3 on scores of about +-1
  // changes the weights far beyond rounding: a kernel that dropped it would fail the error
  // sample, which applies it.
  const auto records = run_cells(R"({"name": "t", "kind": "timing", "kernel": "flash",
      "heads_q": 4, "heads_kv": 2, "n_q": 12, "n_kv": 12, "d_k": 8, "d_v": 4, "causal": true,
      "documents": 5, "temperature": 3, "threads": 1, "repetitions": 2, "min_time": 0.001,
      "warmup_time": 0})");
  REQUIRE(records.size() == 1);
  const sdpa::json& r = records[0];
  REQUIRE_FALSE(r.contains("skipped"));
  const sdpa::Shape shape{.batch_heads = 4, .n_q = 12, .n_kv = 12, .d_k = 8, .d_v = 4, .group = 2};
  const std::vector<std::int64_t> starts{0, 5, 10};
  const sdpa::Mask mask{.causal = true, .documents = starts};
  CHECK(sdpa::visible_pairs(shape, mask) == 15 + 15 + 3);
  CHECK(r["flops"] == sdpa::forward_flops(shape, mask));
  CHECK(r["flops"] != sdpa::forward_flops(shape, sdpa::Mask{.causal = true}));
  CHECK(r["benchmark_name"].get<std::string>().rfind(
            "flash/forward/bh:4/group:2/nq:12/nkv:12/dk:8/dv:4/causal:1/documents:5/"
            "temperature:3/threads:1",
            0) == 0);
  REQUIRE(r["error"].is_object());
  CHECK(r["error"]["o_rms"].get<double>() < 1e-5);
  CHECK(r["error"]["o_max"].get<double>() < 1e-5);

  // Given by their starts, the documents are named by them.
  const std::vector<std::int64_t> two{0, 3};
  const auto named = run_cells(R"({"name": "t", "kind": "timing", "kernel": "reference",
      "n_q": 4, "n_kv": 8, "d_k": 4, "d_v": 4, "documents": {"starts": [0, 3]},
      "temperature": "llama4", "threads": 1, "repetitions": 2, "min_time": 0.001,
      "warmup_time": 0})");
  REQUIRE(named.size() == 1);
  CHECK(named[0]["benchmark_name"].get<std::string>().find(
            "/causal:0/documents:0,3/temperature:llama4/threads:1") != std::string::npos);
  CHECK(named[0]["flops"] ==
        sdpa::forward_flops({.batch_heads = 1, .n_q = 4, .n_kv = 8, .d_k = 4, .d_v = 4},
                            sdpa::Mask{.documents = two}));
}

TEST_CASE("timing: Llama 4's temperature tuning is 1 before position 8191, then grows by log") {
  // Rows at key positions 8189 .. 8192 (the queries end at the last key), and one at 32767.
  const auto t = sdpa::llama4_temperature({.batch_heads = 1, .n_q = 4, .n_kv = 8193});
  REQUIRE(t.size() == 4);
  CHECK(t[0] == 1.0f);
  CHECK(t[1] == 1.0f);                            // position 8190: floor(8191 / 8192) = 0
  CHECK(t[2] == float(1 + 0.1 * std::log(2.0)));  // position 8191: floor(8192 / 8192) = 1
  CHECK(t[3] == float(1 + 0.1 * std::log(2.0)));
  const auto decode = sdpa::llama4_temperature({.batch_heads = 1, .n_q = 1, .n_kv = 32768});
  REQUIRE(decode.size() == 1);
  CHECK(decode[0] == float(1 + 0.1 * std::log(5.0)));
}

TEST_CASE("timing: model-masks.json times Llama 4's global layers; ggml records them not run") {
  // Llama 4 Scout: 40 query heads, 8 K/V heads, d 128 (its config.json's text_config). ggml
  // takes one scale per call: its cells with the temperature are records of why, not timings.
  const sdpa::Config config = sdpa::load_config("configs/model-masks.json");
  const auto plan = sdpa::make_plan(config);
  int tuned = 0, refused = 0;
  for (const auto& e : plan) {
    if (e.name.rfind("llama-4-scout-global", 0) != 0) continue;
    for (const auto& cell : e.cells) {
      const sdpa::json& p = cell.params;
      CAPTURE(p.dump());
      CHECK(p["heads_q"] == 40);
      CHECK(p["heads_kv"] == 8);
      CHECK(p["d_k"] == 128);
      CHECK(p["chunk"] == 0);
      CHECK(p["causal"] == true);
      if (p["temperature"] != "llama4") continue;
      ++tuned;
      if (p["kernel"] != "ggml") continue;
      const sdpa::json r = e.kind->run_cell({cell, config.seed, e.index, 1, nullptr});
      CHECK(r["benchmark_name"].get<std::string>().find("/temperature:llama4/") !=
            std::string::npos);
      REQUIRE(r.contains("skipped"));
      CHECK_FALSE(r.contains("time_s"));
      if (const sdpa::Kernel* k = sdpa::find_kernel("ggml")) {
        const sdpa::Shape shape{.batch_heads = 40,
                                .n_q = p["n_q"],
                                .n_kv = p["n_kv"],
                                .d_k = 128,
                                .d_v = 128,
                                .group = 5};
        const auto t = sdpa::llama4_temperature(shape);
        const std::string why = k->refusal(shape, {.causal = true}, {.temperature = t});
        CHECK_FALSE(why.empty());
        CHECK(r["skipped"] == "not run: the kernel refuses the cell: " + why);
        ++refused;
      }
    }
  }
  CHECK(tuned == 8);  // decode: 3 kernels x 2 cache lengths; prefill: 2 kernels
  if (!sdpa::find_kernel("ggml"))
    MESSAGE("no ggml in this build: its refusal is not exercised");
  else
    CHECK(refused == 3);
}
