// Internal to sdpa_analysis: HTML, written one way for every page of the site (site_html.cpp).
#pragma once

#include <string>
#include <vector>

namespace sdpa::report {

// Text escaped by html_text (sdpa/escape.hpp), with **bold** and `code` (as the Markdown tables and
// notes mark them) as elements.
std::string inline_html(const std::string& s);

// A table: the header in <thead>, the rows in <tbody>; with numbers_right every column but the
// first is right-aligned. Cells as inline_html.
std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows, bool numbers_right);

}  // namespace sdpa::report
