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

std::string json_pointer(const std::vector<std::string>& context) {
  // valijson's context is {"<root>", "[experiments]", "[0]", ...}.
  std::string p;
  for (const auto& c : context) {
    if (c == "<root>" || c.size() < 2) continue;
    std::string token = c.substr(1, c.size() - 2);
    std::string escaped;
    for (char ch : token) escaped += ch == '~' ? "~0" : ch == '/' ? "~1" : std::string(1, ch);
    p += "/" + escaped;
  }
  return p;
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
    if (node.contains("allOf"))
      for (const auto& branch : node["allOf"]) {
        if (!branch.contains("then") || !condition_holds(branch["if"], doc)) continue;
        for (auto& p : properties(resolve(&branch["then"]), doc)) props.push_back(p);
      }
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

  std::string expected(const json& doc, const std::string& pointer) const {
    auto [raw, node] = node_at(doc, pointer);
    std::string text = raw->contains("description")    ? (*raw)["description"].get<std::string>()
                       : node->contains("description") ? (*node)["description"].get<std::string>()
                                                       : summary(*node);
    if (node->contains("enum")) {
      std::vector<std::string> words;
      for (const auto& e : (*node)["enum"]) words.push_back(e.get<std::string>());
      text += ", one of " + join_quoted(words);
    }
    return text;
  }

  std::vector<std::string> allowed_keys(const json& doc, const std::string& pointer) const {
    auto [raw, node] = node_at(doc, pointer);
    std::vector<std::string> keys;
    for (auto& [k, v] : properties(*node, doc.at(json::json_pointer(pointer)))) keys.push_back(k);
    return keys;
  }

 private:
  // The only conditions these schemas use: {"properties": {"kind": {"const": X}}}.
  static bool condition_holds(const json& condition, const json& doc) {
    if (!doc.is_object()) return false;
    for (auto& [k, v] : condition["properties"].items())
      if (!doc.contains(k) || doc[k] != v["const"]) return false;
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
  std::string dumped = v.dump();
  if (dumped.size() > 60) dumped = dumped.substr(0, 57) + "...";
  if (v.is_array() && v.empty()) return "an empty list";
  if (v.is_string()) return "string " + dumped;
  if (v.is_boolean()) return "boolean " + dumped;
  if (v.is_null()) return "null";
  if (v.is_number()) return "number " + dumped;
  if (v.is_array()) return "list " + dumped;
  return "object " + dumped;
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

std::string join_quoted(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "\"" : ", \"") + w + "\"";
  return s;
}

// Turns valijson's error tree into one message per deepest failing path.
std::vector<std::string> JsonSchema::problems(const json& doc) const {
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
      add((f.path.empty() ? "/" : f.path) + ": expected " + index.expected(doc, f.path) +
          ", found " + describe_found(found));
    }
  }
  std::sort(problems.begin(), problems.end());
  return problems;
}
}  // namespace sdpa
