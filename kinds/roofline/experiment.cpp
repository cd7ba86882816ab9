// Experiment `roofline`: the two ceilings every timing is read against, measured on this
// machine per instruction set and thread count: peak fp32 multiply-add FLOP/s (independent
// chains, so latency never limits) and STREAM-triad bandwidth over a buffer several times the
// last-level cache. Each measurement also goes to the result file's machine.peak.
#include <algorithm>

#include "kinds.hpp"
#include "peak_measure.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/nonparametric.hpp"
#include "sdpa/peak.hpp"
#include "thread_count.hpp"

namespace sdpa {
namespace {

// The spread says whether a ceiling is stable enough to divide by: the CV of the repetitions
// (stddev / mean), null with fewer than two.
json best_and_spread(const std::vector<double>& samples) {
  return {
      {"value", *std::max_element(samples.begin(), samples.end())},
      {"median", stats::median(samples)},
      {"cv", samples.size() < 2 ? json(nullptr) : json(stats::coefficient_of_variation(samples))},
      {"samples", samples}};
}

json run_roofline_cell(const CellContext& ctx) {
  const json& p = ctx.cell.params;
  const std::string isa = p["isa"];
  const int threads = resolve_threads(p["threads"], ctx.threads);
  json record = {{"threads", threads}};
  if (!peak::isa_supported(isa)) {
    record["supported"] = false;
    record["note"] = "not measured: this CPU or build cannot run " + isa;
    return record;
  }
  const PeakSettings settings{p["repetitions"], p["min_time"], p["llc_multiple"]};
  const PeakMeasurement m = measure_peak(isa, threads, settings);
  record["supported"] = true;
  record["lanes"] = m.lanes;
  record["fma_gflops"] = best_and_spread(m.fma_gflops);
  record["triad_gbs"] = best_and_spread(m.triad_gbs);
  record["triad_footprint_bytes"] = m.triad_footprint_bytes;
  const auto llc = last_level_cache_bytes();
  record["llc_bytes"] = llc ? json(*llc) : json(nullptr);
  // Arithmetic intensity at which a kernel stops being bound by memory.
  record["ridge_flops_per_byte"] = m.best_fma() / m.best_triad();
  if (ctx.shared) store_peak(ctx.shared->peaks, peak_entry(isa, threads, m, "roofline"));
  return record;
}

}  // namespace

ExperimentKind roofline_experiment() {
  return {
      .name = "roofline",
      .description = "peak multiply-add FLOP/s and triad bandwidth per ISA and thread count",
      .axes = {"threads", "isa"},
      .run_cell = run_roofline_cell,
      // The triad's arrays, shared by the cell's threads.
      .memory_bytes = [](const json& p,
                         int) { return triad_footprint_bytes(p["llc_multiple"].get<double>()); },
      // A cell finished before a resumption: its peak goes back into the machine section.
      .resumed =
          [](const json& record, RunShared& shared) {
            const json supported = record.value("supported", json(false));
            if (!supported.is_boolean())
              throw InputError("its /supported: expected a boolean, found " +
                               describe_found(supported));
            if (!supported.get<bool>()) return;
            json peak;
            try {
              peak = {{"isa", record.at("params").at("isa")},
                      {"threads", record.at("threads")},
                      {"fma_gflops", record.at("fma_gflops").at("value")},
                      {"triad_gbs", record.at("triad_gbs").at("value")},
                      {"source", "roofline"}};
            } catch (const json::exception&) {
              throw InputError(
                  "a supported roofline record needs /params/isa, /threads, "
                  "/fma_gflops/value and /triad_gbs/value");
            }
            restore_peak(shared.peaks, peak, "peak", true);
          },
      // The same ceilings measured again after the run's last cell, beside the first.
      .rechecked =
          [](json& record, const json&, int, RunShared& shared) {
            if (record.value("supported", json()) != true) return;
            const json* peak = find_peak(shared.peaks, record["params"]["isa"], record["threads"]);
            if (peak && peak->contains("recheck")) record["recheck"] = (*peak)["recheck"];
          },
      .check = nullptr,
      .cell_check = nullptr,
  };
}

}  // namespace sdpa
