// Comparing result files (`sdpa-bench compare`): timings of the same cell across files, with
// an interval of their time ratio and a rank test, summarised; peaks of each machine side by
// side; and a check that statistics of the same seed and parameters are identical. Reads files
// only.
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

// Every file after the first against the first (the baseline): first a summary per pair (the
// geometric mean of B's time over A's across the timed cells with its interval, how many cells
// are faster, slower or indistinguishable, and warnings on different commits, dirty trees and
// peaks of one machine id that disagree); then per pair the timing table and the unmatched
// cells, and the reproducibility of statistics; then the peaks. Cells are matched by their
// value of every axis of their kind, never by position.
std::vector<report::Table> tables(const std::vector<ResultFile>& files);

// One table as CSV (RFC 4180 quoting), header first.
std::string csv(const report::Table& table);

}  // namespace sdpa::compare
