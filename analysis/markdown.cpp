// Markdown: the tables of a report (sdpa/report.hpp) and any table (markdown.hpp).
#include "markdown.hpp"

#include <sstream>

#include "sdpa/escape.hpp"
#include "sdpa/report.hpp"

namespace sdpa::report {

std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows, bool numbers_right) {
  std::ostringstream out;
  const auto line = [&](const std::vector<std::string>& cells) {
    out << "|";
    for (const auto& cell : cells) out << " " << markdown_text(cell) << " |";
    out << "\n";
  };
  line(header);
  out << "|";
  for (std::size_t i = 0; i < header.size(); ++i)
    out << (i > 0 && numbers_right ? "---:|" : "---|");
  out << "\n";
  for (const auto& row : rows) line(row);
  return out.str();
}

std::string markdown(const std::vector<Table>& tables) {
  std::ostringstream out;
  for (const auto& t : tables) {
    out << "### " << markdown_text(t.title) << "\n\n";
    // A table with no columns is a note alone (an experiment without records).
    if (!t.header.empty()) out << markdown_table(t.header, t.rows, true);
    if (!t.note.empty()) out << (t.header.empty() ? "" : "\n") << markdown_text(t.note) << "\n";
    out << "\n";
  }
  return out.str();
}

}  // namespace sdpa::report
