#include "sdpa/json_schema.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

namespace sdpa {
namespace {

// valijson reads nlohmann's unordered json; the schema is small, the conversion cheap.
using plain_json = nlohmann::json;

// "/token" with the JSON pointer's escapes.
std::string pointer_step(const std::string& token) {
  std::string step = "/";
  for (char ch : token) step += ch == '~' ? "~0" : ch == '/' ? "~1" : std::string(1, ch);
  return step;
}

std::string json_pointer(const std::vector<std::string>& context) {
  // valijson's context is {"<root>", "[experiments]", "[0]", ...}.
  std::string p;
  for (const auto& c : context)
    if (c != "<root>" && c.size() >= 2) p += pointer_step(c.substr(1, c.size() - 2));
  return p;
}

// A value nested too deep: its path (the first steps only; the rest says nothing more) and
// the problem.
JsonTextError too_deep(const std::vector<std::string>& steps) {
  std::string p;
  for (std::size_t i = 0; i < steps.size() && i < 8; ++i) p += steps[i];
  if (steps.size() > 8) p += "/...";
  return {p, "expected at most " + std::to_string(kMaxJsonDepth) +
                 " levels of lists and objects nested in each other, found more"};
}

// The compact text of `v` as v.dump() writes it, cut once it passes `limit` characters. An
// explicit stack instead of recursion: any depth costs at most `limit` steps.
std::string bounded_dump(const json& v, std::size_t limit) {
  struct Open {
    const json* node;
    json::const_iterator next;
  };
  std::vector<Open> stack;
  std::string out;
  auto emit = [&](const json& x) {
    if (!x.is_structured()) {
      out += x.dump(-1, ' ', false, json::error_handler_t::replace);
      return;
    }
    out += x.is_object() ? '{' : '[';
    stack.push_back({&x, x.cbegin()});
  };
  emit(v);
  while (!stack.empty() && out.size() <= limit) {
    Open& top = stack.back();
    if (top.next == top.node->cend()) {
      out += top.node->is_object() ? '}' : ']';
      stack.pop_back();
      continue;
    }
    if (top.next != top.node->cbegin()) out += ',';
    if (top.node->is_object()) out += json(top.next.key()).dump() + ":";
    const json& child = *top.next++;
    emit(child);  // may grow the stack: `top` is not used after this
  }
  return out;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// What a schema node without a description accepts, from its type and bounds.
std::string summary(const json& node) {
  if (node.contains("const")) return node["const"].dump();
  static const std::map<std::string, std::string> names = {
      {"integer", "an integer"}, {"number", "a number"},
      {"string", "a string"},    {"boolean", "true or false"},
      {"object", "an object"},   {"array", "a list"},
      {"null", "null"}};
  std::string text;
  if (node.contains("type")) {
    const json types = node["type"].is_array() ? node["type"] : json::array({node["type"]});
    for (const auto& t : types) {
      const auto it = names.find(t.get<std::string>());
      text +=
          (text.empty() ? "" : " or ") + (it == names.end() ? t.get<std::string>() : it->second);
    }
  }
  if (node.contains("minimum")) text += " >= " + node["minimum"].dump();
  if (node.contains("maximum"))
    text += std::string(node.contains("minimum") ? "," : "") + " at most " + node["maximum"].dump();
  if (node.contains("minItems") && node.contains("maxItems") &&
      node["minItems"] == node["maxItems"])
    text += " of " + node["minItems"].dump() + " items";
  if (node.contains("pattern")) text += " matching " + node["pattern"].dump();
  return text.empty() ? "a value matching the schema" : text;
}

// The schema as the validator needs it and as messages need it: the node that describes a
// JSON path of a document, following $ref and the experiment kind's if/then branch.
class SchemaIndex {
 public:
  explicit SchemaIndex(const json& schema) : schema_(schema) {}

  const json& resolve(const json* node) const {
    while (node->contains("$ref")) {
      const std::string ref = (*node)["$ref"];  // "#/definitions/x"
      node = &schema_.at(json::json_pointer(ref.substr(1)));
    }
    return *node;
  }

  // The property schemas that apply to an object node of `doc`.
  std::vector<std::pair<std::string, const json*>> properties(const json& node,
                                                              const json& doc) const {
    std::vector<std::pair<std::string, const json*>> props;
    if (node.contains("properties"))
      for (auto& [k, v] : node["properties"].items()) props.emplace_back(k, &v);
    // An if/then adds the properties of its "then" when the document meets its "if"; each
    // branch of an allOf adds its own.
    if (node.contains("if") && node.contains("then") && condition_holds(node["if"], doc))
      for (auto& p : properties(resolve(&node["then"]), doc)) props.push_back(p);
    if (node.contains("allOf"))
      for (const auto& branch : node["allOf"])
        for (auto& p : properties(resolve(&branch), doc)) props.push_back(p);
    return props;
  }

  // Walks `pointer` through the schema; stops at a oneOf (a "this or a list of this" grid),
  // whose description then covers the elements too. Returns the deepest node reached with
  // its own (unresolved) node, whose description takes precedence.
  std::pair<const json*, const json*> node_at(const json& doc, const std::string& pointer) const {
    const json* raw = &schema_;
    const json* node = &resolve(raw);
    const json* here = &doc;
    std::istringstream tokens(pointer);
    std::string token;
    std::getline(tokens, token, '/');  // leading empty token
    while (std::getline(tokens, token, '/')) {
      if (node->contains("oneOf")) break;
      const json* next = nullptr;
      if (here->is_object()) {
        for (auto& [k, v] : properties(*node, *here))
          if (k == token) next = v;
        if (next == nullptr || !here->contains(token)) break;
        here = &(*here)[token];
      } else if (here->is_array() && node->contains("items")) {
        next = &(*node)["items"];
        here = &(*here)[std::stoul(token)];
      } else {
        break;
      }
      raw = next;
      node = &resolve(next);
    }
    return {raw, node};
  }

  // What a value at `pointer` should be; with `words`, the enum's words too.
  std::string expected(const json& doc, const std::string& pointer, bool words = true) const {
    auto [raw, node] = node_at(doc, pointer);
    std::string text = raw->contains("description")    ? (*raw)["description"].get<std::string>()
                       : node->contains("description") ? (*node)["description"].get<std::string>()
                                                       : summary(*node);
    if (words && node->contains("enum"))
      text += ", one of " + join_quoted(enum_words(doc, pointer));
    return text;
  }

  // The words a value at `pointer` may be (its node's enum), empty when it has none.
  std::vector<std::string> enum_words(const json& doc, const std::string& pointer) const {
    const json* node = node_at(doc, pointer).second;
    std::vector<std::string> words;
    if (node->contains("enum"))
      for (const auto& e : (*node)["enum"]) words.push_back(e.get<std::string>());
    return words;
  }

  std::vector<std::string> allowed_keys(const json& doc, const std::string& pointer) const {
    auto [raw, node] = node_at(doc, pointer);
    std::vector<std::string> keys;
    for (auto& [k, v] : properties(*node, doc.at(json::json_pointer(pointer)))) keys.push_back(k);
    return keys;
  }

 private:
  // The conditions that select properties: {"properties": {"kind": {"const": X}}}. Others
  // (a statistic's "predicted is a number") add required keys, not properties.
  static bool condition_holds(const json& condition, const json& doc) {
    if (!doc.is_object() || !condition.contains("properties")) return false;
    for (auto& [k, v] : condition["properties"].items())
      if (!v.contains("const") || !doc.contains(k) || doc[k] != v["const"]) return false;
    return true;
  }

  const json& schema_;
};

std::string quoted_name(const std::string& description) {
  // valijson names keys as '...' at the end of its description.
  const auto end = description.rfind('\'');
  const auto begin = description.rfind('\'', end - 1);
  if (end == std::string::npos || begin == std::string::npos) return "";
  return description.substr(begin + 1, end - begin - 1);
}

}  // namespace

struct JsonSchema::Compiled {
  json document;
  valijson::Schema schema;
};

JsonSchema::JsonSchema(const std::string& schema_text) : compiled_(std::make_unique<Compiled>()) {
  compiled_->document = json::parse(schema_text);
  const plain_json plain = plain_json::parse(schema_text);
  valijson::SchemaParser parser;
  valijson::adapters::NlohmannJsonAdapter adapter(plain);
  parser.populateSchema(adapter, compiled_->schema);
}

JsonSchema::~JsonSchema() = default;

std::string json_error_message(const std::exception& e) {
  std::string what = e.what();
  if (const auto tag = what.find("] ");
      what.rfind("[json.exception.", 0) == 0 && tag != std::string::npos)
    what.erase(0, tag + 2);
  if (what.rfind("parse error", 0) == 0)
    if (const auto colon = what.find(": "); colon != std::string::npos) what.erase(0, colon + 2);
  return what;
}

const json& JsonSchema::document() const { return compiled_->document; }

std::string describe_found(const json& v) {
  std::string dumped = bounded_dump(v, 60);
  if (dumped.size() > 60) dumped = dumped.substr(0, 57) + "...";
  if (v.is_array() && v.empty()) return "an empty list";
  if (v.is_string()) return "string " + dumped;
  if (v.is_boolean()) return "boolean " + dumped;
  if (v.is_null()) return "null";
  if (v.is_number()) return "number " + dumped;
  if (v.is_array()) return "list " + dumped;
  return "object " + dumped;
}

std::string nesting_problem(const json& document) {
  struct Open {
    const json* node;
    json::const_iterator next;
    std::size_t index;
  };
  std::vector<Open> stack;
  std::vector<std::string> steps;  // the path of the value being entered
  if (document.is_structured()) stack.push_back({&document, document.cbegin(), 0});
  while (!stack.empty()) {
    Open& top = stack.back();
    if (top.next == top.node->cend()) {
      stack.pop_back();
      if (!steps.empty()) steps.pop_back();
      continue;
    }
    steps.push_back(
        pointer_step(top.node->is_object() ? top.next.key() : std::to_string(top.index)));
    const json& child = *top.next++;
    ++top.index;
    if (!child.is_structured()) {
      steps.pop_back();
      continue;
    }
    if (stack.size() >= std::size_t(kMaxJsonDepth)) {
      const JsonTextError e = too_deep(steps);
      return e.where + ": " + e.message;
    }
    stack.push_back({&child, child.cbegin(), 0});  // `top` is not used after this
  }
  return "";
}

std::string JsonTextError::in_file(const std::string& file) const {
  if (where.empty()) return file + ": " + message;
  return file + (where[0] == '/' ? ": " : ":") + where + ": " + message;
}

json parse_json_text(const std::string& text) {
  // What the parser is inside of, so that a duplicate key or a level too deep is named by
  // its path: an object's keys so far, or an array's index.
  struct Open {
    bool object;
    std::set<std::string> keys;
    std::string key;
    std::size_t index = 0;
  };
  std::vector<Open> stack;
  auto steps = [&](const std::string* last_key) {
    std::vector<std::string> out;
    out.reserve(stack.size());
    for (const auto& o : stack)
      out.push_back(pointer_step(o.object ? (&o == &stack.back() && last_key ? *last_key : o.key)
                                          : std::to_string(o.index)));
    return out;
  };
  auto pointer = [&](const std::vector<std::string>& s) {
    std::string p;
    for (const auto& step : s) p += step;
    return p;
  };
  auto child_done = [&] {
    if (!stack.empty() && !stack.back().object) ++stack.back().index;
  };
  const json::parser_callback_t track = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (stack.size() >= std::size_t(kMaxJsonDepth)) throw too_deep(steps(nullptr));
        stack.push_back({event == json::parse_event_t::object_start, {}, {}, 0});
        break;
      case json::parse_event_t::key: {
        const std::string key = parsed.get<std::string>();
        if (!stack.back().keys.insert(key).second)
          throw JsonTextError{pointer(steps(&key)),
                              "duplicate key \"" + key +
                                  "\" (each key may appear once in an object; the last "
                                  "would silently win)"};
        stack.back().key = key;
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack.pop_back();
        child_done();
        break;
      case json::parse_event_t::value:
        child_done();
        break;
    }
    return true;
  };
  try {
    return json::parse(text, track);
  } catch (const json::parse_error& e) {
    // nlohmann reports the byte after the error; users want a line and a column.
    std::size_t line = 1, column = 1;
    const std::size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
      if (text[i] == '\n')
        line++, column = 1;
      else
        column++;
    }
    throw JsonTextError{std::to_string(line) + ":" + std::to_string(column),
                        "not valid JSON: " + json_error_message(e)};
  } catch (const json::exception& e) {  // e.g. a number too large for a double
    throw JsonTextError{"", "not valid JSON: " + json_error_message(e)};
  }
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) best = c, best_d = d;
  }
  return best;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (std::size_t end; (end = text.find(separator, begin)) != std::string::npos; begin = end + 1)
    parts.push_back(text.substr(begin, end - begin));
  parts.push_back(text.substr(begin));
  return parts;
}

