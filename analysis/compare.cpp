#include "sdpa/compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "ggml_peer.hpp"
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

// A number as the key writes it: integral values as integers, so 64 and 64.0 are one value.
json normalised(const json& v) {
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (x == std::floor(x) && std::abs(x) < 9e15) return json(std::int64_t(x));
  }
  if (v.is_structured()) {
    json out = v;
    for (auto& [k, item] : out.items()) item = normalised(item);
    return out;
  }
  return v;
}

// A cell's identity across files: its kind and its value of every axis (the record's params,
// which the runner writes from the kind's axes). An axis the record also states at its top
// level is keyed by the record's value (threads "all" by the count it ran on), so two cells
// match only when every axis does, whatever axes a kind has or gains.
std::string cell_key(const json& experiment, const json& record) {
  json axes = record["params"];
  for (auto& [axis, v] : axes.items())
    if (record.contains(axis)) v = record[axis];
  return experiment["kind"].get<std::string>() + " " + normalised(axes).dump();
}

// A timed record (KindReport::timed) and what matching and comparing need from it.
struct Timing {
  const json* experiment = nullptr;
  const json* record = nullptr;
  const char* field = nullptr;  // the kind's statistic of seconds per call
  std::string key;
  std::vector<double> samples;
  bool used = false;

  Timing(const json& e, const json& r, const char* timed)
      : experiment(&e), record(&r), field(timed), key(cell_key(e, r)) {
    if (ran()) samples = r[field]["samples"].get<std::vector<double>>();
  }
  const json& params() const { return (*record)["params"]; }
  std::string kernel() const { return params()["kernel"]; }
  std::string direction() const { return params()["direction"]; }
  int threads() const { return (*record)["threads"]; }
  bool ran() const { return record->contains(field); }
  std::string shape() const { return report::timing_shape(params()); }
  std::string median() const {
    if (!ran()) return "not run";
    const json& t = (*record)[field];
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
    return p.is_null() ? "-"
                       : number(p.get<double>()) + " % (" + report::timing_bound(*record) + ")";
  }
  bool noisy() const { return record->value("noisy", false); }
};

std::vector<Timing> timings_of(const json& doc) {
  std::vector<Timing> out;
  for (const auto& e : doc["experiments"]) {
    const report::KindReport* kind = report::find_kind_report(e["kind"]);
    if (kind && kind->timed)
      for (const auto& r : e["records"]) out.emplace_back(e, r, kind->timed);
  }
  return out;
}

// Pairs each cell of `as` with the unused cell of `bs` of the same key, preferring one of an
// experiment of the same name (a cell can appear in two experiments of a file).
std::vector<std::pair<Timing*, Timing*>> match(std::vector<Timing>& as, std::vector<Timing>& bs) {
  std::unordered_map<std::string, std::vector<Timing*>> by_key;
  for (auto& b : bs) by_key[b.key].push_back(&b);
  std::vector<std::pair<Timing*, Timing*>> out;
  for (auto& a : as) {
    const auto it = by_key.find(a.key);
    if (it == by_key.end()) continue;
    Timing* chosen = nullptr;
    for (Timing* b : it->second)
      if (!b->used && (!chosen || ((*b->experiment)["name"] == (*a.experiment)["name"] &&
                                   (*chosen->experiment)["name"] != (*a.experiment)["name"])))
        chosen = b;
    if (!chosen) continue;
    a.used = chosen->used = true;
    out.emplace_back(&a, chosen);
  }
  return out;
}

// The verdict on B against A from the Mann-Whitney test of their repetitions.
struct Verdict {
  enum Outcome { faster, slower, indistinguishable, none };
  std::string u = "-", p = "-", text;
  Outcome outcome = none;
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
  if (test.p >= kAlpha) {
    v.text = "no significant difference", v.outcome = Verdict::indistinguishable;
  } else {
    const bool faster = stats::median(b.samples) < stats::median(a.samples);
    v.text = faster ? "**faster**" : "**slower**";
    v.outcome = faster ? Verdict::faster : Verdict::slower;
  }
  return v;
}

// B's time over A's, as the summary's geometric mean and the results index read it.
std::string time_ratio(const Timing& a, const Timing& b) {
  if (!a.ran() || !b.ran()) return "-";
  const double ratio = stats::median(b.samples) / stats::median(a.samples);
  const auto ci = stats::median_ratio_ci(b.samples, a.samples);
  return number(ratio) + " " + interval(ci.low, ci.high);
}

