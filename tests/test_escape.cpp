// Strings from files reach gnuplot, sh, CSV, Markdown and HTML only through their escaping
// (sdpa/escape.hpp), and file names only through safe_file_name (issue 40). Hostile strings are
// run through the real gnuplot and sh: a canary file they try to create stays absent, and the
// output still shows the text.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "sdpa/escape.hpp"
#include "sdpa/input_error.hpp"
#include "test_files.hpp"

using sdpa::testing::slurp;
using sdpa::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// Strings that try to end a quoted literal, a line or a comment and run `touch <canary>`.
std::vector<std::string> hostile(const std::string& canary) {
  const std::string touch = "touch " + canary;
  return {"x\n!" + touch + "\n",
          "x'\n!" + touch + "\n'",
          "' . system('" + touch + "') . '",
          "x\" . system(\"" + touch + "\") . \"",
          "`" + touch + "`",
          "$(" + touch + ")",
          "\\'; !" + touch,
          "x\\\n!" + touch,
          "x\r!" + touch + "\r",
          "@x; ! " + touch + "; system \"" + touch + "\"",
          std::string(5000, 'n') + "\n!" + touch,
          std::string("a\0b\n!", 5) + touch};
}

// Runs `command` (a shell command line of the test's own) and returns its exit code.
int shell(const std::string& command) { return std::system(command.c_str()); }

// CSV fields of one line (RFC 4180, quoted fields may hold commas, quotes and line breaks).
std::vector<std::string> parse_csv_record(const std::string& text) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted && c == '"' && i + 1 < text.size() && text[i + 1] == '"')
      fields.back() += '"', ++i;
    else if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      fields.emplace_back();
    else
      fields.back() += c;
  }
  return fields;
}

}  // namespace

TEST_CASE("visible: control characters as C escapes, everything else kept") {
  CHECK(sdpa::visible(std::string("a\nb\rc\td\0e\x1b\x7f", 11)) == "a\\nb\\rc\\td\\0e\\x1b\\x7f");
  CHECK(sdpa::visible("µ ≥ 'x' \"y\" \\") == "µ ≥ 'x' \"y\" \\");
}

TEST_CASE("gnuplot: hostile titles, labels and file names run nothing and are shown") {
  TempDir dir;
  const std::string canary = (dir / "canary").string();
  for (const auto& s : hostile(canary)) {
    CAPTURE(sdpa::visible(s.substr(0, 80)));
    const std::string quoted = sdpa::gnuplot_quoted(s);
    CHECK(quoted.find('\n') == std::string::npos);
    CHECK(quoted.find('\r') == std::string::npos);
    CHECK(quoted.find('\0') == std::string::npos);
    const std::string name = sdpa::safe_file_name(s);
    dir.write("t.gp", "set terminal svg\nset output " + sdpa::gnuplot_quoted(name + ".svg") +
                          "\nset title " + quoted + " noenhanced\nset xlabel " + quoted +
                          "\nset key noenhanced\nplot x title " + quoted + "\n");
    CHECK(shell("cd " + dir.path.string() + " && gnuplot t.gp 2>/dev/null") == 0);
    CHECK_FALSE(fs::exists(canary));
    // The title is drawn as its text (SVG escapes &, < and >; the shell is not needed).
    const std::string svg = slurp(dir / (name + ".svg"));
    CHECK(svg.find("touch " + sdpa::html_text(canary).substr(0, 20)) != std::string::npos);
    fs::remove(dir / (name + ".svg"));
  }
}

TEST_CASE("sh: hostile words and comments run nothing; a word comes back unchanged") {
  TempDir dir;
  const std::string canary = (dir / "canary").string();
  for (const auto& s : hostile(canary)) {
    CAPTURE(sdpa::visible(s.substr(0, 80)));
    dir.write("t.sh", "# " + sdpa::shell_comment(s) + "\nprintf '%s' " +
                          (s.find('\0') == std::string::npos ? sdpa::shell_quoted(s) : "x") +
                          " > " + (dir / "word").string() + "\n");
    CHECK(shell("sh " + (dir / "t.sh").string()) == 0);
    CHECK_FALSE(fs::exists(canary));
    if (s.find('\0') == std::string::npos) CHECK(slurp(dir / "word") == s);
  }
  CHECK_THROWS_AS(sdpa::shell_quoted(std::string("a\0b", 3)), sdpa::InputError);
}

TEST_CASE("CSV: a hostile field stays one field, parses back, and is no formula") {
  for (const auto& s : hostile("/tmp/x")) {
    CAPTURE(sdpa::visible(s.substr(0, 80)));
    const std::string line = sdpa::csv_field(s) + "," + sdpa::csv_field("next");
    const auto fields = parse_csv_record(line);
    REQUIRE(fields.size() == 2);
    std::string expected = s.starts_with("@") ? "'" : "";  // a would-be formula
    for (char c : s) expected += c == '\0' ? std::string("\\0") : std::string(1, c);
    CHECK(fields[0] == expected);
    CHECK(fields[1] == "next");
  }
  CHECK(sdpa::csv_field("=HYPERLINK(\"http://x\")") == "\"'=HYPERLINK(\"\"http://x\"\")\"");
  CHECK(sdpa::csv_field("@SUM(A1)") == "'@SUM(A1)");
  CHECK(sdpa::csv_field("-1.5e-3") == "-1.5e-3");  // numbers stay numbers
  CHECK(sdpa::csv_field("sqrt_dk") == "sqrt_dk");
}

