// compare and the timing/roofline report tables, on result documents built by hand: matching,
// verdicts, records without a match, configs that differ, reproducibility findings.
#include <doctest/doctest.h>

#include <algorithm>

#include "sdpa/compare.hpp"

using sdpa::json;

namespace {

json timing_record(const std::string& kernel, int n_q, const std::vector<double>& samples,
                   bool noisy = false) {
  return {{"cell", 0},
          {"params",
           {{"kernel", kernel},
            {"direction", "forward"},
            {"causal", false},
            {"threads", 1},
            {"batch_heads", 1},
            {"n_q", n_q},
            {"n_kv", n_q},
            {"d_k", 8},
            {"d_v", 8}}},
          {"threads", 1},
          {"time_s",
           {{"value", samples[0]},
            {"ci95", {samples[0], samples[0]}},
            {"predicted", nullptr},
            {"theory", "none"},
            {"cv", 0.01},
            {"samples", samples}}},
          {"gflops",
           {{"value", 1.0}, {"ci95", {1.0, 1.0}}, {"predicted", nullptr}, {"theory", "none"}}},
          {"percent_of_peak", 12.5},
          {"noisy", noisy}};
}

json variance_record(double value) {
  return {{"cell", 0}, {"params", {{"d_k", 2}}}, {"score_variance", {{"value", value}}}};
}

json result(const std::string& sha, const json& timing, const json& variance) {
  return {
      {"config", {{"sha256", sha}}},
      {"seed", 7},
      {"machine",
       {{"peak",
         json::array(
             {{{"isa", "scalar"}, {"threads", 1}, {"fma_gflops", 8.0}, {"triad_gbs", 20.0}}})}}},
      {"experiments",
       json::array({{{"name", "v"},
                     {"kind", "variance"},
                     {"params", {{"name", "v"}, {"description", "d"}, {"trials", 10}}},
                     {"records", variance}},
                    {{"name", "t"},
                     {"kind", "timing"},
                     {"params", json::object()},
                     {"records", timing}}})}};
}

const std::vector<double> kSlow = {10, 11, 12, 10.5, 11.5}, kFast = {5, 5.5, 6, 5.2, 5.8};
const std::string kSha(64, 'a'), kOtherSha(64, 'b');

const sdpa::report::Table& find(const std::vector<sdpa::report::Table>& tables,
                                const std::string& start) {
  for (const auto& t : tables)
    if (t.title.rfind(start, 0) == 0) return t;
  FAIL("no table titled " << start);
  return tables.front();
}

}  // namespace

TEST_CASE("timing cells are matched by their parameters; the rest listed") {
  const json a =
      result(kSha, {timing_record("naive", 64, kSlow), timing_record("reference", 64, kSlow)},
             json::array());
  const json b = result(
      kSha, {timing_record("naive", 64, kFast), timing_record("naive", 128, kFast)}, json::array());
  const auto tables = sdpa::compare::tables({{"a.json", a}, {"b.json", b}});

  const auto& timing = find(tables, "timing: B = b.json against A = a.json");
  REQUIRE(timing.rows.size() == 1);
  const auto& row = timing.rows[0];
  CHECK(row[0] == "naive");
  CHECK(row[1] == "1×64×64, d 8/8");
  CHECK(row[6].rfind("0.5 [", 0) == 0);  // time B / A: median 5.5 / median 11, below 1 as faster
  CHECK(row[7] == "25");                 // U of A: each of its 5 times above each of B's 5
  CHECK(row[8] == "0.007937 (exact)");   // 2 / C(10, 5)
  CHECK(row[9] == "**faster**");
  CHECK(row[10] == "12.5 %");
  CHECK(row[12] == "-");

  const auto& unmatched = find(tables, "timing cells without a match");
  REQUIRE(unmatched.rows.size() == 2);
  CHECK(unmatched.rows[0] ==
        std::vector<std::string>{"a.json", "reference", "1×64×64, d 8/8", "1", "forward",
                                 "no cell with the same parameters in b.json"});
  CHECK(unmatched.rows[1][0] == "b.json");
  CHECK(unmatched.rows[1][2] == "1×128×128, d 8/8");
}

