// The reading side of `gradient`: tables and plots of the records kinds/gradient/experiment.cpp
// writes (their contract: record.schema.json beside it). The softmax
// Jacobian's norm beside its bulk asymptote per d_k, and participation, in tables and plots.
#include "kind_report.hpp"
#include "tables.hpp"

namespace sdpa::report {
namespace {

// Gradients through softmax: the Jacobian's norm beside its bulk asymptote, and participation.
std::vector<Table> gradient_tables(const json& experiment, const std::string& source) {
  const std::vector<Column> columns = {
      {"||J||_F^2 [95% CI]", [](const json& r) { return statistic_with_ci(r["jacobian_fro2"]); }},
      {"bulk theory", [](const json& r) { return predicted(r["jacobian_fro2"]); }},
      {"agrees", [](const json& r) { return agreement(r["jacobian_fro2"]); }},
      {"from dS agrees",
       [](const json& r) { return agreement(r["jacobian_fro2_from_gradients"]); }},
      {"participation", [](const json& r) { return number(r["participation"]["value"]); }},
      {"||c dS||", [](const json& r) { return number(r["score_gradient_norm"]["value"]); }},
      {"dQ rms", [](const json& r) { return number(r["d_q_rms"]["value"]); }},
  };
  return side_by_side(
      experiment, source, "d_k", "scale", columns,
      std::string("||J||_F^2: mean squared Frobenius norm of the softmax Jacobian per row, from "
                  "the identity sum p^2 - 2 sum p^3 + (sum p^2)^2; bulk theory: its asymptote "
                  "e^s2/N - 2 e^3s2/N^2 + e^2s2/N^2 (given while s2 < ln N / 2); 'from dS agrees': "
                  "the same norm read off the "
                  "backward's gradients agrees with the identity. participation: share of keys "
                  "whose |dS_j| exceeds 1e-3 of the row's largest. ||c dS||: gradient norm at "
                  "the raw scores per row. ") +
          kAgreesNote,
      "jacobian_fro2");
}

}  // namespace

KindReport gradient_report() {
  return {.name = "gradient",
          .tables = gradient_tables,
          .curves = {
              {.suffix = "jacobian",
               .stat = "jacobian_fro2",
               .ylabel = "||J||_F^2, softmax Jacobian per row",
               .logy = true,
               .theory = [](const json& r) { return plots::predicted_field(r["jacobian_fro2"]); }},
              {.suffix = "participation",
               .stat = "participation",
               .ylabel = "share of keys with |dS| > 1e-3 max |dS|"}}};
}

}  // namespace sdpa::report