TEST_CASE("Markdown: no raw HTML, link, new cell or new line from the text") {
  for (const auto& s : hostile("/tmp/x")) {
    const std::string t = sdpa::markdown_text(s + "|<script>[a](http://x)&");
    CAPTURE(t.substr(0, 80));
    CHECK(t.find('\n') == std::string::npos);
    CHECK(t.find('\0') == std::string::npos);
    CHECK(t.find('<') == std::string::npos);
    CHECK(t.find("](") == std::string::npos);
    for (std::size_t i = t.find('|'); i != std::string::npos; i = t.find('|', i + 1)) {
      std::size_t slashes = 0;
      while (slashes < i && t[i - 1 - slashes] == '\\') ++slashes;
      CHECK(slashes % 2 == 1);  // every bar escaped
    }
  }
  CHECK(sdpa::markdown_text("d_k 4, scale sqrt_dk (c = 1)") == "d_k 4, scale sqrt_dk (c = 1)");
  CHECK(sdpa::markdown_text("a|b<c>&amp;[d](e)") == "a\\|b&lt;c>&amp;amp;[d]\\(e)");
  CHECK(sdpa::markdown_text("x < 2, y > 1, a & b") == "x < 2, y > 1, a & b");
  CHECK(sdpa::markdown_code("results/x.json") == "`results/x.json`");
  CHECK(sdpa::markdown_code("a`b|c") == "``a`b\\|c``");
}

// Found by fuzz_report: a result file's path with ")" and "<script>" ended the Markdown link
// to it early, and the rest of the path became raw HTML (test_report runs the site's writers).
TEST_CASE("links: a path becomes one URL token that decodes back to it") {
  const auto decoded = [](const std::string& u) {
    std::string out;
    for (std::size_t i = 0; i < u.size(); ++i)
      if (u[i] == '%') {
        out += char(std::stoi(u.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        out += u[i];
      }
    return out;
  };
  for (const auto& s : hostile("/tmp/x")) {
    const std::string path = s + "m`touch p<script>wnp)](x) a b";
    const std::string u = sdpa::url_path(path);
    CAPTURE(sdpa::visible(u.substr(0, 80)));
    CHECK(u.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                              "-._~/%") == std::string::npos);
    CHECK(decoded(u) == path);
  }
  CHECK(sdpa::url_path("../results/zen-4/hardware.json") == "../results/zen-4/hardware.json");
  CHECK(sdpa::url_path("a b)<c>") == "a%20b%29%3Cc%3E");
  CHECK(sdpa::url_path(std::string("\n\0\xff", 3)) == "%0A%00%FF");
}

TEST_CASE("HTML: no tag, attribute end or control character from the text") {
  for (const auto& s : hostile("/tmp/x")) {
    const std::string t = sdpa::html_text(s + "<img src=x onerror=\"a\">'");
    CHECK(t.find_first_of("<>\"'") == std::string::npos);
    CHECK(std::none_of(t.begin(), t.end(), [](char c) { return (unsigned char)c < 0x20; }));
  }
  CHECK(sdpa::html_text("a<b & \"c\"") == "a&lt;b &amp; &quot;c&quot;");
}

TEST_CASE("file names: any string maps to a safe name in the folder, different names differ") {
  std::set<std::string> names;
  std::vector<std::string> inputs = hostile("/tmp/x");
  for (const char* s : {"", ".", "..", "../../../escape/evil", "..-..-..-escape-evil", "a/b", "a_b",
                        "a:b", ".hidden", "plain-name_1.2+3"})
    inputs.emplace_back(s);
  inputs.emplace_back(std::string(5000, 'a'));
  inputs.emplace_back(std::string(5001, 'a'));
  for (const auto& s : inputs) {
    const std::string n = sdpa::safe_file_name(s);
    CAPTURE(sdpa::visible(s.substr(0, 80)));
    CAPTURE(n);
    CHECK(!n.empty());
    CHECK(n.size() <= sdpa::kMaxSafeNameBytes);
    CHECK(n.front() != '.');
    CHECK(
        n.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+.") ==
        std::string::npos);
    CHECK(fs::path(n).filename() == n);
    names.insert(n);
  }
  CHECK(names.size() == inputs.size());
  CHECK(sdpa::safe_file_name("plain-name_1.2+3") == "plain-name_1.2+3");
  CHECK(sdpa::safe_file_name("a/b").starts_with("a_b-"));
}
