// The HTML writer of the pages (sdpa/site.hpp): a static site, one file per page, its style
// inline and its images beside it, so it opens from the file system and requests nothing.
#include <sstream>

#include "html.hpp"
#include "sdpa/escape.hpp"
#include "sdpa/site.hpp"

namespace sdpa::report {

// Escaped text with the Markdown marks the tables use, **bold** and `code`, as elements; a mark
// without its closing pair stays as it is.
std::string inline_html(const std::string& s) {
  std::string out = html_text(s);
  const auto pairs = [&](const std::string& mark, const std::string& tag) {
    std::string done;
    std::size_t at = 0;
    for (;;) {
      const auto open = out.find(mark, at);
      const auto close = open == std::string::npos ? open : out.find(mark, open + mark.size());
      if (close == std::string::npos) break;
      done += out.substr(at, open - at) + "<" + tag + ">" +
              out.substr(open + mark.size(), close - open - mark.size()) + "</" + tag + ">";
      at = close + mark.size();
    }
    out = done + out.substr(at);
  };
  pairs("`", "code");
  pairs("**", "strong");
  return out;
}

std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows, bool numbers_right) {
  std::ostringstream out;
  const auto line = [&](const std::vector<std::string>& cells, const char* tag) {
    out << "<tr>";
    for (std::size_t i = 0; i < cells.size(); ++i)
      out << "<" << tag << (numbers_right && i > 0 ? " class=\"n\"" : "") << ">"
          << inline_html(cells[i]) << "</" << tag << ">";
    out << "</tr>\n";
  };
  out << "<div class=\"t\"><table>\n<thead>\n";
  line(header, "th");
  out << "</thead>\n<tbody>\n";
  for (const auto& row : rows) line(row, "td");
  out << "</tbody>\n</table></div>\n";
  return out.str();
}

}  // namespace sdpa::report

namespace sdpa::site {
namespace {

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:1.5em auto;max-width:80em;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;font-size:90%;margin:.5em 0}"
    "th,td{border:1px solid #ccc;padding:.2em .5em;vertical-align:top}"
    "th{background:#f0f0f0}td.n,th.n{text-align:right}"
    "div.t{overflow-x:auto}figure{margin:1em 0}img{max-width:100%;height:auto}"
    "figcaption{font-size:90%;color:#444}pre{background:#f6f6f6;padding:.5em;overflow-x:auto}"
    "nav{margin-bottom:1em}";

}  // namespace

std::string html(const Page& page) {
  const std::string root = to_root(page.path);
  const auto href = [&](const Link& l) {
    return html_text(url_path(root + (l.page ? html_file(l.target) : l.target)));
  };
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>"
      << html_text(page.title) << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n";
  if (page.path != "index")
    out << "<nav><a href=\"" << href({"", "index", true}) << "\">Index</a></nav>\n";
  out << "<h1>" << html_text(page.title) << "</h1>\n";
  for (const auto& s : page.sections) {
    if (!s.heading.empty()) out << "<h2>" << html_text(s.heading) << "</h2>\n";
    for (const auto& p : s.paragraphs) out << "<p>" << report::inline_html(p) << "</p>\n";
    if (!s.code.empty()) out << "<pre><code>" << html_text(s.code) << "</code></pre>\n";
    for (const auto& f : s.figures)
      out << "<figure><img src=\"" << html_text(root + f.image + ".svg") << "\" alt=\""
          << html_text(f.caption) << "\"><figcaption>" << html_text(f.caption)
          << "</figcaption></figure>\n";
    for (const auto& t : s.tables) {
      if (t.title != s.heading) out << "<h3>" << html_text(t.title) << "</h3>\n";
      if (!t.header.empty()) out << report::html_table(t.header, t.rows, true);
      if (!t.note.empty()) out << "<p>" << report::inline_html(t.note) << "</p>\n";
    }
    if (s.links.empty()) continue;
    out << "<ul>\n";
    for (const auto& l : s.links)
      out << "<li><a href=\"" << href(l) << "\">" << html_text(l.text) << "</a></li>\n";
    out << "</ul>\n";
  }
  out << "</body>\n</html>\n";
  return out.str();
}

}  // namespace sdpa::site
