// Internal to sdpa_analysis: our kernels against llama.cpp's attention (the ggml peer, issue 38)
// in one result file, per storage format, for the index page and `compare`.
#pragma once

#include <string>
#include <vector>

#include "sdpa/report.hpp"

namespace sdpa::report {

// Per timing cell that names one of our kernels and ggml's at the same storage format (the
// same experiment, every other axis equal): both times and errors against fp64, and the ratio
// of our time to ggml's with the bootstrap interval of the ratio of medians. Empty (no rows)
// when the file names no such pair.
Table ggml_cells_table(const json& doc, const std::string& source);

// Per storage format: at how many of those cells our kernel is faster than ggml's (the ratio's
// interval below 1), slower (above 1) or neither, and the geometric mean of the ratio with the
// Student-t interval of the mean log ratio; cells whose ggml side or ours was not run are
// counted with the reason the record gives. Empty when the file names no pair.
Table ggml_summary_table(const json& doc, const std::string& source);

}  // namespace sdpa::report
