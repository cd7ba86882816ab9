// The escaping of each language strings from files reach (sdpa/escape.hpp).
#include "sdpa/escape.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "sdpa/input_error.hpp"

namespace sdpa {
namespace {

bool is_control(char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }

// One control character as its C escape.
std::string escaped_control(char c) {
  switch (c) {
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\0':
      return "\\0";
    default: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      return buf;
    }
  }
}

bool plain_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '+' || c == '.';
}

// A number as a spreadsheet reads one: optional sign, digits, a point, an exponent.
bool looks_numeric(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Whether s[i] can follow '<' in raw HTML (a tag, a closing tag, a comment or declaration, a
// processing instruction) or '&' in a character reference.
bool starts_tag(const std::string& s, std::size_t i) {
  return i < s.size() && (is_letter(s[i]) || s[i] == '/' || s[i] == '!' || s[i] == '?');
}
bool starts_entity(const std::string& s, std::size_t i) {
  return i < s.size() && (is_letter(s[i]) || s[i] == '#');
}

}  // namespace

std::string visible(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out += is_control(c) ? escaped_control(c) : std::string(1, c);
  return out;
}

std::string gnuplot_quoted(const std::string& s) {
  // gnuplot 5.4 reads a doubled quote as a quote inside a literal but not at its start,
  // so each quote is its own double-quoted piece, joined by gnuplot's string concatenation.
  std::string q = "'";
  for (char c : visible(s)) q += c == '\'' ? std::string("' . \"'\" . '") : std::string(1, c);
  return q + "'";
}

std::string shell_quoted(const std::string& word) {
  if (word.find('\0') != std::string::npos)
    throw InputError("\"" + visible(word) +
                     "\": holds a NUL character, which no shell command line can carry");
  if (!word.empty() &&
      word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                             "_./-+:=,@%") == std::string::npos)
    return word;
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string shell_comment(const std::string& text) { return visible(text); }

std::string csv_field(const std::string& s) {
  std::string text;
  for (char c : s) text += c == '\0' ? std::string("\\0") : std::string(1, c);
  const char first = text.empty() ? ' ' : text.front();
  if ((first == '=' || first == '+' || first == '-' || first == '@') && !looks_numeric(text))
    text.insert(0, "'");
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string markdown_text(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '|':
        out += "\\|";
        break;
      // Only what would start a tag or an entity: "x < 2" and "a & b" stay as they are.
      case '<':
        out += starts_tag(s, i + 1) ? "&lt;" : "<";
        break;
      case '&':
        out += starts_entity(s, i + 1) ? "&amp;" : "&";
        break;
      case '(':
        out += i > 0 && s[i - 1] == ']' ? "\\(" : "(";
        break;
      default:
        out += is_control(c) ? "\\" + escaped_control(c) : std::string(1, c);
    }
  }
  return out;
}

std::string markdown_code(const std::string& s) {
  std::string text;
  for (char c : s)
    text += c == '|' ? std::string("\\|") : is_control(c) ? escaped_control(c) : std::string(1, c);
  std::size_t longest = 0, run = 0;
  for (char c : text) longest = std::max(longest, run = c == '`' ? run + 1 : 0);
  const std::string fence(longest + 1, '`');
  const bool pad = !text.empty() && (text.front() == '`' || text.back() == '`');
  return fence + (pad ? " " : "") + text + (pad ? " " : "") + fence;
}

std::string url_path(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : path) {
    const auto b = static_cast<unsigned char>(c);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
    if (plain)
      out += c;
    else
      out += {'%', kHex[b >> 4], kHex[b & 15]};
  }
  return out;
}

std::string html_text(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : visible(s)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string safe_file_name(const std::string& name) {
  bool plain = !name.empty() && name.size() <= kMaxSafeNameBytes && name.front() != '.';
  for (char c : name) plain = plain && plain_name_char(c);
  if (plain) return name;
  const std::string tag = "-" + sha256_hex(name).substr(0, 10);
  std::string kept;
  for (char c : name.substr(0, kMaxSafeNameBytes - tag.size()))
    kept += plain_name_char(c) ? c : '_';
  if (!kept.empty() && kept.front() == '.') kept.front() = '_';
  return kept + tag;
}

std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < length; ++i) out += {hex[digest[i] >> 4], hex[digest[i] & 15]};
  return out;
}

}  // namespace sdpa
