// Tables from result files (sdpa/report.hpp): each experiment's from the reading side of its
// kind (kinds/<kind>/report.cpp). The pages around them are site.cpp's.
#include "sdpa/report.hpp"

#include "ggml_peer.hpp"
#include "grouping.hpp"
#include "kind_report.hpp"
#include "tables.hpp"

namespace sdpa::report {

std::vector<Table> experiment_tables(const json& experiment, const std::string& source) {
  // A kind's tables are built from its records; without any it would print nothing, and a
  // reader could not tell a missing experiment from one that never ran.
  if (experiment["records"].empty()) {
    Table none;
    none.title = table_title(experiment, source, "");
    none.note =
        "No records: the run stopped before any cell of this experiment finished, or "
        "this shard held none of its cells.";
    return {none};
  }
  const KindReport* kind = find_kind_report(experiment["kind"]);
  return kind ? kind->tables(experiment, source) : std::vector<Table>{};
}

std::vector<Table> tables(const std::vector<json>& results) {
  std::vector<const json*> docs;
  docs.reserve(results.size());
  for (const auto& result : results) docs.push_back(&result);
  // Titles carry the machine only when the files come from several machines.
  const bool several = machine_ids(docs).size() > 1;
  std::vector<Table> out;
  for (const auto& result : results) {
    const std::string source =
        (several ? " [" + machine_of(result) + "]" : "") + (edited(result) ? " [edited]" : "");
    for (const auto& e : result["experiments"])
      for (auto& t : experiment_tables(e, source)) out.push_back(std::move(t));
    if (Table t = ggml_summary_table(result, source); !t.rows.empty()) {
      out.push_back(std::move(t));
      out.push_back(ggml_cells_table(result, source));
    }
  }
  return out;
}

}  // namespace sdpa::report