TEST_CASE("verdicts: slower, no difference, too few repetitions, settings that differ") {
  // B's config has another SHA-256; its timing experiment has B's settings.
  auto verdict = [](const std::vector<double>& x, const std::vector<double>& y, bool noisy = false,
                    const json& b_settings = json::object()) {
    const json a = result(kSha, json::array({timing_record("naive", 8, x)}), json::array());
    json b = result(kOtherSha, json::array({timing_record("naive", 8, y, noisy)}), json::array());
    b["experiments"][1]["params"] = b_settings;
    return find(sdpa::compare::tables({{"a.json", a}, {"b.json", b}}), "timing:").rows.at(0);
  };
  CHECK(verdict(kFast, kSlow)[9] == "**slower**");
  CHECK(verdict(kSlow, {10.2, 11.2, 11.9, 10.6, 11.4})[9] == "no significant difference");
  const auto few = verdict({1, 2, 3}, kSlow);
  CHECK(few[9] == "no verdict: A has 3 repetition(s), the U test needs 5 per side");
  CHECK(few[8] == "-");
  // Another config, the same settings (an axis's own values and the description aside).
  CHECK(verdict(kSlow, kFast, true, {{"description", "reworded"}, {"n_q", {8, 16}}})[14] ==
        "noisy B");  // after A and B % roof
  // 3 and 3.0 are one value, as in the cells' keys.
  json a_settings = result(kSha, json::array({timing_record("naive", 8, kSlow)}), json::array());
  a_settings["experiments"][1]["params"] = {{"repetitions", 3}};
  json b_settings =
      result(kOtherSha, json::array({timing_record("naive", 8, kFast)}), json::array());
  b_settings["experiments"][1]["params"] = {{"repetitions", 3.0}};
  CHECK(find(sdpa::compare::tables({{"a.json", a_settings}, {"b.json", b_settings}}), "timing:")
            .rows.at(0)[14] == "-");
  const auto differ = verdict(kSlow, kFast, true, {{"repetitions", 3}, {"min_time", 0.5}});
  CHECK(differ[14] == "noisy B, settings differ: repetitions - / 3, min_time - / 0.5");
}

TEST_CASE(
    "statistics of the same seed and parameters must be identical: the first difference is named") {
  const json a = result(kSha, json::array(), {variance_record(1.5), variance_record(2.0)});
  const json same = result(kSha, json::array(), {variance_record(1.5), variance_record(2.0)});
  const json drifted = result(kSha, json::array(), {variance_record(1.5), variance_record(2.5)});
  // Another config whose experiment has other parameters; one that differs in its text alone.
  json other = result(kOtherSha, json::array(), json::array({variance_record(9.0)}));
  other["experiments"][0]["params"]["trials"] = 11;
  json reworded = same;
  reworded["config"]["sha256"] = kOtherSha;
  reworded["experiments"][0]["params"]["description"] = "reworded";
  json reseeded = same;
  reseeded["seed"] = 8;
  json moved = same;
  std::swap(moved["experiments"][0], moved["experiments"][1]);
  json elsewhere = other;
  elsewhere["experiments"].erase(0);

  auto reproducibility = [&](const json& b) {
    return find(sdpa::compare::tables({{"a.json", a}, {"b.json", b}}), "reproducibility").rows;
  };
  CHECK(reproducibility(same) ==
        std::vector<std::vector<std::string>>{{"v", "variance", "2", "identical"}});
  CHECK(reproducibility(drifted)[0][3] ==
        "**finding**: first difference at /experiments/0/records/1/score_variance/value: 2.0 "
        "against 2.5");
  const std::string not_compared =
      "not compared: another seed, other parameters or another place in the config";
  CHECK(reproducibility(other)[0][3] == not_compared);
  CHECK(reproducibility(reseeded)[0][3] == not_compared);
  CHECK(reproducibility(moved)[0][3] == not_compared);
  CHECK(reproducibility(reworded)[0][3] == "identical");
  CHECK(reproducibility(elsewhere)[0][3] ==
        "not compared: not in B's config (sha256 aaaaaaaaaaaa… and bbbbbbbbbbbb…)");
  json lost = same;
  lost["experiments"].erase(0);
  CHECK(reproducibility(lost)[0][3] == "**finding**: missing from b.json");
}

