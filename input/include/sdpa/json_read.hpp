// Values read from a user's JSON after its schema check. A schema admits null where a number was
// not finite, and a reader may need a type the schema does not promise there: these accessors
// throw JsonTypeError naming the node, and at_paths() turns it, where the files are known, into
// an InputError "<file>: <JSON path>: expected <type>, found <value>" (exit 2). Any other JSON
// library error a reader lets through becomes an InputError naming the files, never exit 1.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sdpa/input_error.hpp"
#include "sdpa/json.hpp"

namespace sdpa {

// A node of a user's file that has not the type a reader needs.
struct JsonTypeError {
  const json* node;
  const char* expected;  // "a number", ...
};

// The value of a node that must be a number (throws JsonTypeError).
double number_in(const json& node);

// The bytes of a machine.caches size as sysfs writes it ("48K", "32768K", occasionally "M" or
// "G"); 0 for any other text.
double cache_size_bytes(const std::string& size);

// The JSON pointer of `node` inside `root`, found by address ("" for the root), or nullopt.
std::optional<std::string> pointer_to(const json& root, const json* node);

// A document and the file it was read from.
struct NamedJson {
  std::string file;
  const json* doc;
};

// "<file>: <JSON path>" of a node of one of `files`; their names, comma-separated, when the
// node is in none of them.
std::string located(const std::vector<NamedJson>& files, const json* node);

// The InputError for a node of `files` of another type than a reader needs; `why`, when given,
// is added in parentheses ("claim 3 decides by it").
InputError type_error_in(const std::vector<NamedJson>& files, const JsonTypeError& bad,
                         const std::string& why = "");

// "<files>: <what>: a value of an unexpected type: <the library's message without its code>".
InputError json_library_error(const std::vector<NamedJson>& files, const std::string& what,
                              const std::exception& e);

// Runs `read` over `files`; what it throws for a node of the wrong type becomes an InputError
// naming the file and JSON path (a JsonTypeError) or the files and `what` (a JSON library
// error, which knows no path).
template <class Read>
decltype(auto) at_paths(const std::vector<NamedJson>& files, const std::string& what, Read&& read) {
  try {
    return read();
  } catch (const JsonTypeError& bad) {
    throw type_error_in(files, bad);
  } catch (const json::exception& e) {
    throw json_library_error(files, what, e);
  }
}
}  // namespace sdpa
