// Markdown: the tables of a report (sdpa/report.hpp) and any table (markdown.hpp).
#include "markdown.hpp"

#include <algorithm>
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

namespace {

// The cells of a table line "| a | b |", split at the pipes that are not escaped ("\\|").
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (std::size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) {
      cell += line[i];
      cell += line[++i];
    } else if (line[i] == '|') {
      const auto first = cell.find_first_not_of(' ');
      cells.push_back(first == std::string::npos
                          ? ""
                          : cell.substr(first, cell.find_last_not_of(' ') - first + 1));
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return cells;
}

std::size_t columns(const std::string& s) {
  std::size_t n = 0;
  for (const char c : s) n += (c & 0xC0) != 0x80;  // UTF-8 continuation bytes take no column
  return n;
}

std::string aligned_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  std::vector<bool> right;
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t i = 0; i < rows[r].size(); ++i) {
      if (widths.size() <= i) widths.push_back(3), right.push_back(false);
      if (r == 1)
        right[i] = !rows[r][i].empty() && rows[r][i].back() == ':';
      else
        widths[i] = std::max(widths[i], columns(rows[r][i]));
    }
  std::string out;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    out += "|";
    for (std::size_t i = 0; i < rows[r].size(); ++i) {
      const std::string& cell = rows[r][i];
      if (r == 1) {
        out +=
            " " + std::string(widths[i] - (right[i] ? 1 : 0), '-') + (right[i] ? ":" : "") + " |";
        continue;
      }
      const std::string pad(widths[i] - columns(cell), ' ');
      out += " " + (right[i] ? pad + cell : cell + pad) + " |";
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string aligned_tables(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  std::vector<std::string> lines;  // of the table being read
  const auto flush = [&] {
    // A header, a separator of dashes and rows, all of as many cells; else left as it is.
    std::vector<std::vector<std::string>> table;
    for (const auto& l : lines) table.push_back(cells_of(l));
    bool ok = table.size() >= 2;
    for (const auto& row : table) ok = ok && row.size() == table[0].size();
    for (const auto& cell : ok ? table[1] : std::vector<std::string>{})
      ok = ok && !cell.empty() && cell.find_first_not_of("-:") == std::string::npos;
    if (ok)
      out += aligned_table(table);
    else
      for (const auto& l : lines) out += l + "\n";
    lines.clear();
  };
  while (std::getline(in, line)) {
    if (line.size() >= 2 && line.front() == '|' && line.back() == '|') {
      lines.push_back(line);
      continue;
    }
    if (!lines.empty()) flush();
    out += line + "\n";
  }
  if (!lines.empty()) flush();
  if (!text.empty() && text.back() != '\n') out.pop_back();
  return out;
}

}  // namespace sdpa::report
