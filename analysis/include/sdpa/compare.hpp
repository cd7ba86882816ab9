// Comparing result files (`sdpa-bench compare`): timings of the same cell across files, with
// a speedup interval and a rank test; peaks of each machine side by side; and a check that
// statistics of the same config and seed are identical. Reads files only, like report.
#pragma once

#include <string>
#include <vector>

#include "sdpa/report.hpp"

namespace sdpa::compare {

using report::ResultFile;  // path as given (names the file in titles), doc as read

// Fewer repetitions than this on either side: no verdict (a rank test on so few values
// cannot reach significance at level kAlpha, or barely can).
inline constexpr int kMinRepetitions = 5;
inline constexpr double kAlpha = 0.05;

// Every file after the first against the first (the baseline): one timing table per pair
// (cells matched by kernel, shape, threads and direction; unmatched ones listed), the peaks,
// and the reproducibility of statistics records.
std::vector<report::Table> tables(const std::vector<ResultFile>& files);

// One table as CSV (RFC 4180 quoting), header first.
std::string csv(const report::Table& table);

}  // namespace sdpa::compare
