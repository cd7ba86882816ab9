// The reading side of `entropy`: tables and plots of the records kinds/entropy/experiment.cpp
// writes (their contract: record.schema.json beside it). Entropy beside
// ln N - sigma^2/2 per d_k, max weight and overflow; the entropy plot marks ln N and the
// freezing point of the unscaled series.
#include <algorithm>
#include <sstream>

#include "kind_report.hpp"
#include "sdpa/json_read.hpp"
#include "tables.hpp"

namespace sdpa::report {
namespace {

// Softmax saturation: entropy beside ln N - sigma^2/2, max weight and overflow, per d_k.
std::vector<Table> entropy_tables(const json& experiment, const std::string& source) {
  const std::vector<Column> columns = {
      {"H [95% CI]", [](const json& r) { return statistic_with_ci(r["entropy"]); }},
      {"ln N - s2/2",
       [](const json& r) {
         // Outside the regime where the formula holds it is shown in parentheses.
         const std::string f = number(r["entropy"]["formula"]);
         return r["entropy"]["predicted"].is_number() ? f : "(" + f + ")";
       }},
      {"agrees", [](const json& r) { return agreement(r["entropy"]); }},
      {"max w", [](const json& r) { return number(r["max_weight"]["value"]); }},
      {"rows max w>0.9", [](const json& r) { return number(r["rows_max_weight_over_0_9"]); }},
      {"overflow fp32/fp16",
       [](const json& r) {
         const json& o = r["overflow"];
         // Records from before the measured fp16 share have only the derived ones.
         return number(o["unstable_fp32_rows"]) + " / " + number(o["unstable_fp16_rows"]) +
                (o.contains("unstable_fp16_measured_rows")
                     ? " (measured " + number(o["unstable_fp16_measured_rows"]) + ")"
                     : "");
       }},
  };
  const auto& records = experiment["records"];
  const bool measured = std::any_of(records.begin(), records.end(), [](const json& r) {
    return r["overflow"].contains("unstable_fp16_measured_rows");
  });
  return side_by_side(experiment, source, "d_k", "scale", columns,
                      std::string("H: mean softmax entropy per query row (nats). The prediction "
                                  "ln N - s2/2 holds asymptotically while s2 < 2 ln N; in "
                                  "parentheses where it does not. overflow: fraction of rows "
                                  "whose exp(s) sum overflows without max subtraction. ") +
                          (measured ? "Derived from the fp32 lse (lse > ln 65504 for fp16); "
                                      "measured: the fp16 share with the softmax computed in "
                                      "half precision (scores and exp(s) held in fp16, the sum "
                                      "accumulated in fp32 and held in fp16). "
                                    : "") +
                          kAgreesNote,
                      "entropy");
}

// ln N, and the freezing point sigma^2 = 2 ln N of the unscaled series, on the entropy plot.
std::string entropy_markers(const std::vector<const json*>& records) {
  const json& first = *records.front();
  std::ostringstream d;
  d << "set arrow from graph 0, first " << first["ln_n"].dump() << " to graph 1, first "
    << first["ln_n"].dump() << " nohead dt 3 lc 'gray'\n"
    << "set label 'ln N' at graph 0.02, first " << first["ln_n"].dump() << " offset 0,0.6\n";
  for (const json* r : records)
    if ((*r)["params"]["scale"] == "none") {
      const double d_k = number_in((*r)["params"]["d_k"]), s2 = number_in((*r)["sigma2"]);
      const double freeze = d_k * number_in((*r)["saturation_sigma2"]) / s2;
      d << "set arrow from first " << freeze << ", graph 0 to first " << freeze
        << ", graph 1 nohead dt 4 lc 'red'\nset label 'c = 1: {/Symbol s}^2 = 2 "
           "ln N' at first "
        << freeze << ", graph 0.95 offset 0.5,0 tc 'red'\n";
      break;
    }
  return d.str();
}

}  // namespace

KindReport entropy_report() {
  return {.name = "entropy",
          .tables = entropy_tables,
          .curves = {{.suffix = "entropy",
                      .stat = "entropy",
                      .ylabel = "H, softmax entropy per row (nats)",
                      .theory =
                          [](const json& r) {
                            return r["formula_valid"].get<bool>()
                                       ? plots::predicted_field(r["entropy"])
                                       : std::nullopt;
                          },
                      .decorate = entropy_markers}}};
}

}  // namespace sdpa::report
