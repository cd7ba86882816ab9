// libFuzzer target: any bytes as the journal of a run of a fixed config. Reading it and
// checking it against that config's plan either succeeds (and then every cell it holds is in
// the plan, once, with that cell's record) or throws InputError naming the file and line;
// anything else is a bug. Each line's record also goes to every kind's `resumed` hook, as a
// journaled cell of that kind: a line's checksum is keyed by the config's SHA-256, which is no
// secret, so a hostile journal carries any record past it; a hook accepts the record or throws
// InputError.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "sdpa/experiments.hpp"
#include "sdpa/journal.hpp"
#include "sdpa/json_schema.hpp"

namespace {

// The config of fuzz/corpus/journal/: its journals carry checksums keyed by its SHA-256 (the
// seeds *-record.journal are bare lines of other kinds' records, for the hooks).
const char* kConfig = R"({"name": "fuzz", "seed": 7, "experiments": [
  {"name": "v", "kind": "variance", "d_k": [2, 4], "n_q": 3, "n_kv": 3, "trials": 5},
  {"name": "e", "kind": "entropy", "d_k": 2, "n_q": 2, "n_kv": 4, "trials": 2}]})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sdpa::Config config = sdpa::parse_config("fuzz.json", kConfig);
  static const auto plans = sdpa::make_plan(config);
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto contents = sdpa::parse_journal("fuzz.journal", text);
    const auto cells = sdpa::journal_cells("fuzz.journal", contents, config, plans);
    for (const auto& [key, entry] : cells) {
      const auto& cell = plans.at(key.first).cells.at(std::size_t(key.second));
      if (entry.record["cell"] != cell.index) std::abort();
    }
  } catch (const sdpa::InputError&) {
  }
  // Each line read as the journal reader reads one (depth and duplicate keys refused), its
  // record handed to the hooks in turn, as a run hands a resumption's cells: one shared state.
  sdpa::RunShared shared;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    sdpa::json entry;
    try {
      entry = sdpa::parse_json_text(line);
    } catch (const sdpa::JsonTextError&) {
      continue;
    }
    if (!entry.is_object() || !entry.contains("record") || !entry["record"].is_object()) continue;
    for (const auto& kind : sdpa::experiment_kinds()) {
      if (!kind.resumed) continue;
      try {
        kind.resumed(entry["record"], shared);
      } catch (const sdpa::InputError&) {
      }
    }
  }
  return 0;
}