// A file as titles name it: its path, marked when it was read with --allow-edited.
std::string file_label(const ResultFile& f) {
  return f.path + (report::edited(f.doc) ? " (edited)" : "");
}

bool same_config(const ResultFile& a, const ResultFile& b) {
  return a.doc["config"]["sha256"] == b.doc["config"]["sha256"];
}

// "sha256 <A's first 12>… and <B's first 12>…": which configs two files ran.
std::string configs_label(const ResultFile& a, const ResultFile& b) {
  const auto head = [](const ResultFile& f) {
    return f.doc["config"]["sha256"].get<std::string>().substr(0, 12);
  };
  return "sha256 " + head(a) + "… and " + head(b) + "…";
}

// An experiment's parameters with its description left out: a config's text may be reworded
// without changing what its experiments ran.
json run_params(const json& experiment) {
  json p = experiment.value("params", json::object());
  p.erase("description");
  return p;
}

// What a timing cell ran with besides its own parameters: its experiment's other settings
// (repetitions, minimum times), its name and kind aside. Two matched cells that ran the same
// settings compare whatever else their configs say.
json settings(const Timing& t) {
  json s = run_params(*t.experiment);
  for (const char* key : {"name", "kind"}) s.erase(key);
  for (const auto& item : t.params().items()) s.erase(item.key());
  return s;
}

// "settings differ: repetitions 10 / 5" (A's value / B's, "-" where one lacks it), or "".
std::string settings_note(const Timing& a, const Timing& b) {
  const json sa = settings(a), sb = settings(b);
  json keys = sa;
  keys.update(sb);
  std::string differ;
  for (const auto& item : keys.items()) {
    const std::string& k = item.key();
    const auto value = [&](const json& s) { return s.contains(k) ? normalised(s[k]).dump() : "-"; };
    if (value(sa) != value(sb))
      differ += (differ.empty() ? "" : ", ") + k + " " + value(sa) + " / " + value(sb);
  }
  return differ.empty() ? "" : "settings differ: " + differ;
}

// The timed cells of B against A's: matched by their axes, each with its verdict.
struct TimingComparison {
  std::vector<Timing> as, bs;
  std::vector<std::tuple<const Timing*, const Timing*, Verdict>> cells;
  TimingComparison(const ResultFile& base, const ResultFile& other)
      : as(timings_of(base.doc)), bs(timings_of(other.doc)) {
    for (const auto& [a, b] : match(as, bs)) cells.emplace_back(a, b, verdict(*a, *b));
  }
  TimingComparison(const TimingComparison&) = delete;  // cells point into as and bs
};

