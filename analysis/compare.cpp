#include "sdpa/compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "kind_report.hpp"
#include "sdpa/escape.hpp"
#include "sdpa/nonparametric.hpp"

namespace sdpa::compare {
namespace {

using report::duration;
using report::number;
using report::Table;

std::string interval(double low, double high) {
  return "[" + number(low) + ", " + number(high) + "]";
}

// A timing record and what matching and comparing need from it.
struct Timing {
  const json* record = nullptr;
  std::string key;  // kernel, shape, threads, direction
  std::vector<double> samples;
  bool used = false;

  explicit Timing(const json& r) : record(&r) {
    for (const char* k : {"kernel", "batch_heads", "n_q", "n_kv", "d_k", "d_v", "causal"})
      key += r["params"][k].dump() + "|";
    // The head axes, when a side has them (older records ran one head): 1 is their default.
    for (const char* k : {"batch", "heads_q", "heads_kv"})
      key += std::to_string(r["params"].value(k, 1)) + "|";
    key += std::to_string(threads()) + "|" + direction();
    if (r.contains("time_s")) samples = r["time_s"]["samples"].get<std::vector<double>>();
  }
  const json& params() const { return (*record)["params"]; }
  std::string kernel() const { return params()["kernel"]; }
  std::string direction() const { return params()["direction"]; }
  int threads() const { return (*record)["threads"]; }
  bool ran() const { return record->contains("time_s"); }
  std::string shape() const { return report::timing_shape(params()); }
  std::string median() const {
    if (!ran()) return "not run";
    const json& t = (*record)["time_s"];
    return duration(t["value"]) + " [" + duration(t["ci95"][0]) + ", " + duration(t["ci95"][1]) +
           "]";
  }
  std::string percent_of_peak() const {
    const json& p = record->value("percent_of_peak", json(nullptr));
    return p.is_null() ? "-" : number(p.get<double>()) + " %";
  }
  // "% of roof (bound)", e.g. "83 % (memory)"; "-" for records without a roof.
  std::string percent_of_roof() const {
    const json& p = record->value("percent_of_roof", json(nullptr));
    return p.is_null()
               ? "-"
               : number(p.get<double>()) + " % (" + (*record)["bound"].get<std::string>() + ")";
  }
  bool noisy() const { return record->value("noisy", false); }
};

std::vector<Timing> timings_of(const json& doc) {
  std::vector<Timing> out;
  for (const auto& e : doc["experiments"])
    if (e["kind"] == "timing")
      for (const auto& r : e["records"]) out.emplace_back(r);
  return out;
}

// The verdict on B against A from the Mann-Whitney test of their repetitions.
struct Verdict {
  std::string u = "-", p = "-", text;
};

Verdict verdict(const Timing& a, const Timing& b) {
  if (!a.ran() || !b.ran())
    return {.text = std::string("no verdict: not run in ") + (a.ran() ? "B" : "A")};
  for (const auto& [side, t] : {std::pair{"A", &a}, std::pair{"B", &b}})
    if (t->samples.size() < std::size_t(kMinRepetitions))
      return {.text = "no verdict: " + std::string(side) + " has " +
                      std::to_string(t->samples.size()) + " repetition(s), the U test needs " +
                      std::to_string(kMinRepetitions) + " per side"};
  const auto test = stats::mann_whitney(a.samples, b.samples);
  Verdict v{number(test.u), number(test.p) + (test.exact ? " (exact)" : " (normal)"), ""};
  if (test.p >= kAlpha)
    v.text = "no significant difference";
  else
    v.text = stats::median(b.samples) < stats::median(a.samples) ? "**faster**" : "**slower**";
  return v;
}

std::string speedup(const Timing& a, const Timing& b) {
  if (!a.ran() || !b.ran()) return "-";
  const double ratio = stats::median(a.samples) / stats::median(b.samples);
  const auto ci = stats::median_ratio_ci(a.samples, b.samples);
  return number(ratio) + " " + interval(ci.low, ci.high);
}

// A file as titles name it: its path, marked when it was read with --allow-edited.
std::string file_label(const ResultFile& f) {
  return f.path + (report::edited(f.doc) ? " (edited)" : "");
}

std::string config_label(const ResultFile& f) {
  return f.doc["config"]["sha256"].get<std::string>().substr(0, 12);
}

bool same_config(const ResultFile& a, const ResultFile& b) {
  return a.doc["config"]["sha256"] == b.doc["config"]["sha256"] && a.doc["seed"] == b.doc["seed"];
}

std::vector<Table> timing_tables(const ResultFile& base, const ResultFile& other) {
  std::vector<Timing> as = timings_of(base.doc), bs = timings_of(other.doc);
  if (as.empty() && bs.empty()) return {};
  Table t;
  t.title = "timing: B = " + file_label(other) + " against A = " + file_label(base);
  t.header = {"kernel",
              "shape",
              "threads",
              "direction",
              "A median [95% CI]",
              "B median [95% CI]",
              "speedup A/B [95% CI]",
              "U",
              "p",
              "verdict (B)",
              "A % peak",
              "B % peak",
              "A % roof",
              "B % roof",
              "notes"};
  const bool configs_differ = base.doc["config"]["sha256"] != other.doc["config"]["sha256"];
  for (auto& a : as) {
    auto b = std::find_if(bs.begin(), bs.end(),
                          [&](const Timing& x) { return !x.used && x.key == a.key; });
    if (b == bs.end()) continue;
    a.used = b->used = true;
    const Verdict v = verdict(a, *b);
    std::string notes;
    for (const auto& [flag, text] :
         {std::pair{a.noisy(), "noisy A"}, std::pair{b->noisy(), "noisy B"},
          std::pair{configs_differ, "configs differ"}})
      if (flag) notes += (notes.empty() ? "" : ", ") + std::string(text);
    t.rows.push_back({a.kernel(), a.shape(), std::to_string(a.threads()), a.direction(), a.median(),
                      b->median(), speedup(a, *b), v.u, v.p, v.text, a.percent_of_peak(),
                      b->percent_of_peak(), a.percent_of_roof(), b->percent_of_roof(),
                      notes.empty() ? "-" : notes});
  }
  t.note =
      "Speedup = median(A) / median(B) (above 1: B is faster), its interval a percentile "
      "bootstrap of the ratio of medians (4000 resamples per side, fixed seed). U: "
      "Mann-Whitney U of A's repetitions against B's; p two-sided, exact (counted over all "
      "splits, ties kept) when both sides have at most 10 repetitions, else the normal "
      "approximation with tie and continuity corrections; verdict at alpha = 0.05, none "
      "below 5 repetitions per side. % peak: of each machine's own measured peak for the "
      "kernel's ISA and thread count; % roof: of the roof that binds at the cell's intensity "
      "(memory or compute, see the timing tables). Noisy: CV above 5 %.";
  static_assert(kMinRepetitions == 5 && kAlpha == 0.05, "the note above states both");
  if (configs_differ)
    t.note += " The files ran different configs (sha256 " + config_label(base) + "… and " +
              config_label(other) + "…): matched cells are compared, but settings such as " +
              "repetitions may differ.";
  std::vector<Table> out = {std::move(t)};

  const std::string kNoMatch = "no cell with this kernel, shape, threads and direction in ";
  Table unmatched;
  unmatched.title =
      "timing cells without a match: " + file_label(other) + " against " + file_label(base);
  unmatched.header = {"file", "kernel", "shape", "threads", "direction", "reason"};
  for (const auto& [file, list, where] :
       {std::tuple{&base, &as, &other}, std::tuple{&other, &bs, &base}})
    for (const auto& x : *list)
      if (!x.used)
        unmatched.rows.push_back({file->path, x.kernel(), x.shape(), std::to_string(x.threads()),
                                  x.direction(), kNoMatch + where->path});
  if (!unmatched.rows.empty()) out.push_back(std::move(unmatched));
  return out;
}

Table peak_table(const std::vector<ResultFile>& files) {
  Table t;
  t.title = "peaks (machine.peak of each file)";
  t.header = {"isa", "threads"};
  for (const auto& f : files) t.header.push_back(f.path + ": FMA GFLOP/s");
  for (const auto& f : files) t.header.push_back(f.path + ": triad GB/s");
  std::vector<std::pair<std::string, int>> keys;
  for (const auto& f : files)
    for (const auto& p : f.doc["machine"].value("peak", json::array())) {
      std::pair<std::string, int> k{p["isa"], p["threads"]};
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  for (const auto& [isa, threads] : keys) {
    std::vector<std::string> row = {isa, std::to_string(threads)};
    for (const char* field : {"fma_gflops", "triad_gbs"})
      for (const auto& f : files) {
        std::string cell = "-";
        for (const auto& p : f.doc["machine"].value("peak", json::array()))
          if (p["isa"] == isa && p["threads"] == threads) cell = number(p[field].get<double>());
        row.push_back(cell);
      }
    t.rows.push_back(std::move(row));
  }
  t.note = "The best repetition of each loop; \"-\": not measured in that run.";
  return t;
}

// A file's noise on a peak: the range of the repetitions its roofline measured for that ISA
// and thread count (fma_gflops.samples; the peak is their best). Keyed by isa and threads.
std::map<std::pair<std::string, int>, std::pair<double, double>> peak_ranges(const json& doc) {
  std::map<std::pair<std::string, int>, std::pair<double, double>> out;
  for (const auto& e : doc["experiments"]) {
    if (e["kind"] != "roofline") continue;
    for (const auto& r : e["records"]) {
      if (!r.value("supported", false)) continue;
      const auto samples = r["fma_gflops"]["samples"].get<std::vector<double>>();
      const auto [low, high] = std::minmax_element(samples.begin(), samples.end());
      out[{r["params"]["isa"], r["threads"]}] = {*low, *high};
    }
  }
  return out;
}

// Files of one machine id whose FMA peaks disagree beyond their noise: the ranges of their
// repetitions do not overlap. One machine id is one machine type, and hosts behind a type
// differ; such files should not be read as one machine.
Table peak_disagreements(const std::vector<ResultFile>& files) {
  Table t;
  t.title = "warning: peaks of one machine id that disagree beyond their noise";
  t.header = {"machine id", "isa", "threads", "A", "A repetitions", "B", "B repetitions", "B / A"};
  const auto range = [](const std::pair<double, double>& r) {
    return "[" + number(r.first) + ", " + number(r.second) + "]";
  };
  for (std::size_t i = 0; i < files.size(); ++i)
    for (std::size_t j = i + 1; j < files.size(); ++j) {
      const std::string id = files[i].doc.value("machine_id", std::string());
      if (id.empty() || files[j].doc.value("machine_id", std::string()) != id) continue;
      const auto b_ranges = peak_ranges(files[j].doc);
      for (const auto& [key, a] : peak_ranges(files[i].doc)) {
        const auto b = b_ranges.find(key);
        if (b == b_ranges.end() || (a.second >= b->second.first && b->second.second >= a.first))
          continue;
        t.rows.push_back({id, key.first, std::to_string(key.second), files[i].path, range(a),
                          files[j].path, range(b->second), number(b->second.second / a.second)});
      }
    }
  t.note =
      "GFLOP/s of the roofline's repetitions (a file's noise is the range they span; its peak "
      "is their best). Ranges that do not overlap mean different hosts or conditions behind one "
      "machine id: compare kernels within a file, against that file's own peak.";
  return t;
}

// The JSON path of the first place where a and b differ (numbers compare by value).
std::optional<std::string> first_difference(const json& a, const json& b, const std::string& path) {
  if (a.is_number() && b.is_number()) return a == b ? std::nullopt : std::optional(path);
  if (a.type() != b.type()) return path;
  if (a.is_object()) {
    for (auto& [k, v] : a.items()) {
      if (!b.contains(k)) return path + "/" + k;
      if (auto d = first_difference(v, b[k], path + "/" + k)) return d;
    }
    for (auto& [k, v] : b.items())
      if (!a.contains(k)) return path + "/" + k;
    return std::nullopt;
  }
  if (a.is_array()) {
    const std::size_t n = std::min(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i)
      if (auto d = first_difference(a[i], b[i], path + "/" + std::to_string(i))) return d;
    if (a.size() != b.size()) return path + "/" + std::to_string(n);
    return std::nullopt;
  }
  return a == b ? std::nullopt : std::optional(path);
}

// Statistics (every kind whose records are not measurements of the machine, KindReport) depend
// only on the config and the seed: with both equal, any difference is a reproducibility finding.
bool is_statistics(const json& experiment) {
  const report::KindReport* kind = report::find_kind_report(experiment["kind"]);
  return !kind || !kind->measurement;
}

// The outcome for one statistics experiment of A: identical in B, or the first difference.
std::string reproduced(const json& experiment, std::size_t index, const ResultFile& other) {
  const json& bx = other.doc["experiments"];
  auto match = std::find_if(bx.begin(), bx.end(),
                            [&](const json& x) { return x["name"] == experiment["name"]; });
  if (match == bx.end()) return "**finding**: missing from " + other.path;
  const std::string at = "/experiments/" + std::to_string(index);
  const auto d = first_difference(experiment["records"], (*match)["records"], at + "/records");
  if (!d) return "identical";
  const json::json_pointer below(d->substr(at.size()));
  auto shown = [&](const json& x) { return x.contains(below) ? x.at(below).dump() : "(absent)"; };
  return "**finding**: first difference at " + *d + ": " + shown(experiment) + " against " +
         shown(*match);
}

// Each statistics experiment of `base` (is_statistics) against `other`'s of the same name.
Table reproducibility_table(const ResultFile& base, const ResultFile& other) {
  Table t;
  t.title = "reproducibility of statistics: " + file_label(other) + " against " + file_label(base);
  t.header = {"experiment", "kind", "records", "result"};
  const json& experiments = base.doc["experiments"];
  for (std::size_t i = 0; i < experiments.size(); ++i) {
    const json& e = experiments[i];
    if (!is_statistics(e)) continue;
    const std::string result =
        same_config(base, other) ? reproduced(e, i, other)
                                 : "not compared: different config (sha256 " + config_label(base) +
                                       "… and " + config_label(other) + "…) or seed";
    t.rows.push_back({e["name"], e["kind"], std::to_string(e["records"].size()), result});
  }
  t.note =
      "Same config sha256 and seed must give identical statistics on machines of the same "
      "ISA (docs/design.md, \"Randomness\"); a finding names the first differing JSON path (of A).";
  return t;
}

}  // namespace

std::vector<Table> tables(const std::vector<ResultFile>& files) {
  std::vector<Table> out;
  for (std::size_t i = 1; i < files.size(); ++i)
    for (auto& t : timing_tables(files[0], files[i])) out.push_back(std::move(t));
  out.push_back(peak_table(files));
  if (Table t = peak_disagreements(files); !t.rows.empty()) out.push_back(std::move(t));
  for (std::size_t i = 1; i < files.size(); ++i) {
    Table t = reproducibility_table(files[0], files[i]);
    if (!t.rows.empty()) out.push_back(std::move(t));
  }
  return out;
}

std::string csv(const Table& table) {
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) out += ',';
      out += csv_field(cells[i]);
    }
    out += '\n';
  };
  line(table.header);
  for (const auto& row : table.rows) line(row);
  return out;
}

}  // namespace sdpa::compare
