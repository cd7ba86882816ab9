// Runs one cell of an experiment kind in-process, as the runner would.
#pragma once

#include <string>

#include "sdpa/experiments.hpp"

namespace sdpa::testing {

// `fields` is the body of one experiment object after its name and kind.
inline json run_cell(const std::string& kind, const std::string& fields, int threads,
                     std::int64_t cell = 0) {
  const auto config = parse_config(
      "test.json", R"({"name": "t", "seed": 7, "experiments": [{"name": "e", "kind": ")" + kind +
                       "\", " + fields + "}]}");
  const auto plan = make_plan(config);
  return plan[0].kind->run_cell({plan[0].cells.at(cell), config.seed, 0, threads});
}

// The message a config with this one experiment (a JSON object) is refused with, or
// "(accepted)".
inline std::string error_of(const std::string& experiment) {
  try {
    parse_config("bad.json", R"({"name": "t", "seed": 1, "experiments": [)" + experiment + "]}");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

inline std::size_t cell_count(const std::string& kind, const std::string& fields) {
  const auto config = parse_config(
      "test.json", R"({"name": "t", "seed": 7, "experiments": [{"name": "e", "kind": ")" + kind +
                       "\", " + fields + "}]}");
  return make_plan(config)[0].cells.size();
}

}  // namespace sdpa::testing
