// The reading side of `precision`: tables and plots of the records kinds/precision/experiment.cpp
// writes (their contract: record.schema.json beside it). Per d_k and scale: O's relative RMS
// error against fp64 beside its first-order prediction, its two parts (rounding the inputs, the
// kernel's arithmetic), lse's error and the share of non-finite rows.
#include "kind_report.hpp"
#include "tables.hpp"

namespace sdpa::report {
namespace {

// A part's statistic, "-" for a precision without the split.
std::string part_value(const json& r, const char* part, const char* stat) {
  const json& p = r["error"][part];
  return p.is_null() ? "-" : number(p[stat]["value"]);
}

std::vector<Table> precision_tables(const json& experiment, const std::string& source) {
  const std::vector<Column> columns = {
      {"O err [95% CI]",
       [](const json& r) { return statistic_with_ci(r["error"]["total"]["o_rms"]); }},
      {"predicted", [](const json& r) { return predicted(r["error"]["total"]["o_rms"]); }},
      {"agrees", [](const json& r) { return agreement(r["error"]["total"]["o_rms"]); }},
      {"inputs / kernel",
       [](const json& r) {
         return part_value(r, "inputs", "o_rms") + " / " + part_value(r, "kernel", "o_rms");
       }},
      {"O max", [](const json& r) { return number(r["error"]["total"]["o_max"]["value"]); }},
      {"lse err", [](const json& r) { return statistic_with_ci(r["error"]["total"]["lse_rms"]); }},
      {"non-finite", [](const json& r) { return number(r["nonfinite_rows"]); }},
  };
  return side_by_side(
      experiment, source, "d_k", "scale", columns,
      std::string("O err: ||O - O_fp64|| / ||O_fp64|| (RMS over the trial's rows), mean over "
                  "trials; predicted: first order from the unit roundoffs, scores and weights; "
                  "inputs / kernel: what rounding the inputs to the precision's formats costs "
                  "(fp64 of the rounded inputs) and what the kernel's arithmetic adds (against "
                  "that). O max: max |O - O_fp64| / max |O_fp64|. lse err: RMS over rows, in "
                  "nats (the normaliser's relative error). non-finite: share of rows. ") +
          kAgreesNote,
      "/error/total/o_rms");
}

}  // namespace

KindReport precision_report() {
  return {.name = "precision",
          .tables = precision_tables,
          .curves = {{.suffix = "error",
                      .stat = "/error/total/o_rms",
                      .ylabel = "||O - O_fp64|| / ||O_fp64||",
                      .logy = true,
                      .theory = [](const json& r) {
                        return plots::predicted_field(r["error"]["total"]["o_rms"]);
                      }}}};
}

}  // namespace sdpa::report
