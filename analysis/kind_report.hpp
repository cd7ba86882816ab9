// Internal to sdpa_analysis: the reading side of an experiment kind, one per kind of
// kinds/kinds.cmake, each from its kinds/<kind>/report.cpp. What `report`, `compare` and the
// plots make of a kind's records is asked of its entry; the few places that name a kind are
// listed in docs/design.md ("Experiment kinds").
#pragma once

#include <string>
#include <vector>

#include "plotting.hpp"
#include "sdpa/report.hpp"

namespace sdpa::report {

struct KindReport {
  std::string name;
  // Records that measure this machine (timings, peaks), rather than statistics that the same
  // config and seed reproduce to the bit: `compare` checks only statistics for identity.
  bool measurement = false;
  // The statistic of seconds per call, with every repetition under `samples`, that `compare`
  // matches cell by cell across files (summary and U test); null when the kind times nothing.
  const char* timed = nullptr;
  // The tables of one experiment; `source` ends each title ("", or " [machine]").
  std::vector<Table> (*tables)(const json& experiment, const std::string& source) = nullptr;
  // Curve plots of its statistics (plotting.hpp).
  std::vector<plots::Curve> curves = {};
  // Other figures of one experiment, drawn before the curves; `name` is the start of their file
  // names ("[machine-]experiment") and `title` of their titles.
  std::vector<plots::Figure> (*figures)(const json& experiment, const std::string& name,
                                        const std::string& title) = nullptr;
};

// <kind>_report() of every kind, declared from the list in kinds/kinds.cmake.
#define SDPA_KIND(kind) KindReport kind##_report();
#include "kind_list.inc"
#undef SDPA_KIND

const std::vector<KindReport>& kind_reports();
// Null for a kind this version does not know (a result file may name one: it gets no tables).
const KindReport* find_kind_report(const std::string& name);

// The tables of one experiment, by its kind's reading side; none for a kind without one.
std::vector<Table> experiment_tables(const json& experiment, const std::string& source);

}  // namespace sdpa::report