TEST_CASE("peaks of every file side by side; CSV quoting") {
  const json a = result(kSha, json::array(), json::array());
  json b = a;
  b["machine"]["peak"].push_back(
      {{"isa", "avx2"}, {"threads", 2}, {"fma_gflops", 100.0}, {"triad_gbs", 30.0}});
  const auto tables = sdpa::compare::tables({{"a.json", a}, {"b.json", b}});
  const auto& peaks = find(tables, "peaks");
  CHECK(peaks.header == std::vector<std::string>{"isa", "threads", "a.json: FMA GFLOP/s",
                                                 "b.json: FMA GFLOP/s", "a.json: triad GB/s",
                                                 "b.json: triad GB/s"});
  CHECK(peaks.rows == std::vector<std::vector<std::string>>{{"scalar", "1", "8", "8", "20", "20"},
                                                            {"avx2", "2", "-", "100", "-", "30"}});
  sdpa::report::Table t{"x", {"a", "b,c"}, {{"say \"hi\"", "1"}}, ""};
  CHECK(sdpa::compare::csv(t) == "a,\"b,c\"\n\"say \"\"hi\"\"\",1\n");
}

TEST_CASE("report: timing cells flagged noisy in the printed table") {
  json doc =
      result(kSha, {timing_record("naive", 8, kSlow, true), timing_record("naive", 16, kFast)},
             json::array());
  doc["experiments"][1]["records"][0]["time_s"]["cv"] = 0.2;
  doc["experiments"][1]["records"][1]["peak"] = {
      {"isa", "avx2"}, {"threads", 1}, {"fma_gflops", 8.0}, {"triad_gbs", 1.0}};
  const auto tables = sdpa::report::tables({doc});
  const auto& timing = find(tables, "timing: t");
  REQUIRE(timing.rows.size() == 2);
  // CV and noisy after % of peak, peak ISA (none recorded here), GB/s, % of roof and bound.
  CHECK(timing.rows[0][8] == "-");
  CHECK(timing.rows[1][8] == "avx2");  // the ISA whose peak its % of peak divides by
  CHECK(timing.rows[0][12] == "20 %");
  CHECK(timing.rows[0][13] == "**noisy**");
  CHECK(timing.rows[1][13] == "-");
  CHECK(timing.rows[0][4] == "10 s");
}

namespace {

json with_roofline(json doc, const std::string& machine_id, const std::vector<double>& samples) {
  doc["machine_id"] = machine_id;
  doc["experiments"].push_back(
      {{"name", "roof"},
       {"kind", "roofline"},
       {"records", json::array({{{"params", {{"isa", "avx2"}, {"threads", 1}}},
                                 {"threads", 1},
                                 {"supported", true},
                                 {"fma_gflops", {{"value", 0}, {"samples", samples}}}}})}});
  return doc;
}

bool warns(const std::vector<sdpa::report::Table>& tables) {
  return std::any_of(tables.begin(), tables.end(),
                     [](const auto& t) { return t.title.rfind("warning: peaks", 0) == 0; });
}

}  // namespace

TEST_CASE("compare warns when files of one machine id disagree on a peak beyond their noise") {
  const json base = result(kSha, json::array(), json::array());
  const json slow = with_roofline(base, "m-2c", {116, 117, 117.3});
  const json fast = with_roofline(base, "m-2c", {268, 270, 269});
  const auto tables = sdpa::compare::tables({{"a.json", slow}, {"b.json", fast}});
  const auto& w = find(tables, "warning: peaks");
  CHECK(w.rows ==
        std::vector<std::vector<std::string>>{
            {"m-2c", "avx2", "1", "a.json", "[116, 117.3]", "b.json", "[268, 270]", "2.302"}});
  // Overlapping repetitions are noise; another machine id is another machine.
  CHECK_FALSE(warns(sdpa::compare::tables(
      {{"a.json", slow}, {"b.json", with_roofline(base, "m-2c", {117.2, 118})}})));
  CHECK_FALSE(warns(sdpa::compare::tables(
      {{"a.json", slow}, {"b.json", with_roofline(base, "other-2c", {268, 270})}})));
}

