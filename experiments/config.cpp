// Loading a config: read, parse, validate against configs/schema.json (valijson), then the
// checks a schema cannot express. Every problem becomes one line naming the file, the JSON
// path, what was expected and what was found.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string_view>

#include "config_schema_parts.hpp"
#include "grid.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/input_file.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa {
namespace {

// Old parameter names (ExperimentKind::renamed) in a config: each is read under its new name
// with a note, or is a problem when the new name is given too.
struct OldNames {
  std::vector<std::string> problems, notes;
};
OldNames old_names(const json& doc) {
  OldNames out;
  const auto& experiments = doc["experiments"];
  for (std::size_t i = 0; i < experiments.size(); ++i)
    for (const auto& [old, now] : find_experiment_kind(experiments[i]["kind"])->renamed) {
      if (!experiments[i].contains(old)) continue;
      const std::string at = "/experiments/" + std::to_string(i) + "/" + old + ": \"" + old +
                             "\" is the old name of \"" + now + "\"";
      if (experiments[i].contains(now))
        out.problems.push_back(at + "; give only \"" + now + "\"");
      else
        out.notes.push_back(at + " (read as " + now + "); rename it");
    }
  return out;
}

// Checks the schema cannot express: names that must be unique, kernels from the registry,
// each kind's own rules, and memory the machine does not have.
// The products of a cell's sizes that the suite computes in 64-bit integers, each checked
// exactly: the work of one call (batch x heads x n_q x n_kv x d: tensors and score counts are
// factors of it) and the repeats of an experiment (cells x trials x seeds x steps). The first
// product that overflows, as ": <each factor and its value> overflows ...", else empty.
std::string size_problem(const json& params, std::size_t cells) {
  const auto size = [&](const char* key) -> std::int64_t {
    const auto it = params.find(key);
    return it != params.end() && it->is_number_integer() && it->get<std::int64_t>() > 0
               ? it->get<std::int64_t>()
               : 0;
  };
  const auto largest = [&](std::initializer_list<const char*> keys) {
    const char* best = nullptr;
    for (const char* k : keys)
      if (size(k) > 0 && (best == nullptr || size(k) > size(best))) best = k;
    return best;
  };
  const std::vector<std::vector<const char*>> products = {
      {"batch_heads", "batch", "heads", "heads_q", "n_q", largest({"n_kv", "n_k", "n_pairs"}),
       largest({"d_k", "d_v", "d_model"})},
      {"cells", "trials", "seeds", "steps"}};
  for (const auto& keys : products) {
    std::int64_t product = 1;
    std::string factors;
    bool overflow = false;
    for (const char* k : keys) {
      const std::int64_t x = k == nullptr                     ? 0
                             : std::string_view(k) == "cells" ? std::int64_t(cells)
                                                              : size(k);
      if (x == 0) continue;
      factors += (factors.empty() ? "" : " x ") + std::string(k) + " " + std::to_string(x);
      overflow = overflow || __builtin_mul_overflow(product, x, &product);
    }
    if (overflow)
      return ": " + factors +
             " overflows a 64-bit integer: expected a product of at most 9223372036854775807 "
             "(2^63 - 1); reduce the sizes";
  }
  return {};
}

std::vector<std::string> semantic_problems(const json& doc, int threads) {
  std::vector<std::string> problems = old_names(doc).problems;
  std::set<std::string> names;
  const auto& experiments = doc["experiments"];
  for (std::size_t i = 0; i < experiments.size(); ++i) {
    const json& e = experiments[i];
    const std::string at = "/experiments/" + std::to_string(i);
    const std::string name = e["name"];
    if (!names.insert(name).second)
      problems.push_back(at + "/name: duplicate experiment name \"" + name + "\"");
    if (e.contains("kernel")) {
      const json list = grid_values(e["kernel"]);
      for (std::size_t j = 0; j < list.size(); ++j) {
        const std::string k = list[j];
        // A timing config may name another machine's kernels (its cells are recorded as not
        // run), so one config compares x86 and Arm; statistics need a kernel that runs here.
        if (const Kernel* kernel = find_kernel(k)) {
          // A peer that returns O only (ggml) has none of the statistics the other kinds read.
          if (!kernel->row_statistics && e["kind"] != "timing")
            problems.push_back(at + grid_path(e, "kernel", j) + ": kernel \"" + k +
                               "\" returns the output only (no lse, no probes): kind \"timing\" "
                               "can time it, kind " +
                               e["kind"].dump() + " cannot run it");
          continue;
        }
        const auto elsewhere = kernel_elsewhere(k);
        if (e["kind"] == "timing" && elsewhere) continue;
        if (elsewhere && k.find('@') == std::string::npos) {  // a peer this build lacks
          problems.push_back(at + grid_path(e, "kernel", j) + ": kernel \"" + k +
                             "\" cannot run here: " + *elsewhere +
                             "; kind \"timing\" records its cells as not run, kind " +
                             e["kind"].dump() + " needs it");
          continue;
        }
        if (elsewhere) {
          // Another machine's instruction set (a precision's native units this CPU lacks, e.g.
          // flash-bf16@avx512-bf16 without AVX512_BF16): name what runs here instead.
          const std::string family = k.substr(0, k.find('@'));
          std::vector<std::string> here;
          std::string precision;
          for (const auto& kernel : kernel_registry())
            if (kernel.family == family) here.push_back(kernel.name), precision = kernel.precision;
          problems.push_back(
              at + grid_path(e, "kernel", j) + ": unknown kernel \"" + k +
              "\" on this machine: precision " + precision + " on instruction set \"" +
              k.substr(k.find('@') + 1) +
              "\", which this CPU or build cannot run; its family here: " + join_quoted(here));
          continue;
        }
        // One name, the nearest; the whole list is `sdpa-bench list`'s.
        const std::string hint = closest(k, kernel_names());
        problems.push_back(at + grid_path(e, "kernel", j) + ": unknown kernel \"" + k + "\"" +
                           (hint.empty() ? "; `sdpa-bench list` names the kernels of this machine"
                                         : " (did you mean \"" + hint + "\"?)"));
      }
    }
  }
  if (!problems.empty()) return problems;

  Config probe;
  probe.document = doc;
  std::vector<ExperimentPlan> plans;
  try {
    plans = make_plan(probe);
  } catch (const InputError& e) {  // a grid too large to expand
    return {e.what()};
  }
  for (const auto& plan : plans)
    if (plan.kind->check)
      for (const auto& p : plan.kind->check(plan.params))
        problems.push_back("/experiments/" + std::to_string(plan.index) + p);
  if (!problems.empty()) return problems;
  // Before anything multiplies the sizes in 64-bit integers (shapes, estimates, loops).
  for (const auto& plan : plans)
    for (const auto& cell : plan.cells)
      if (std::string p = size_problem(cell.params, plan.cells.size()); !p.empty()) {
        problems.push_back("/experiments/" + std::to_string(plan.index) + p);
        break;
      }
  if (!problems.empty()) return problems;

  // Each cell's values in range: the first cell out of range per experiment (the others of
  // a grid usually share its problem).
  for (const auto& plan : plans) {
    if (!plan.kind->cell_check) continue;
    std::size_t bad = 0;
    std::string first;
    for (const auto& cell : plan.cells)
      if (std::string p = plan.kind->cell_check(plan.params, cell.params); !p.empty())
        if (bad++ == 0) first = std::move(p);
    if (bad > 0)
      problems.push_back("/experiments/" + std::to_string(plan.index) + first +
                         (bad > 1 ? " (and " + std::to_string(bad - 1) + " more cell(s))" : ""));
  }
  if (!problems.empty()) return problems;
  return memory_problems(plans, threads);
}

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

std::vector<std::string> prefixed(const std::string& path, std::vector<std::string> lines) {
  for (auto& l : lines) l = path + ": " + l;
  return lines;
}

}  // namespace

