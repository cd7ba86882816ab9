// The reading side of `roofline`: tables and plots of the records kinds/roofline/experiment.cpp
// writes (their contract: record.schema.json beside it). One row per ISA
// and thread count; these records measure the machine.
#include <algorithm>

#include "kind_report.hpp"
#include "tables.hpp"

namespace sdpa::report {
namespace {

// Roofline: the ceilings timings are read against, one row per (threads, ISA).
std::vector<Table> roofline_tables(const json& experiment, const std::string& source) {
  Table t;
  t.title = "roofline: " + experiment["name"].get<std::string>() + source;
  t.header = {"isa",        "threads",    "lanes",        "FMA GFLOP/s",
              "FMA median", "triad GB/s", "triad median", "ridge FLOP/byte"};
  // Records from before the triad's spread have no CV: its column only when some record has it.
  const auto& records = experiment["records"];
  const bool spread = std::any_of(records.begin(), records.end(), [](const json& r) {
    return r.contains("triad_gbs") && r["triad_gbs"].contains("cv");
  });
  if (spread) t.header.insert(t.header.begin() + 7, "triad CV");
  // The ceilings measured again after the run's last cell, where the records have them.
  const bool rechecked = std::any_of(records.begin(), records.end(),
                                     [](const json& r) { return r.contains("recheck"); });
  if (rechecked) t.header.insert(t.header.end(), {"FMA at the end", "triad at the end"});
  for (const auto& r : records) {
    std::vector<std::string> row = {label(r["params"]["isa"]),
                                    std::to_string(r["threads"].get<int>())};
    if (!r["supported"].get<bool>()) {
      row.insert(row.end(), {"-", "not supported", "-", "-", "-", "-"});
      if (spread) row.push_back("-");
      if (rechecked) row.insert(row.end(), {"-", "-"});
    } else {
      row.insert(row.end(),
                 {std::to_string(r["lanes"].get<int>()), number(r["fma_gflops"]["value"]),
                  number(r["fma_gflops"]["median"]), number(r["triad_gbs"]["value"]),
                  number(r["triad_gbs"]["median"]), number(r["ridge_flops_per_byte"])});
      const json cv = r["triad_gbs"].value("cv", json(nullptr));
      if (spread)
        row.insert(row.begin() + 7, cv.is_null() ? "-" : number(100 * cv.get<double>()) + " %");
      if (rechecked) {
        const json again = r.value("recheck", json(nullptr));
        row.push_back(again.is_null() ? "-" : number(again["fma_gflops"]));
        row.push_back(again.is_null() ? "-" : number(again["triad_gbs"]));
      }
    }
    t.rows.push_back(std::move(row));
  }
  const std::string footprint = number(experiment["params"]["llc_multiple"]);
  t.note =
      "Peak: the best repetition (every disturbance only slows a loop down); median beside "
      "it. FMA: 12 independent multiply-add chains per lane (scalar and sse4 issue a "
      "multiply and an add; the bf16 and int8 ISAs their dot-product instructions, two FLOPs "
      "per product). Triad: x = y + s z over three arrays of " +
      footprint +
      "x the last-level cache together. Ridge: FLOP per byte at which a kernel stops being "
      "memory-bound." +
      std::string(spread ? " Triad CV: stddev / mean of the repetitions, how far the bandwidth "
                           "every % of roof divides by moves between them."
                         : "") +
      std::string(rechecked ? " At the end: both measured again after the run's last cell; "
                              "% of peak and of roof divide by the better of the two "
                              "(machine.peak)."
                            : "");
  return {std::move(t)};
}

}  // namespace

KindReport roofline_report() {
  return {.name = "roofline", .measurement = true, .tables = roofline_tables};
}

}  // namespace sdpa::report
