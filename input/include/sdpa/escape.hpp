// Strings from a user's files (configs, result files, shards, journals) are data: they reach a
// script or a document only through the escaping of its language here, one function per
// language, and a file name only through safe_file_name. Each keeps the text readable: a
// control character shows as its C escape ("\n", "\x1b") rather than acting.
#pragma once

#include <string>

namespace sdpa {

// The text with every control character (below 0x20, and DEL) written as a C escape: "\n",
// "\r", "\t", "\0", else "\xHH". A backslash stays one backslash. Other bytes are kept.
std::string visible(const std::string& s);

// A gnuplot string expression of single-quoted literals, in which nothing is substituted (no
// backquotes, no macros, no escapes): a quote is a piece "'" of its own, joined with '.', and
// control characters are made visible, so the expression cannot end its command line.
std::string gnuplot_quoted(const std::string& s);

// `word` as one word of a POSIX shell command line, single-quoted when it needs to be. Throws
// InputError for a NUL, which no shell word can hold.
std::string shell_quoted(const std::string& word);
// Text for a shell comment line (after "# "): control characters made visible, so it cannot
// end the comment.
std::string shell_comment(const std::string& text);

// A CSV field, quoted as RFC 4180 says when it holds a comma, a quote or a line break; a NUL
// is made visible. A field a spreadsheet would read as a formula (starting with =, +, -, @ but
// not a number) starts with a quote ('), as OWASP advises.
std::string csv_field(const std::string& s);

// Text inside a Markdown paragraph, heading or table cell: what would start raw HTML or an
// entity ('<' before a letter, '/', '!' or '?' and '&' before a letter or '#', as entities), a
// link or image ("](" as "]\\("), a new cell (\\|) or a new line (control characters made
// visible) is escaped, and the backslash itself. Emphasis and code spans are left to the text:
// they change how it looks, not what it says.
std::string markdown_text(const std::string& s);
// The same as an inline code span: fenced by more backquotes than any run in it.
std::string markdown_code(const std::string& s);

// A path as a relative URL, a link's destination in Markdown or HTML: every byte but letters,
// digits, "-._~/" percent-encoded (RFC 3986), so it neither ends the link nor starts a tag.
std::string url_path(const std::string& path);

// Text inside an HTML element or a double-quoted attribute value: & < > " ' as entities,
// control characters made visible.
std::string html_text(const std::string& s);

// The longest name safe_file_name returns (bytes), leaving room under a file system's 255 for
// the suffixes the writers add (".svg", "-machines-2", a temporary file's ".XXXXXX").
inline constexpr std::size_t kMaxSafeNameBytes = 120;

// A file name for `name` inside an output folder: the name itself when it is made only of
// letters, digits, '_', '-', '+' and '.' (not first) and at most kMaxSafeNameBytes long; else
// those characters kept, every other byte as '_', cut to fit, and "-" and the first 10 hex
// digits of the name's SHA-256 added, so different names stay different. Never empty, never
// "." or "..", never holds '/'.
std::string safe_file_name(const std::string& name);

// The SHA-256 of `bytes` as 64 lowercase hexadecimal digits.
std::string sha256_hex(const std::string& bytes);

}  // namespace sdpa