const json& config_schema() {
  static const json schema = [] {
    json s = assemble_schema(
        kConfigSchemaBase, kConfigSchemaParts, "", "experiment",
        [](const std::string& ref) {
          return json{{"$ref", ref}};
        },
        "Assembled by sdpa-bench from kinds/config.schema.json and each kind's "
        "kinds/<kind>/config.schema.json (`make schemas` writes it here); edit those.");
    json& kinds = s["definitions"]["experiment"]["properties"]["kind"]["enum"];
    for (const SchemaText& part : kConfigSchemaParts) kinds.push_back(part.kind);
    return s;
  }();
  return schema;
}

Config parse_config(const std::string& path, const std::string& text) {
  Config c;
  c.path = path;
  c.text = text;
  try {
    c.document = parse_json_text(text);
  } catch (const JsonTextError& e) {
    throw InputError(e.in_file(path));
  }
  static const JsonSchema schema(config_schema().dump());
  auto problems = schema.problems(c.document);
  if (!problems.empty()) throw InputError::from_lines(prefixed(path, problems));
  const int threads = c.document.value("threads", default_threads());
  problems = semantic_problems(c.document, threads);
  if (!problems.empty()) throw InputError::from_lines(prefixed(path, problems));
  c.notes = prefixed(path, old_names(c.document).notes);
  c.name = c.document["name"];
  c.seed = c.document["seed"].get<std::uint64_t>();
  c.sha256 = sha256_hex(text);
  return c;
}

