// The reading side of `variance`: tables and plots of the records kinds/variance/experiment.cpp
// writes (their contract: record.schema.json beside it). Var(s) beside its
// prediction per d_k, the scale schemes side by side, in a table and a plot.
#include "kind_report.hpp"
#include "tables.hpp"

namespace sdpa::report {
namespace {

// Score variance: one row per d_k, each scale scheme side by side.
std::vector<Table> variance_tables(const json& experiment, const std::string& source) {
  const std::vector<Column> columns = {
      {"Var(s) [95% CI]", [](const json& r) { return statistic_with_ci(r["score_variance"]); }},
      {"predicted", [](const json& r) { return predicted(r["score_variance"]); }},
      {"agrees", [](const json& r) { return agreement(r["score_variance"]); }},
  };
  return side_by_side(experiment, source, "d_k", "scale", columns,
                      std::string("Var(s): variance of all entries of all trials (np.var of the "
                                  "stacked products); predicted = E of that statistic. ") +
                          kAgreesNote,
                      "score_variance");
}

}  // namespace

KindReport variance_report() {
  return {.name = "variance",
          .tables = variance_tables,
          .curves = {{.suffix = "variance",
                      .stat = "score_variance",
                      .ylabel = "Var(s), variance of the scores",
                      .logy = true,
                      .theory = [](const json& r) {
                        return plots::predicted_field(r["score_variance"]);
                      }}}};
}

}  // namespace sdpa::report
