// Tables regenerated from result files alone: their schema is the contract, no experiment
// code runs. Output is deterministic (fixed number formatting, records in file order).
#pragma once

#include <string>
#include <vector>

#include "sdpa/record.hpp"

namespace sdpa::report {

// Reads a result file and checks it is one this version understands. Throws InputError naming
// the file when it is missing, not JSON, truncated, not a result file or of another
// schema_version.
json read_result_file(const std::string& path);

struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string note;  // printed under the table
};

// The tables of every experiment of the given result files, in file and experiment order.
std::vector<Table> tables(const std::vector<json>& results);

std::string markdown(const std::vector<Table>& tables);

// Fixed formatting shared by every table: 4 significant digits.
std::string number(double x);
// A time with its unit: "812.3 ns", "45.6 µs", "1.234 ms", "2.5 s".
std::string duration(double seconds);
// A timing cell's shape from its params: "batch_heads×n_q×n_kv, d d_k/d_v[, causal]".
std::string timing_shape(const json& params);

}  // namespace sdpa::report
