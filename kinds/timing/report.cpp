// The reading side of `timing`: tables and plots of the records kinds/timing/experiment.cpp
// writes (their contract: record.schema.json beside it). One row per cell,
// and throughput against N per kernel with the measured FMA peak and the roof that binds (per
// machine side by side when several); these records measure the machine.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "kind_report.hpp"
#include "tables.hpp"

namespace sdpa::report {
namespace {

// Timing: one row per cell, in grid order.
std::vector<Table> timing_tables(const json& experiment, const std::string& source) {
  Table t;
  t.title = "timing: " + experiment["name"].get<std::string>() + source;
  t.header = {"kernel",    "shape", "threads",   "direction", "median", "95% CI", "GFLOP/s",
              "% of peak", "GB/s",  "% of roof", "bound",     "CV",     "noisy"};
  for (const auto& r : experiment["records"]) {
    const json& p = r["params"];
    std::vector<std::string> row = {p["kernel"], timing_shape(p),
                                    std::to_string(r["threads"].get<int>()), p["direction"]};
    if (!r.contains("time_s")) {
      row.insert(row.end(), {"not run", "-", "-", "-", "-", "-", "-", "-", "-"});
    } else {
      const json& time = r["time_s"];
      row.insert(
          row.end(),
          {duration(time["value"]),
           "[" + duration(time["ci95"][0]) + ", " + duration(time["ci95"][1]) + "]",
           number(r["gflops"]["value"]),
           r["percent_of_peak"].is_null() ? "-" : number(r["percent_of_peak"]),
           // Records from before the roof columns have none of them.
           r.contains("gbs") ? number(r["gbs"]["value"]) : "-",
           r.value("percent_of_roof", json(nullptr)).is_null() ? "-" : number(r["percent_of_roof"]),
           r.value("bound", json(nullptr)).is_null() ? "-" : r["bound"].get<std::string>(),
           time["cv"].is_null() ? "-" : number(100 * time["cv"].get<double>()) + " %",
           r["noisy"].get<bool>() ? "**noisy**" : "-"});
    }
    t.rows.push_back(std::move(row));
  }
  t.note =
      "Shape: batch·heads (query/K-V when grouped) × n_q × n_kv, d_k/d_v. Median of the "
      "repetitions (each the mean "
      "time per call over its iterations), its interval from order statistics (distribution "
      "free; [min, max] below 6 repetitions, which covers less than 95 %). % of peak: of "
      "this machine's measured multiply-add peak for the kernel's ISA and thread count "
      "(machine.peak); a scalar kernel can pass 100 % where the compiler vectorises its "
      "loops with the baseline SSE2. GB/s: Q, K, V and O moved once per call (a backward twice). "
      "% of roof: of min(that peak, FLOP/byte × the measured triad bandwidth), the roof that "
      "binds at the cell's intensity; bound says which. Noisy: CV (stddev / mean of the "
      "repetitions) above 5 %.";
  return {std::move(t)};
}

// The machine's measured FMA peak for these cells, as a horizontal line, and the roof that binds
// (min(peak, intensity x triad bandwidth), the records' roof_gflops) through each N, labelled
// with which bound binds: memory, compute, or memory then compute as N grows.
std::string peak_line(const std::vector<const json*>& records) {
  const double peak = plots::measured_peak(records);
  std::ostringstream d;
  if (peak > 0)
    d << "set arrow from graph 0, first " << peak << " to graph 1, first " << peak
      << " nohead dt 2 lc 'black'\nset label 'measured FMA peak' at graph 0.02, first " << peak
      << " offset 0,0.6\n";
  // Per N, the highest roof of the records there (kernels of different ISAs have their own);
  // records from before the roof fields have none.
  std::map<double, double> roof;
  std::set<std::string> bounds;
  for (const json* r : records) {
    if (!r->contains("roof_gflops") || !(*r)["roof_gflops"].is_number()) continue;
    double& top = roof[(*r)["params"]["n_kv"].get<double>()];
    top = std::max(top, (*r)["roof_gflops"].get<double>());
    if ((*r)["bound"].is_string()) bounds.insert((*r)["bound"].get<std::string>());
  }
  for (auto a = roof.begin(), b = std::next(a); !roof.empty() && b != roof.end(); ++a, ++b)
    d << "set arrow from first " << a->first << ", first " << a->second << " to first " << b->first
      << ", first " << b->second << " nohead lw 2 dt 3 lc 'dark-red'\n";
  if (!roof.empty()) {
    const std::string bound = bounds.size() > 1    ? ": memory- then compute-bound"
                              : bounds.size() == 1 ? ": " + *bounds.begin() + "-bound"
                                                   : "";
    d << "set label 'roof" << bound << "' at first " << roof.begin()->first << ", first "
      << roof.begin()->second << " offset 0,0.8 tc 'dark-red'\n";
  }
  if (peak > 0 || !roof.empty())
    d << "set yrange [0:" << plots::ceiling("gflops", records) << "]\n";
  return d.str();
}

}  // namespace

KindReport timing_report() {
  return {.name = "timing",
          .measurement = true,
          .timed = "time_s",
          .tables = timing_tables,
          .curves = {{.suffix = "throughput",
                      .row_key = "n_kv",
                      .column_key = "kernel",
                      .xlabel = "N (keys per query)",
                      .series_prefix = "",
                      .stat = "gflops",
                      .ylabel = "GFLOP/s",
                      .compare_machines = true,
                      .decorate = peak_line}}};
}

}  // namespace sdpa::report
