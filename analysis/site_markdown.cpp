// The Markdown writer of the pages (sdpa/site.hpp): what a repository host shows for results/.
#include <algorithm>
#include <sstream>

#include "markdown.hpp"
#include "sdpa/escape.hpp"
#include "sdpa/site.hpp"

namespace sdpa::site {
namespace {

// A code fence longer than any run of backquotes in the code, so the code cannot end it.
std::string code_fence(const std::string& code) {
  std::size_t longest = 0, run = 0;
  for (char c : code) longest = std::max(longest, run = c == '`' ? run + 1 : 0);
  return std::string(std::max<std::size_t>(3, longest + 1), '`');
}

}  // namespace

std::string markdown(const Page& page) {
  const std::string root = to_root(page.path);
  std::ostringstream out;
  out << "# " << markdown_text(page.title) << "\n";
  if (page.path != "index") out << "\n[Index](" << root << markdown_file("index") << ")\n";
  for (const auto& s : page.sections) {
    if (!s.heading.empty()) out << "\n## " << markdown_text(s.heading) << "\n";
    for (const auto& p : s.paragraphs) out << "\n" << markdown_text(p) << "\n";
    if (!s.code.empty()) {
      const std::string fence = code_fence(s.code);
      out << "\n" << fence << "json\n" << s.code << "\n" << fence << "\n";
    }
    for (const auto& f : s.figures)
      out << "\n![" << markdown_text(f.caption) << "](" << root << f.image << ".svg)\n\n*"
          << markdown_text(f.caption) << "*\n";
    for (const auto& t : s.tables) {
      if (t.title != s.heading) out << "\n### " << markdown_text(t.title) << "\n";
      if (!t.header.empty()) out << "\n" << report::markdown_table(t.header, t.rows, true);
      if (!t.note.empty()) out << "\n" << markdown_text(t.note) << "\n";
    }
    if (!s.links.empty()) out << "\n";
    for (const auto& l : s.links)
      out << "- [" << markdown_text(l.text) << "]("
          << url_path(l.page ? root + markdown_file(l.target) : root + l.target) << ")\n";
  }
  return out.str();
}

}  // namespace sdpa::site
