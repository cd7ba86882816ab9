// The reading side of `timing`: tables and plots of the records kinds/timing/experiment.cpp
// writes (their contract: record.schema.json beside it). One row per cell; against N per
// kernel, memory-bound groups in GB/s with the triad, the others in GFLOP/s with each kernel's
// own roof (per machine side by side when several); these records measure the machine.
#include <algorithm>
#include <optional>
#include <sstream>

#include "kind_report.hpp"
#include "tables.hpp"

namespace sdpa::report {
namespace {

// The roofline ISA of a record's machine.peak entry `key` ("peak", "value_peak"), "" without one.
std::string isa_of(const json& r, const char* key) {
  const json peak = r.value(key, json(nullptr));
  return peak.is_object() && peak.value("isa", json(nullptr)).is_string()
             ? peak["isa"].get<std::string>()
             : "";
}

// The roofline ISAs whose peaks the record's % of peak divides by: the scores', then the
// values' where they differ (an int8 decode's "avx-vnni+avx2").
std::string peak_isa(const json& r) {
  const std::string scores = isa_of(r, "peak"), values = isa_of(r, "value_peak");
  if (scores.empty()) return "-";
  return values.empty() ? scores : scores + "+" + values;
}

// Timing: one row per cell, in grid order.
std::vector<Table> timing_tables(const json& experiment, const std::string& source) {
  Table t;
  t.title = "timing: " + experiment["name"].get<std::string>() + source;
  t.header = {"kernel",    "shape",    "threads", "direction", "median", "95% CI", "GFLOP/s",
              "% of peak", "peak ISA", "GB/s",    "% of roof", "bound",  "CV",     "noisy"};
  for (const auto& r : experiment["records"]) {
    const json& p = r["params"];
    std::vector<std::string> row = {p["kernel"], timing_shape(p),
                                    std::to_string(r["threads"].get<int>()), p["direction"]};
    if (!r.contains("time_s")) {
      row.insert(row.end(), {"not run", "-", "-", "-", "-", "-", "-", "-", "-", "-"});
    } else {
      const json& time = r["time_s"];
      row.insert(
          row.end(),
          {duration(time["value"]),
           "[" + duration(time["ci95"][0]) + ", " + duration(time["ci95"][1]) + "]",
           number(r["gflops"]["value"]),
           r["percent_of_peak"].is_null() ? "-" : number(r["percent_of_peak"]), peak_isa(r),
           // Records from before the roof columns have none of them.
           r.contains("gbs") ? number(r["gbs"]["value"]) : "-",
           r.value("percent_of_roof", json(nullptr)).is_null() ? "-" : number(r["percent_of_roof"]),
           timing_bound(r),
           time["cv"].is_null() ? "-" : number(100 * time["cv"].get<double>()) + " %",
           r["noisy"].get<bool>() ? "**noisy**" : "-"});
    }
    t.rows.push_back(std::move(row));
  }
  t.note =
      "Shape: batch·heads (query/K-V when grouped) × n_q × n_kv, d_k/d_v. Median of the "
      "repetitions (each the mean time per call over its iterations), its interval from order "
      "statistics (distribution free; [min, max] below 6 repetitions, which covers less than "
      "95 %). % of peak: of this machine's measured multiply-add peak for the kernel's own ISA "
      "(peak ISA: an @isa entry's, so flash@avx2 reads against AVX2's peak on an AVX-512 host; "
      "the bf16 dot-product roof where the kernel's products are those; a+b where the scores "
      "run on a and P·V on b, as an int8 decode's int8 dots and fp32 multiply-adds, each "
      "product's FLOPs at its own peak) and thread count (machine.peak); a scalar kernel can "
      "pass 100 % where the compiler vectorises its loops with the baseline SSE2. GB/s: Q, K, "
      "V and O moved once per call, K and V at the kernel's storage width and only the keys "
      "some row sees (a backward twice). % of roof: of min(that peak, FLOP/byte × the "
      "measured triad bandwidth), the roof that binds at the cell's intensity; bound says "
      "which; fits LLC: the cell's bytes fit in the last-level cache (machine.caches) and stay "
      "there between its calls, where the triad reads memory, so its % of a memory roof reads "
      "a cache (and can pass 100 %; records from before fits_llc do not say). Noisy: CV "
      "(stddev / mean of the repetitions) above 5 %.";
  return {std::move(t)};
}

// Whether every record of a group is bound by memory at its intensity (decode): such groups
// are read in GB/s against the triad, the others in GFLOP/s against each kernel's own roof.
bool memory_bound(const std::vector<const json*>& records) {
  return std::all_of(records.begin(), records.end(), [](const json* r) {
    return r->value("bound", json(nullptr)) == "memory" && r->contains("gbs");
  });
}

// A record's roof in GFLOP/s: min(the FMA peak of its kernel's ISA and thread count, intensity x
// triad); records from before the roof fields have their peak alone.
std::optional<double> own_roof(const json& r) {
  if (r.value("roof_gflops", json(nullptr)).is_number()) return r["roof_gflops"].get<double>();
  if (r.contains("peak") && r["peak"].is_object() && r["peak"]["fma_gflops"].is_number())
    return r["peak"]["fma_gflops"].get<double>();
  return std::nullopt;
}

// The triad bandwidth a record was read against (its bytes per call are its kernel's own, so a
// K/V cache of half the bytes reads against the same GB/s).
std::optional<double> triad(const json& r) {
  if (r.contains("peak") && r["peak"].is_object() && r["peak"]["triad_gbs"].is_number())
    return r["peak"]["triad_gbs"].get<double>();
  return std::nullopt;
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
                      .roof = own_roof,
                      .roof_title = "roof (min of the kernel ISA's FMA peak, intensity x triad)",
                      .applies = [](const auto& records) { return !memory_bound(records); }},
                     {.suffix = "bandwidth",
                      .row_key = "n_kv",
                      .column_key = "kernel",
                      .xlabel = "N (keys per query)",
                      .series_prefix = "",
                      .stat = "gbs",
                      .ylabel = "GB/s (each kernel's own bytes per call)",
                      .compare_machines = true,
                      .roof = triad,
                      .roof_title = "memory roof (measured triad bandwidth)",
                      .applies = memory_bound}}};
}

}  // namespace sdpa::report