TEST_CASE("cells are matched by every parameter, never by position") {
  // B holds A's cells in the other order: each is compared with its own.
  const json a = result(
      kSha, {timing_record("naive", 64, kSlow), timing_record("naive", 128, kFast)}, json::array());
  const json b = result(
      kSha, {timing_record("naive", 128, kFast), timing_record("naive", 64, kSlow)}, json::array());
  const auto rows = find(sdpa::compare::tables({{"a.json", a}, {"b.json", b}}), "timing:").rows;
  REQUIRE(rows.size() == 2);
  for (const auto& row : rows) {
    CAPTURE(row[1]);
    CHECK(row[4] == row[5]);  // the same medians on both sides
    CHECK(row[9] == "no significant difference");
  }
  // A parameter the display does not show (a new axis, e.g. a window) keeps cells apart.
  json windowed = b;
  for (auto& r : windowed["experiments"][1]["records"]) r["params"]["window"] = 16;
  const auto tables = sdpa::compare::tables({{"a.json", a}, {"b.json", windowed}});
  CHECK(find(tables, "timing:").rows.empty());
  CHECK(find(tables, "timing cells without a match").rows.size() == 4);
  // "threads": "all" is keyed by the count the cell ran on.
  json all = a;
  for (auto& r : all["experiments"][1]["records"]) r["params"]["threads"] = "all";
  CHECK(find(sdpa::compare::tables({{"a.json", a}, {"b.json", all}}), "timing:").rows.size() == 2);
}

TEST_CASE("a file against one of its shards compares the cells both hold and names the rest") {
  json whole = result(
      kSha, json::array(),
      {variance_record(1.5), variance_record(2.0), variance_record(2.5), variance_record(3.0)});
  for (int i = 0; i < 4; ++i) {
    whole["experiments"][0]["records"][i]["cell"] = i;
    whole["experiments"][0]["records"][i]["params"]["d_k"] = 2 * (i + 1);
  }
  json shard = whole;  // cells 1 and 3, as a shard holds them
  shard["experiments"][0]["records"] = {whole["experiments"][0]["records"][1],
                                        whole["experiments"][0]["records"][3]};
  auto reproducibility = [&](const json& x, const json& y) {
    return find(sdpa::compare::tables({{"x.json", x}, {"y.json", y}}), "reproducibility")
        .rows.at(0)
        .at(3);
  };
  // By position, shard record 0 (d_k 4) against whole record 0 (d_k 2) was a "finding".
  CHECK(reproducibility(whole, shard) ==
        "identical in the 2 cells both hold; not in B: A's cells 0, 2");
  CHECK(reproducibility(shard, whole) ==
        "identical in the 2 cells both hold; not in A: B's cells 0, 2");
  // A difference in a shared cell is still a finding, at A's path.
  shard["experiments"][0]["records"][1]["score_variance"]["value"] = 3.5;
  CHECK(reproducibility(whole, shard) ==
        "**finding**: first difference at /experiments/0/records/3/score_variance/value: 3.0 "
        "against 3.5");
  // Two shards share no cell: nothing compared, and nothing found.
  json other = whole;
  other["experiments"][0]["records"] = {whole["experiments"][0]["records"][0]};
  CHECK(reproducibility(shard, other) ==
        "not compared: no cell in both; not in B: A's cells 1, 3; not in A: B's cell 0");
}

namespace {

// The summary's row whose first cell is `label`.
std::string summary_row(const std::vector<sdpa::report::Table>& tables, const std::string& label) {
  for (const auto& row : find(tables, "summary:").rows)
    if (row[0] == label) return row[1];
  return "(none)";
}

std::vector<std::string> warnings(const std::vector<sdpa::report::Table>& tables) {
  std::vector<std::string> out;
  for (const auto& row : find(tables, "summary:").rows)
    if (row[0] == "**warning**") out.push_back(row[1]);
  return out;
}

json with_commit(json doc, const std::string& commit) {
  doc["suite"] = {{"git_commit", commit}};
  return doc;
}

}  // namespace

