// Tables regenerated from result files alone: their schema is the contract, no experiment
// code runs. Output is deterministic (fixed number formatting, records in file order).
#pragma once

#include <string>
#include <vector>

#include "sdpa/record.hpp"

namespace sdpa::report {

// Reads a result file and checks it is one this version understands (results/schema.json) and
// can make tables from. Throws InputError naming the file, and where there is one the JSON
// path, when it is missing, larger than 1 GiB, not JSON, truncated, not a result file, of
// another schema_version or not as the schema says.
json read_result_file(const std::string& path);
// The same on a file's bytes already in memory; `path` only labels messages.
json parse_result_file(const std::string& path, const std::string& text);

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

}  // namespace sdpa::report