std::string join_quoted(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "\"" : ", \"") + w + "\"";
  return s;
}

// Turns valijson's error tree into one message per deepest failing path.
std::vector<std::string> JsonSchema::problems(const json& doc) const {
  // The conversion below and valijson both recurse once per level.
  if (const std::string deep = nesting_problem(doc); !deep.empty()) return {deep};
  const plain_json plain = plain_json::parse(doc.dump());
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter adapter(plain);
  if (validator.validate(compiled_->schema, adapter, &results)) return {};

  struct Failure {
    std::string path, description;
  };
  std::vector<Failure> failures;
  valijson::ValidationResults::Error e;
  while (results.popError(e)) failures.push_back({json_pointer(e.context), e.description});

  const SchemaIndex index(compiled_->document);
  std::vector<std::string> problems;
  std::set<std::string> seen;
  auto add = [&](const std::string& line) {
    if (seen.insert(line).second) problems.push_back(line);
  };
  for (const auto& f : failures) {
    const bool has_deeper = std::any_of(failures.begin(), failures.end(), [&](const Failure& o) {
      return o.path.size() > f.path.size() &&
             o.path.compare(0, f.path.size() + 1, f.path + "/") == 0;
    });
    const bool unknown_key =
        f.description.find("could not be validated using 'properties'") != std::string::npos;
    const bool missing = f.description.rfind("Missing required property", 0) == 0;
    if (unknown_key) {
      const std::string key = quoted_name(f.description);
      const std::string hint = closest(key, index.allowed_keys(doc, f.path));
      add(f.path + "/" + key + ": unknown key \"" + key + "\"" +
          (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)"));
    } else if (missing) {
      add((f.path.empty() ? "/" : f.path) + ": missing required key \"" +
          quoted_name(f.description) + "\"");
    } else if (!has_deeper && f.description.rfind("Failed to validate against", 0) != 0 &&
               f.description.rfind("Failed to validate item", 0) != 0) {
      const json& found = doc.at(json::json_pointer(f.path));
      const std::string hint =
          found.is_string() ? closest(found.get<std::string>(), index.enum_words(doc, f.path)) : "";
      // The nearest word when one is near, else them all.
      add((f.path.empty() ? "/" : f.path) + ": expected " +
          index.expected(doc, f.path, hint.empty()) + ", found " + describe_found(found) +
          (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)"));
    }
  }
  std::sort(problems.begin(), problems.end());
  return problems;
}
}  // namespace sdpa
