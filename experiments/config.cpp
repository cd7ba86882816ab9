// Loading a config: read, parse, validate against configs/schema.json (valijson), then the
// checks a schema cannot express. Every problem becomes one line naming the file, the JSON
// path, what was expected and what was found.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include "config_schema_text.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/input_file.hpp"
#include "sdpa/kernels.hpp"

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
                                                       : "a value matching the schema";
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
  // The only conditions this schema uses: {"properties": {"kind": {"const": X}}}.
  static bool condition_holds(const json& condition, const json& doc) {
    if (!doc.is_object()) return false;
    for (auto& [k, v] : condition["properties"].items())
      if (!doc.contains(k) || doc[k] != v["const"]) return false;
    return true;
  }

  const json& schema_;
};

const valijson::Schema& compiled_schema() {
  static const auto schema = [] {
    auto s = std::make_unique<valijson::Schema>();
    const plain_json doc = plain_json::parse(kConfigSchemaText);
    valijson::SchemaParser parser;
    valijson::adapters::NlohmannJsonAdapter adapter(doc);
    parser.populateSchema(adapter, *s);
    return s;
  }();
  return *schema;
}

std::string quoted_name(const std::string& description) {
  // valijson names keys as '...' at the end of its description.
  const auto end = description.rfind('\'');
  const auto begin = description.rfind('\'', end - 1);
  if (end == std::string::npos || begin == std::string::npos) return "";
  return description.substr(begin + 1, end - begin - 1);
}

// Turns valijson's error tree into one message per deepest failing path.
std::vector<std::string> schema_problems(const json& doc) {
  const plain_json plain = plain_json::parse(doc.dump());
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter adapter(plain);
  if (validator.validate(compiled_schema(), adapter, &results)) return {};

  struct Failure {
    std::string path, description;
  };
  std::vector<Failure> failures;
  valijson::ValidationResults::Error e;
  while (results.popError(e)) failures.push_back({json_pointer(e.context), e.description});

  const SchemaIndex index(config_schema());
  std::vector<std::string> problems;
  std::set<std::string> seen;
  auto add = [&](const std::string& line) {
    if (seen.insert(line).second) problems.push_back(line);
  };
  for (const auto& f : failures) {
    const bool has_deeper = std::any_of(failures.begin(), failures.end(), [&](const Failure& o) {
      return o.path.size() > f.path.size() && o.path.compare(0, f.path.size() + 1, f.path + "/") == 0;
    });
    const bool unknown_key = f.description.find("could not be validated using 'properties'") !=
                             std::string::npos;
    const bool missing = f.description.rfind("Missing required property", 0) == 0;
    if (unknown_key) {
      const std::string key = quoted_name(f.description);
      const std::string hint = closest(key, index.allowed_keys(doc, f.path));
      add(f.path + "/" + key + ": unknown key \"" + key + "\"" +
          (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)"));
    } else if (missing) {
      add(f.path + ": missing required key \"" + quoted_name(f.description) + "\"");
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

// Checks the schema cannot express: names that must be unique, kernels from the registry,
// each kind's own rules, and memory the machine does not have.
std::vector<std::string> semantic_problems(const json& doc, int threads) {
  std::vector<std::string> problems;
  std::set<std::string> names;
  const auto& experiments = doc["experiments"];
  for (std::size_t i = 0; i < experiments.size(); ++i) {
    const json& e = experiments[i];
    const std::string at = "/experiments/" + std::to_string(i);
    const std::string name = e["name"];
    if (!names.insert(name).second)
      problems.push_back(at + "/name: duplicate experiment name \"" + name + "\"");
    if (e.contains("kernel")) {
      const json list = e["kernel"].is_array() ? e["kernel"] : json::array({e["kernel"]});
      for (std::size_t j = 0; j < list.size(); ++j) {
        const std::string k = list[j];
        if (find_kernel(k)) continue;
        const std::string hint = closest(k, kernel_names());
        problems.push_back(at + "/kernel" + (e["kernel"].is_array() ? "/" + std::to_string(j) : "") +
                           ": unknown kernel \"" + k + "\"" +
                           (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") +
                           "; kernels on this machine: " + join_quoted(kernel_names()));
      }
    }
  }
  if (!problems.empty()) return problems;

  Config probe;
  probe.document = doc;
  const auto plans = make_plan(probe);
  for (const auto& plan : plans)
    if (plan.kind->check)
      for (const auto& p : plan.kind->check(plan.params))
        problems.push_back("/experiments/" + std::to_string(plan.index) + p);
  if (!problems.empty()) return problems;

  // Memory: the largest cell of each experiment, once per thread running at the same time.
  const double available = available_memory_bytes();
  for (const auto& plan : plans) {
    if (!plan.kind->bytes_per_thread) continue;
    double worst = 0;
    for (const auto& cell : plan.cells) worst = std::max(worst, plan.kind->bytes_per_thread(cell.params));
    const double need = worst * threads;
    if (need > 0.8 * available) {
      std::ostringstream msg;
      msg.precision(3);
      msg << "/experiments/" << plan.index << ": needs about " << need / (1 << 30)
          << " GiB at once (" << threads << " thread(s)), but the machine has "
          << available / (1 << 30) << " GiB available; reduce the sizes";
      problems.push_back(msg.str());
    }
  }
  return problems;
}

std::pair<std::size_t, std::size_t> line_and_column(const std::string& text, std::size_t byte) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') line++, column = 1;
    else column++;
  }
  return {line, column};
}

std::vector<std::string> prefixed(const std::string& path, std::vector<std::string> lines) {
  for (auto& l : lines) l = path + ": " + l;
  return lines;
}

}  // namespace

const json& config_schema() {
  static const json schema = json::parse(kConfigSchemaText);
  return schema;
}

Config parse_config(const std::string& path, const std::string& text) {
  Config c;
  c.path = path;
  c.text = text;
  try {
    c.document = json::parse(text);
  } catch (const json::parse_error& e) {
    // nlohmann reports the byte after the error; users want a line and a column.
    auto [line, column] = line_and_column(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    what = what.substr(what.find(':') + 2);  // drop "[json.exception.parse_error.101] "
    throw InputError(path + ":" + std::to_string(line) + ":" + std::to_string(column) +
                     ": not valid JSON: " + what);
  }
  auto problems = schema_problems(c.document);
  if (!problems.empty()) throw InputError::from_lines(prefixed(path, problems));
  const int threads = c.document.value("threads", default_threads());
  problems = semantic_problems(c.document, threads);
  if (!problems.empty()) throw InputError::from_lines(prefixed(path, problems));
  c.name = c.document["name"];
  c.seed = c.document["seed"].get<std::uint64_t>();
  c.sha256 = sha256_hex(text);
  return c;
}

Config load_config(const std::string& path) {
  return parse_config(path, read_input_file(path, "config"));
}

}  // namespace sdpa
