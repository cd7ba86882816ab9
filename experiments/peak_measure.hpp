// Measuring the roofline's two ceilings on this machine (sdpa/peak.hpp holds the loops): peak
// fp32 multiply-add FLOP/s and STREAM-triad bandwidth per (ISA, threads). Shared by the
// roofline experiment and by timing cells that find no peak measured earlier in the run.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sdpa/experiments.hpp"

namespace sdpa {

struct PeakSettings {
  int repetitions = 5;
  double min_time = 0.05;   // seconds per repetition of each loop
  double llc_multiple = 4;  // triad footprint (three arrays) in units of the last-level cache
};

struct PeakMeasurement {
  std::vector<double> fma_gflops;  // one per repetition
  std::vector<double> triad_gbs;
  double triad_footprint_bytes = 0;
  int lanes = 0;
  // The peak is the best repetition: a ceiling is what the machine can do, and every
  // disturbance (other processes, frequency dips) only lowers a repetition.
  double best_fma() const;
  double best_triad() const;
};

// Precondition: peak::isa_supported(isa).
PeakMeasurement measure_peak(const std::string& isa, int threads, const PeakSettings& settings);
// A brief measurement: a timing cell's that finds no peak, and each peak's recheck.
inline constexpr PeakSettings kQuickPeak{3, 0.02, 4};

// The largest cache the OS reports (machine fingerprint), in bytes; nullopt when it lists none.
std::optional<double> last_level_cache_bytes();
// The triad's three arrays together: llc_multiple x the last-level cache, or x 32 MiB where the
// OS lists none (the roofline record's llc_bytes is then null).
double triad_footprint_bytes(double llc_multiple);

// machine.peak entries: {isa, threads, fma_gflops, triad_gbs, source} (and after recheck_peaks
// first and recheck); one per (isa, threads), a later measurement replacing an earlier one.
json peak_entry(const std::string& isa, int threads, const PeakMeasurement& m,
                const std::string& source);
const json* find_peak(const json& peaks, const std::string& isa, int threads);
void store_peak(json& peaks, json entry);
// A peak a resumed run's journal holds (a roofline record's, a timing record's copy) back into
// `peaks`: a roofline's replacing one of its ISA and threads, as when it was measured, a copy
// only where there is none. Checked against machine.peak's schema first, since recheck_peaks
// measures it again on its threads: InputError "its <field>: <problem>".
void restore_peak(json& peaks, json entry, const std::string& field, bool replace);
// Each entry measured again, as it was measured (its roofline experiment's settings in
// `experiments`, else kQuickPeak): its `first` and `recheck` measurements kept, and its ceilings
// the better of the two. A ceiling is the best the machine did, and a slow spell of a shared
// host during the first measurement would otherwise read every % against it high.
void recheck_peaks(json& peaks, const json& experiments);

}  // namespace sdpa
