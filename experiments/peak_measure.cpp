#include "peak_measure.hpp"

#include <algorithm>
#include <string>

#include "sdpa/json_read.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/peak.hpp"
#include "sdpa/report.hpp"

namespace sdpa {

double PeakMeasurement::best_fma() const {
  return fma_gflops.empty() ? 0 : *std::max_element(fma_gflops.begin(), fma_gflops.end());
}

double PeakMeasurement::best_triad() const {
  return triad_gbs.empty() ? 0 : *std::max_element(triad_gbs.begin(), triad_gbs.end());
}

std::optional<double> last_level_cache_bytes() {
  double largest = 0;
  const json machine = machine_fingerprint();  // (a range-for over a temporary's member dangles)
  for (const auto& c : machine["caches"])
    largest = std::max(largest, cache_size_bytes(c["size"].get<std::string>()));
  return largest > 0 ? std::optional(largest) : std::nullopt;
}

double triad_footprint_bytes(double llc_multiple) {
  return llc_multiple * last_level_cache_bytes().value_or(32.0 * (1 << 20));
}

PeakMeasurement measure_peak(const std::string& isa, int threads, const PeakSettings& settings) {
  PeakMeasurement m;
  m.lanes = peak::lanes(isa);
  m.triad_footprint_bytes = triad_footprint_bytes(settings.llc_multiple);
  m.fma_gflops = peak::measure_multiply_add(isa, threads, settings.repetitions, settings.min_time);
  m.triad_gbs = peak::measure_triad(isa, threads, m.triad_footprint_bytes, settings.repetitions,
                                    settings.min_time);
  return m;
}

json peak_entry(const std::string& isa, int threads, const PeakMeasurement& m,
                const std::string& source) {
  return {{"isa", isa},
          {"threads", threads},
          {"fma_gflops", m.best_fma()},
          {"triad_gbs", m.best_triad()},
          {"source", source}};
}

const json* find_peak(const json& peaks, const std::string& isa, int threads) {
  for (const auto& p : peaks)
    if (p["isa"] == isa && p["threads"] == threads) return &p;
  return nullptr;
}

void store_peak(json& peaks, json entry) {
  for (auto& p : peaks)
    if (p["isa"] == entry["isa"] && p["threads"] == entry["threads"]) {
      p = std::move(entry);
      return;
    }
  peaks.push_back(std::move(entry));
}

void restore_peak(json& peaks, json entry, const std::string& field, bool replace) {
  static const JsonSchema schema([] {
    const json& result = report::result_schema();
    json entry = result["properties"]["machine"]["properties"]["peak"]["items"];
    entry["definitions"] = result["definitions"];  // (its $refs)
    return entry.dump();
  }());
  if (const auto problems = schema.problems(entry); !problems.empty())
    throw InputError("its " + field + ": " + problems.front());
  // A journal's peak predates the recheck: any first or recheck in it is not this run's.
  for (const char* key : {"first", "recheck"}) entry.erase(key);
  if (replace || !find_peak(peaks, entry["isa"], entry["threads"]))
    store_peak(peaks, std::move(entry));
}

namespace {

// How `entry` was measured: with the settings of the last roofline experiment that measured its
// ISA and threads (store_peak kept the last), else as a timing cell measures one.
PeakSettings settings_of(const json& entry, const json& experiments) {
  PeakSettings settings = kQuickPeak;
  if (entry["source"] != "roofline") return settings;
  for (const json& experiment : experiments) {
    if (experiment["kind"] != "roofline") continue;
    const json& p = experiment["params"];
    for (const json& record : experiment["records"])
      if (record["params"].value("isa", json()) == entry["isa"] &&
          record.value("threads", json()) == entry["threads"])
        settings = {p["repetitions"], p["min_time"], p["llc_multiple"]};
  }
  return settings;
}

}  // namespace

void recheck_peaks(json& peaks, const json& experiments) {
  for (json& entry : peaks) {
    const std::string isa = entry["isa"];
    if (!peak::isa_supported(isa)) continue;  // (a journal's, from another build)
    const PeakMeasurement m =
        measure_peak(isa, entry["threads"].get<int>(), settings_of(entry, experiments));
    entry["first"] = {{"fma_gflops", entry["fma_gflops"]}, {"triad_gbs", entry["triad_gbs"]}};
    entry["recheck"] = {{"fma_gflops", m.best_fma()}, {"triad_gbs", m.best_triad()}};
    for (const char* key : {"fma_gflops", "triad_gbs"})
      entry[key] = std::max(entry["first"][key].get<double>(), entry["recheck"][key].get<double>());
  }
}

}  // namespace sdpa