std::vector<std::string> memory_problems(const std::vector<ExperimentPlan>& plans, int threads) {
  // The largest cell of each experiment (cells run one after another), by its kind's estimate
  // for the cell's kernel and the threads running at once.
  std::vector<std::string> problems;
  const double available = available_memory_bytes();
  for (const auto& plan : plans) {
    if (!plan.kind->memory_bytes) continue;
    double need = 0;
    for (const auto& cell : plan.cells)
      need = std::max(need, plan.kind->memory_bytes(cell.params, threads));
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

std::string NumberRange::text() const {
  const std::string what = integer ? "an integer" : "a number";
  if (min <= -1e308 && max >= 1e308) return integer ? what : "a finite number";
  if (max >= 1e308) return what + (min_exclusive ? " > " : " >= ") + number_text(min);
  if (integer) return what + " from " + number_text(min) + " to " + number_text(max);
  return what + " in " + (min_exclusive ? "(" : "[") + number_text(min) + ", " + number_text(max) +
         "]";
}

NumberRange config_range(const std::string& pointer) {
  const json& node = config_schema().at(json::json_pointer(pointer));
  NumberRange r;
  r.integer = node.value("type", "") == "integer";
  if (node.contains("minimum")) r.min = node["minimum"];
  if (node.contains("exclusiveMinimum")) r.min = node["exclusiveMinimum"], r.min_exclusive = true;
  if (node.contains("maximum")) r.max = node["maximum"];
  return r;
}

double parse_number_option(const std::string& option, const std::string& text,
                           const NumberRange& range) {
  // strtod reads what a user types ("0.5", "1e-3", "20"), and also "inf", "nan" and hex,
  // which the range and the integer test then refuse.
  char* end = nullptr;
  errno = 0;
  const double x = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
  const bool whole = !text.empty() && end == text.c_str() + text.size() && !std::isspace(text[0]);
  const bool in_range = whole && std::isfinite(x) &&
                        (range.min_exclusive ? x > range.min : x >= range.min) && x <= range.max &&
                        (!range.integer || x == std::floor(x));
  if (!in_range)
    throw InputError(option + ": expected " + range.text() + ", found \"" + text + "\"");
  return x;
}

int parse_threads_option(const std::string& option, const std::string& text) {
  return int(parse_number_option(option, text, config_range("/properties/threads")));
}

Config load_config(const std::string& path) {
  return parse_config(path, read_input_file(path, "config"));
}

}  // namespace sdpa
