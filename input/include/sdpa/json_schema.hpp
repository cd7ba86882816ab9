// JSON Schema (draft 7, valijson) with messages a user can act on: one line per problem,
// "<JSON path>: expected <what the schema says>, found <what the document has>", unknown keys
// with the nearest valid key, missing keys by name. Configs and result files are both checked
// this way.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "sdpa/json.hpp"

namespace sdpa {

class JsonSchema {
 public:
  // `schema_text` is a schema this program ships; a bad one is a programming error.
  explicit JsonSchema(const std::string& schema_text);
  ~JsonSchema();
  JsonSchema(const JsonSchema&) = delete;
  JsonSchema& operator=(const JsonSchema&) = delete;

  // One line per problem, sorted and without repeats; empty when `document` is valid.
  // A node's "description" says what is expected there; without one, its type does.
  std::vector<std::string> problems(const json& document) const;

  const json& document() const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

// A JSON value as a message shows it: `string "a"`, `number 0`, `an empty list`, ... Bounded
// and without recursion: a value nested 100 000 levels deep costs a few dozen steps.
std::string describe_found(const json& value);

// How deep a document of ours may nest. Configs and result files nest about ten levels; past
// this limit a document is refused, since serialising, comparing or validating one recurses
// once per level and a few ten thousand levels overflow the stack.
inline constexpr int kMaxJsonDepth = 64;

// The problem line "<JSON path>: expected ..., found ..." of the first value of `document`
// nested deeper than kMaxJsonDepth; empty when there is none. Walks without recursion.
std::string nesting_problem(const json& document);

// A JSON text refused: where (a "<line>:<column>" or a JSON path, or empty) and why.
struct JsonTextError {
  std::string where, message;
  // "<file>:<line>:<column>: <message>" or "<file>: <JSON path>: <message>".
  std::string in_file(const std::string& file) const;
};

// Parses a user's JSON text: refuses a syntax error (at its line and column), a duplicate
// key in an object (the last would silently win) and nesting deeper than kMaxJsonDepth (both
// at their JSON path), by throwing JsonTextError.
json parse_json_text(const std::string& text);

// The candidate nearest to `word` (edit distance), or "" when none is near enough to be what
// was meant.
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

// A JSON library error as a user reads it: without "[json.exception.parse_error.101] parse
// error at line 1, column 2: ", which messages say their own way.
std::string json_error_message(const std::exception& e);

// "a", "b", "c" (each quoted).
std::string join_quoted(const std::vector<std::string>& words);

// "a,b,,c" split at `separator`: {"a", "b", "", "c"} ("" gives {""}).
std::vector<std::string> split(const std::string& text, char separator);

}  // namespace sdpa