TEST_CASE("compare leads with a summary: geometric mean of B/A, verdict counts, warnings") {
  // Cell 64: B twice as fast (ratio 0.5); cell 128: B twice as slow (2); cell 256: equal (1).
  const std::vector<double> kVerySlow = {20, 22, 24, 21, 23};
  const json a = with_commit(
      result(kSha,
             {timing_record("naive", 64, kSlow), timing_record("naive", 128, kSlow),
              timing_record("naive", 256, kSlow), timing_record("naive", 512, {1, 2, 3})},
             json::array()),
      "abc");
  const json b = with_commit(
      result(kSha,
             {timing_record("naive", 64, kFast), timing_record("naive", 128, kVerySlow),
              timing_record("naive", 256, kSlow), timing_record("naive", 512, {1, 2, 3}),
              timing_record("naive", 1024, kSlow)},
             json::array()),
      "abc");
  const auto tables = sdpa::compare::tables({{"a.json", a}, {"b.json", b}});
  REQUIRE(tables.front().title == "summary: B = b.json against A = a.json");
  CHECK(summary_row(tables, "timed cells matched") ==
        "4; without a match: 0 of A, 1 of B (listed below)");
  // Medians: 5.5 / 11, 22 / 11, 11 / 11, 2 / 2: geometric mean 1; the t interval of the mean log
  // ratio over 4 cells, symmetric in the logs.
  const std::string mean = summary_row(tables, "time B / A, geometric mean [95% CI]");
  CHECK(mean.rfind("1 [", 0) == 0);
  CHECK(mean.find(" over 4 cells run in both (below 1: B faster)") != std::string::npos);
  CHECK(summary_row(tables, "B faster / slower / indistinguishable / no verdict") ==
        "1 / 1 / 1 / 1");
  // The variance experiment holds no record on either side: nothing differs.
  CHECK(summary_row(tables, "statistics experiments") ==
        "1 identical, 0 with a finding, 0 partly or not compared");
  CHECK(warnings(tables).empty());

  // Different commits, a dirty tree, peaks of one machine id beyond their noise.
  const json dirty = with_roofline(with_commit(b, "def-dirty"), "m-2c", {268, 270, 269});
  const auto warned = warnings(sdpa::compare::tables(
      {{"a.json", with_roofline(a, "m-2c", {116, 117, 117.3})}, {"b.json", dirty}}));
  CHECK(warned ==
        std::vector<std::string>{
            "different suite commits: A abc, B def-dirty (kernels and statistics may differ "
            "between them)",
            "B was built from a tree with uncommitted changes (def-dirty): its code is that of no "
            "commit",
            "machine id m-2c: the FMA peaks for avx2 on 1 thread(s) disagree beyond their noise "
            "([116, 117.3] against [268, 270] GFLOP/s): different hosts or conditions"});
  // The same commit, one side dirty: only the dirty tree is named.
  CHECK(warnings(sdpa::compare::tables({{"a.json", a}, {"b.json", with_commit(b, "abc-dirty")}}))
            .size() == 1);
}

TEST_CASE("compare: each file's kernels against ggml's per storage format; cells not run apart") {
  // flash against ggml at two sizes (faster at both), flash-kv-f16 against ggml-kv-f16 at one
  // (indistinguishable), flash-kv-int8 whose ggml cell this build could not run.
  json ggml_not_run = timing_record("ggml-kv-q8_0", 64, kSlow);
  ggml_not_run.erase("time_s");
  ggml_not_run["skipped"] = "not run: this build has no ggml-kv-q8_0: no ggml source";
  const json a =
      result(kSha,
             {timing_record("flash", 64, kFast), timing_record("ggml", 64, kSlow),
              timing_record("flash", 128, kFast), timing_record("ggml", 128, kSlow),
              timing_record("flash-kv-f16", 64, kSlow), timing_record("ggml-kv-f16", 64, kSlow),
              timing_record("flash-kv-int8", 64, kFast), ggml_not_run,
              // Not a pair: another shape than ggml's.
              timing_record("flash-kv-int8", 256, kFast)},
             json::array());
  const auto tables = sdpa::compare::tables({{"a.json", a}, {"b.json", a}});
  const auto& summary = find(tables, "ours against llama.cpp's ggml (A = a.json)");
  REQUIRE(summary.rows.size() == 3);
  // The medians' ratio, 5 / 10, at both cells: its geometric mean and a point interval.
  CHECK(summary.rows[0] ==
        std::vector<std::string>{"fp32", "flash", "ggml", "2", "2 / 0 / 0", "0.5 [0.5, 0.5]", "0"});
  CHECK(summary.rows[1][3] == "1");
  CHECK(summary.rows[1][4] == "0 / 0 / 1");
  CHECK(summary.rows[1][5] == "1");
  // No cell run by both: says so, with the reason, rather than "0 cells".
  CHECK(summary.rows[2][3] == "0");
  CHECK(summary.rows[2][4] == "-");
  CHECK(summary.rows[2][5] == "-");
  CHECK(summary.rows[2][6] == "1 (not run: this build has no ggml-kv-q8_0: no ggml source)");
  const auto& cells = find(tables, "ours against llama.cpp's ggml, per cell (A = a.json)");
  REQUIRE(cells.rows.size() == 4);
  CHECK(cells.rows[3][7] == "not run");
  CHECK(cells.rows[3][8] == "not run: this build has no ggml-kv-q8_0: no ggml source");
}
