// Internal to sdpa_analysis: Markdown tables, written one way for the report and the claims.
#pragma once

#include <string>
#include <vector>

namespace sdpa::report {

// A Markdown table: the header, its separator and the rows, each line ending in a newline.
// With numbers_right, every column but the first is right-aligned ("---:|").
std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows, bool numbers_right);

}  // namespace sdpa::report