std::vector<Table> timing_tables(const ResultFile& base, const ResultFile& other,
                                 const TimingComparison& c) {
  if (c.as.empty() && c.bs.empty()) return {};
  Table t;
  t.title = "timing: B = " + file_label(other) + " against A = " + file_label(base);
  t.header = {"kernel",
              "shape",
              "threads",
              "direction",
              "A median [95% CI]",
              "B median [95% CI]",
              "time B / A [95% CI]",
              "U",
              "p",
              "verdict (B)",
              "A % peak",
              "B % peak",
              "A % roof",
              "B % roof",
              "notes"};
  bool settings_differ = false;
  for (const auto& [a, b, v] : c.cells) {
    const std::string settings = settings_note(*a, *b);
    settings_differ = settings_differ || !settings.empty();
    std::string notes;
    for (const auto& [flag, text] :
         {std::pair{a->noisy(), std::string("noisy A")},
          std::pair{b->noisy(), std::string("noisy B")}, std::pair{!settings.empty(), settings}})
      if (flag) notes += (notes.empty() ? "" : ", ") + text;
    t.rows.push_back({a->kernel(), a->shape(), std::to_string(a->threads()), a->direction(),
                      a->median(), b->median(), time_ratio(*a, *b), v.u, v.p, v.text,
                      a->percent_of_peak(), b->percent_of_peak(), a->percent_of_roof(),
                      b->percent_of_roof(), notes.empty() ? "-" : notes});
  }
  t.note =
      "Cells are matched by their value of every parameter (threads by the count they ran on). "
      "time B / A = median(B) / median(A) (below 1: B is faster), its interval a percentile "
      "bootstrap of the ratio of medians (4000 resamples per side, fixed seed). U: "
      "Mann-Whitney U of A's repetitions against B's; p two-sided, exact (counted over all "
      "splits, ties kept) when both sides have at most 10 repetitions, else the normal "
      "approximation with tie and continuity corrections; verdict at alpha = 0.05, none "
      "below 5 repetitions per side. % peak: of each machine's own measured peak for the "
      "kernel's ISA and thread count; % roof: of the roof that binds at the cell's intensity "
      "(memory or compute, see the timing tables). Noisy: CV above 5 %.";
  static_assert(kMinRepetitions == 5 && kAlpha == 0.05, "the note above states both");
  if (settings_differ)
    t.note +=
        " Settings differ: the two cells' experiments ran with other settings than the "
        "cell's own parameters (A's value / B's); the cells are compared all the same.";
  std::vector<Table> out = {std::move(t)};

  const std::string kNoMatch = "no cell with the same parameters in ";
  Table unmatched;
  unmatched.title =
      "timing cells without a match: " + file_label(other) + " against " + file_label(base);
  unmatched.header = {"file", "kernel", "shape", "threads", "direction", "reason"};
  for (const auto& [file, list, where] :
       {std::tuple{&base, &c.as, &other}, std::tuple{&other, &c.bs, &base}})
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

// Two files of one machine id whose FMA peaks disagree beyond their noise: the ranges of their
// repetitions do not overlap. One machine id is one machine type, and hosts behind a type
// differ; such files should not be read as one machine. One row per ISA and thread count.
std::vector<std::vector<std::string>> disagreeing_peaks(const ResultFile& a, const ResultFile& b) {
  std::vector<std::vector<std::string>> rows;
  const std::string id = a.doc.value("machine_id", std::string());
  if (id.empty() || b.doc.value("machine_id", std::string()) != id) return rows;
  const auto range = [](const std::pair<double, double>& r) {
    return "[" + number(r.first) + ", " + number(r.second) + "]";
  };
  const auto b_ranges = peak_ranges(b.doc);
  for (const auto& [key, ra] : peak_ranges(a.doc)) {
    const auto rb = b_ranges.find(key);
    if (rb == b_ranges.end() || (ra.second >= rb->second.first && rb->second.second >= ra.first))
      continue;
    rows.push_back({id, key.first, std::to_string(key.second), a.path, range(ra), b.path,
                    range(rb->second), number(rb->second.second / ra.second)});
  }
  return rows;
}

Table peak_disagreements(const std::vector<ResultFile>& files) {
  Table t;
  t.title = "warning: peaks of one machine id that disagree beyond their noise";
  t.header = {"machine id", "isa", "threads", "A", "A repetitions", "B", "B repetitions", "B / A"};
  for (std::size_t i = 0; i < files.size(); ++i)
    for (std::size_t j = i + 1; j < files.size(); ++j)
      for (auto& row : disagreeing_peaks(files[i], files[j])) t.rows.push_back(std::move(row));
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

// "cells 0, 3, 7" (at most ten named, then how many in all).
std::string cell_list(const std::vector<std::string>& cells) {
  std::string s;
  for (std::size_t i = 0; i < cells.size() && i < 10; ++i) s += (i ? ", " : "") + cells[i];
  if (cells.size() > 10) s += ", … (" + std::to_string(cells.size()) + " in all)";
  return (cells.size() == 1 ? "cell " : "cells ") + s;
}

// What a statistics experiment's numbers depend on (docs/design.md, "Randomness"): the run's
// seed, the experiment's place in its config's list (its streams' key) and its parameters; not
// its description or any other text of the config, so a reworded config still compares.
bool same_inputs(const ResultFile& a, std::size_t i, const ResultFile& b, std::size_t j) {
  return a.doc["seed"] == b.doc["seed"] && i == j &&
         run_params(a.doc["experiments"][i]) == run_params(b.doc["experiments"][j]);
}

// One statistics experiment of A against B's of the same name and kind, record by record
// matched by their axes (never by position): identical, the first difference, or which cells
// one side lacks (a file against one of its shards compares the cells both hold).
struct Reproduced {
  std::string text;
  bool finding = false;
};

Reproduced reproduced(const ResultFile& base, std::size_t index, const ResultFile& other) {
  const json& experiment = base.doc["experiments"][index];
  const json& bx = other.doc["experiments"];
  const auto match = std::find_if(bx.begin(), bx.end(), [&](const json& x) {
    return x["name"] == experiment["name"] && x["kind"] == experiment["kind"];
  });
  if (match == bx.end())
    return same_config(base, other)
               ? Reproduced{"**finding**: missing from " + other.path, true}
               : Reproduced{"not compared: not in B's config (" + configs_label(base, other) + ")"};
  if (!same_inputs(base, index, other, std::size_t(match - bx.begin())))
    return {"not compared: another seed, other parameters or another place in the config"};
  std::unordered_map<std::string, std::vector<std::size_t>> in_b;
  const json& brs = (*match)["records"];
  for (std::size_t j = brs.size(); j-- > 0;) in_b[cell_key(*match, brs[j])].push_back(j);
  std::vector<std::string> only_a;
  std::size_t shared = 0;
  const json& ars = experiment["records"];
  for (std::size_t i = 0; i < ars.size(); ++i) {
    auto it = in_b.find(cell_key(experiment, ars[i]));
    if (it == in_b.end() || it->second.empty()) {
      only_a.push_back(ars[i]["cell"].dump());
      continue;
    }
    const json& b = brs[it->second.back()];
    it->second.pop_back();
    ++shared;
    const std::string at =
        "/experiments/" + std::to_string(index) + "/records/" + std::to_string(i);
    if (const auto d = first_difference(ars[i], b, at)) {
      const json::json_pointer below(d->substr(at.size()));
      const auto shown = [&](const json& x) {
        return x.contains(below) ? x.at(below).dump() : "(absent)";
      };
      return {
          "**finding**: first difference at " + *d + ": " + shown(ars[i]) + " against " + shown(b),
          true};
    }
  }
  std::vector<std::string> only_b;
  for (std::size_t j = 0; j < brs.size(); ++j) {
    const auto& left = in_b[cell_key(*match, brs[j])];
    if (std::find(left.begin(), left.end(), j) != left.end())
      only_b.push_back(brs[j]["cell"].dump());
  }
  if (only_a.empty() && only_b.empty()) return {"identical"};
  std::string text = shared == 0 ? "not compared: no cell in both"
                                 : "identical in the " + std::to_string(shared) +
                                       (shared == 1 ? " cell" : " cells") + " both hold";
  if (!only_a.empty()) text += "; not in B: A's " + cell_list(only_a);
  if (!only_b.empty()) text += "; not in A: B's " + cell_list(only_b);
  return {text};
}

// Each statistics experiment of `base` (is_statistics) against `other`'s of the same name.
struct Reproducibility {
  Table table;
  std::size_t identical = 0, findings = 0, other = 0;
};

Reproducibility reproducibility(const ResultFile& base, const ResultFile& other) {
  Reproducibility out;
  Table& t = out.table;
  t.title = "reproducibility of statistics: " + file_label(other) + " against " + file_label(base);
  t.header = {"experiment", "kind", "records", "result"};
  const json& experiments = base.doc["experiments"];
  for (std::size_t i = 0; i < experiments.size(); ++i) {
    const json& e = experiments[i];
    if (!is_statistics(e)) continue;
    const Reproduced r = reproduced(base, i, other);
    (r.finding ? out.findings : r.text == "identical" ? out.identical : out.other)++;
    t.rows.push_back({e["name"], e["kind"], std::to_string(e["records"].size()), r.text});
  }
  t.note =
      "The same seed, place in the config and parameters (its description aside) must give "
      "identical statistics on machines of the same ISA (docs/design.md, \"Randomness\"); "
      "records are matched by their value of every parameter, and a finding names the first "
      "differing JSON path (of A).";
  return out;
}

std::string commit_of(const ResultFile& f) {
  return f.doc.value(json::json_pointer("/suite/git_commit"), std::string("unknown"));
}

// B against A in a few lines: the timed cells' geometric mean ratio and verdict counts, the
// statistics' outcome, and what makes the files hard to compare (commits, dirty trees, peaks).
Table summary(const ResultFile& base, const ResultFile& other, const TimingComparison& timing,
              const Reproducibility& statistics) {
  Table t;
  t.title = "summary: B = " + file_label(other) + " against A = " + file_label(base);
  t.header = {"B against A", ""};
  if (!timing.as.empty() || !timing.bs.empty()) {
    std::vector<double> log_ratios;
    std::size_t count[4] = {};
    for (const auto& [a, b, v] : timing.cells) {
      ++count[v.outcome];
      if (!a->samples.empty() && !b->samples.empty())
        log_ratios.push_back(std::log(stats::median(b->samples) / stats::median(a->samples)));
    }
    const auto unmatched = [](const std::vector<Timing>& list) {
      return std::count_if(list.begin(), list.end(), [](const Timing& x) { return !x.used; });
    };
    const auto [only_a, only_b] = std::pair{unmatched(timing.as), unmatched(timing.bs)};
    t.rows.push_back(
        {"timed cells matched",
         std::to_string(timing.cells.size()) +
             (only_a + only_b == 0 ? ""
                                   : "; without a match: " + std::to_string(only_a) + " of A, " +
                                         std::to_string(only_b) + " of B (listed below)")});
    std::string mean = "-";
    if (!log_ratios.empty()) {
      const auto g = stats::geometric_mean(log_ratios);
      mean = number(g.value);
      if (log_ratios.size() > 1) mean += " " + interval(g.ci.low, g.ci.high);
      mean += " over " + std::to_string(log_ratios.size()) + " cells run in both (below 1: B " +
              "faster)";
    }
    t.rows.push_back({"time B / A, geometric mean [95% CI]", mean});
    t.rows.push_back({"B faster / slower / indistinguishable / no verdict",
                      std::to_string(count[Verdict::faster]) + " / " +
                          std::to_string(count[Verdict::slower]) + " / " +
                          std::to_string(count[Verdict::indistinguishable]) + " / " +
                          std::to_string(count[Verdict::none])});
  }
  if (!statistics.table.rows.empty())
    t.rows.push_back({"statistics experiments",
                      std::to_string(statistics.identical) + " identical, " +
                          std::to_string(statistics.findings) + " with a finding, " +
                          std::to_string(statistics.other) + " partly or not compared"});
  const std::string a = commit_of(base), b = commit_of(other);
  const auto clean = [](std::string c) {
    return c.ends_with("-dirty") ? c.substr(0, c.size() - 6) : c;
  };
  if (clean(a) != clean(b))
    t.rows.push_back({"**warning**", "different suite commits: A " + a + ", B " + b +
                                         " (kernels and statistics may differ between them)"});
  for (const auto& [side, file] : {std::pair{"A", &base}, std::pair{"B", &other}})
    if (commit_of(*file).ends_with("-dirty"))
      t.rows.push_back({"**warning**", std::string(side) + " was built from a tree with " +
                                           "uncommitted changes (" + commit_of(*file) +
                                           "): its code is that of no commit"});
  for (const auto& row : disagreeing_peaks(base, other))
    t.rows.push_back({"**warning**", "machine id " + row[0] + ": the FMA peaks for " + row[1] +
                                         " on " + row[2] + " thread(s) disagree beyond their " +
                                         "noise (" + row[4] + " against " + row[6] +
                                         " GFLOP/s): different hosts or conditions"});
  t.note =
      "time B / A: the ratio of the medians of each cell run in both, its geometric mean over "
      "the cells with a Student-t 95 % interval of the mean log ratio (the spread across cells, "
      "not each cell's noise). Faster, slower, indistinguishable: the Mann-Whitney U test of "
      "each cell at alpha = 0.05 (the timing table below).";
  return t;
}

}  // namespace

std::vector<Table> tables(const std::vector<ResultFile>& files) {
  std::vector<Table> summaries, out;
  for (std::size_t i = 1; i < files.size(); ++i) {
    const TimingComparison timing(files[0], files[i]);
    Reproducibility statistics = reproducibility(files[0], files[i]);
    summaries.push_back(summary(files[0], files[i], timing, statistics));
    for (auto& t : timing_tables(files[0], files[i], timing)) out.push_back(std::move(t));
    if (!statistics.table.rows.empty()) out.push_back(std::move(statistics.table));
  }
  // Each file's own comparison of our kernels with ggml's, where it timed both.
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string source =
        std::string(" (") + (i == 0 ? "A" : "B") + " = " + file_label(files[i]) + ")";
    if (Table t = report::ggml_summary_table(files[i].doc, source); !t.rows.empty()) {
      out.push_back(std::move(t));
      out.push_back(report::ggml_cells_table(files[i].doc, source));
    }
  }
  out.push_back(peak_table(files));
  if (Table t = peak_disagreements(files); !t.rows.empty()) out.push_back(std::move(t));
  out.insert(out.begin(), summaries.begin(), summaries.end());
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
