#include "ggml_peer.hpp"

#include <cmath>

#include "sdpa/nonparametric.hpp"
#include "sdpa/stats.hpp"

namespace sdpa::report {
namespace {

// Our kernel and ggml's at one storage format (their registry entries, kernels/ggml.cpp).
struct Pair {
  const char* storage;
  const char* ours;
  const char* ggml;
};
constexpr Pair kPairs[] = {{"fp32", "flash", "ggml"},
                           {"K/V fp16", "flash-kv-f16", "ggml-kv-f16"},
                           {"K/V 8-bit", "flash-kv-int8", "ggml-kv-q8_0"}};

struct Cell {
  const Pair* pair;
  std::string experiment;
  const json* ours;
  const json* ggml;
};

// A record's axes but the kernel, threads by the count it ran on (as compare matches cells).
json other_axes(const json& record) {
  json axes = record["params"];
  axes.erase("kernel");
  axes["threads"] = record["threads"];
  return axes;
}

std::vector<Cell> cells(const json& doc) {
  std::vector<Cell> out;
  for (const auto& pair : kPairs)
    for (const auto& e : doc["experiments"]) {
      if (e.value("kind", "") != "timing") continue;
      for (const auto& r : e["records"]) {
        if (r["params"].value("kernel", "") != pair.ours ||
            r["params"].value("direction", "") != "forward")
          continue;
        const json axes = other_axes(r);
        for (const auto& g : e["records"])
          if (g["params"].value("kernel", "") == pair.ggml && other_axes(g) == axes) {
            out.push_back({&pair, e["name"], &r, &g});
            break;
          }
      }
    }
  return out;
}

std::vector<double> samples(const json& r) {
  std::vector<double> x;
  if (r.contains("time_s"))
    for (const auto& v : r["time_s"].value("samples", json::array()))
      if (v.is_number()) x.push_back(v.get<double>());
  return x;
}

// Timed, with the repetitions a ratio's interval needs.
bool ran(const json& r) { return !samples(r).empty(); }

struct Ratio {
  double value;
  stats::Interval ci;
};

Ratio ratio(const Cell& c) {
  return {(*c.ours)["time_s"]["value"].get<double>() / (*c.ggml)["time_s"]["value"].get<double>(),
          stats::median_ratio_ci(samples(*c.ours), samples(*c.ggml))};
}

std::string time_and_error(const json& r) {
  if (!ran(r)) return "not run";
  std::string out = duration(r["time_s"]["value"].get<double>());
  const json error = r.value("error", json(nullptr));
  if (error.is_object() && error["o_rms"].is_number())
    out += " (error " + number(error["o_rms"].get<double>(), 2) + ")";
  return out;
}

std::string with_interval(double x, const stats::Interval& ci) {
  return number(x) + " [" + number(ci.low) + ", " + number(ci.high) + "]";
}

}  // namespace

Table ggml_cells_table(const json& doc, const std::string& source) {
  Table t;
  t.title = "ours against llama.cpp's ggml, per cell" + source;
  t.header = {"storage",
              "experiment",
              "shape",
              "threads",
              "ours",
              "our time (O error)",
              "ggml's",
              "ggml's time (O error)",
              "time ours / ggml's [95% CI]"};
  for (const auto& c : cells(doc)) {
    const bool both = ran(*c.ours) && ran(*c.ggml);
    std::string r = "-";
    if (both) {
      const Ratio x = ratio(c);
      r = with_interval(x.value, x.ci);
    } else if (!ran(*c.ggml)) {
      r = (*c.ggml).value("skipped", std::string("not run"));
    }
    t.rows.push_back({c.pair->storage, c.experiment, timing_shape((*c.ours)["params"]),
                      std::to_string((*c.ours)["threads"].get<int>()), c.pair->ours,
                      time_and_error(*c.ours), c.pair->ggml, time_and_error(*c.ggml), r});
  }
  t.note =
      "Each of our kernels beside ggml_flash_attn_ext at the same storage format (fp32: flash "
      "and ggml's f32; K/V fp16: both f16; K/V 8-bit: our int8 with a scale per token and head, "
      "ggml's q8_0 with an fp16 scale per 32 values), in the same run, on the same inputs. Time: "
      "the median per call; O error: ||O - O_ref|| / ||O_ref|| against the fp64 reference over "
      "the record's sample of rows. Ratio below 1: ours faster; its interval a bootstrap of the "
      "ratio of medians over the repetitions.";
  return t;
}

Table ggml_summary_table(const json& doc, const std::string& source) {
  Table t;
  t.title = "ours against llama.cpp's ggml" + source;
  t.header = {"storage",
              "ours",
              "ggml's",
              "cells run by both",
              "ours faster / slower / neither",
              "time ours / ggml's, geometric mean [95% CI]",
              "cells not run"};
  const auto all = cells(doc);
  for (const auto& pair : kPairs) {
    std::vector<double> logs;
    int faster = 0, slower = 0, neither = 0, named = 0, not_run = 0;
    std::string why;
    for (const auto& c : all) {
      if (c.pair != &pair) continue;
      ++named;
      if (!ran(*c.ours) || !ran(*c.ggml)) {
        ++not_run;
        const json& skipped = ran(*c.ggml) ? *c.ours : *c.ggml;
        if (why.empty()) why = skipped.value("skipped", std::string("not run"));
        continue;
      }
      const Ratio x = ratio(c);
      logs.push_back(std::log(x.value));
      (x.ci.high < 1 ? faster : x.ci.low > 1 ? slower : neither) += 1;
    }
    if (named == 0) continue;
    std::string mean = "-", counts = "-";
    if (!logs.empty()) {
      const auto g = stats::geometric_mean(logs);
      mean = number(g.value);
      if (logs.size() > 1) mean += " [" + number(g.ci.low) + ", " + number(g.ci.high) + "]";
      counts =
          std::to_string(faster) + " / " + std::to_string(slower) + " / " + std::to_string(neither);
    }
    t.rows.push_back({pair.storage, pair.ours, pair.ggml, std::to_string(logs.size()), counts, mean,
                      not_run == 0 ? "0" : std::to_string(not_run) + " (" + why + ")"});
  }
  t.note =
      "Forward cells of the timing experiments that name both kernels, every other axis equal. "
      "Faster: the interval of the cell's ratio of medians (a bootstrap over the repetitions) "
      "lies below 1; slower: above 1. Geometric mean over the cells run by both, its interval "
      "Student's t of the mean log ratio (the spread across cells). A cell not run is counted "
      "apart, with its record's reason, never as a loss or a win.";
  return t;
}

}  // namespace sdpa::report
