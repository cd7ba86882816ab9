// Sharded sweeps: which cells a shard runs, the merge of the shards' result files, and the
// Slurm batch scripts that run them (see sdpa/shard.hpp).
#include "sdpa/shard.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <queue>
#include <string_view>

#include "sdpa/escape.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/report.hpp"

namespace sdpa {
namespace {

// `text` as a whole decimal integer from lo to hi, else InputError "<where>: expected ...".
int parse_index(const std::string& where, const std::string& text, long lo, long hi,
                const std::string& expected) {
  const bool digits = !text.empty() && text.size() <= 9 &&
                      text.find_first_not_of("0123456789") == std::string::npos;
  const long value = digits ? std::strtol(text.c_str(), nullptr, 10) : -1;
  if (value < lo || value > hi)
    throw InputError(where + ": expected " + expected + ", found \"" + text + "\"");
  return int(value);
}

std::string range_text(long lo, long hi) {
  return "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
}

// A Slurm array task's shard: its ID in an array 0-(N-1) of step 1, N its task count.
Shard slurm_shard(const std::string& option) {
  auto variable = [&](const char* name, bool required) -> std::string {
    const char* value = std::getenv(name);
    if (value == nullptr && required)
      throw InputError(option + " slurm: " + name +
                       " is not set: expected to run as a task of a Slurm job array (sbatch "
                       "--array=0-<N-1>, as `sdpa-bench slurm` writes it)");
    return value == nullptr ? "" : value;
  };
  Shard s;
  s.count = parse_index("SLURM_ARRAY_TASK_COUNT", variable("SLURM_ARRAY_TASK_COUNT", true), 1,
                        long(kMaxCells), range_text(1, long(kMaxCells)));
  const std::string array = "an array 0-" + std::to_string(s.count - 1) + " of step 1 (" +
                            std::to_string(s.count) + " tasks)";
  s.index = parse_index("SLURM_ARRAY_TASK_ID", variable("SLURM_ARRAY_TASK_ID", true), 0,
                        s.count - 1, range_text(0, s.count - 1) + ", " + array);
  // An array 1-N or 0-2N:2 has N tasks too, yet IDs that do not number the shards.
  const std::pair<const char*, int> bounds[] = {{"SLURM_ARRAY_TASK_MIN", 0},
                                                {"SLURM_ARRAY_TASK_MAX", s.count - 1},
                                                {"SLURM_ARRAY_TASK_STEP", 1}};
  for (const auto& [name, expected] : bounds)
    if (const std::string value = variable(name, false); !value.empty())
      parse_index(name, value, expected, expected, std::to_string(expected) + ", " + array);
  return s;
}

std::size_t total_cells(const std::vector<ExperimentPlan>& plans) {
  std::size_t n = 0;
  for (const auto& p : plans) n += p.cells.size();
  return n;
}

// A cell parameter that is a number, else `fallback` (absent, or a name such as "all").
double number(const json& params, const char* key, double fallback) {
  const auto it = params.find(key);
  return it != params.end() && it->is_number() ? it->get<double>() : fallback;
}

bool is_measurement(const json& experiment) {
  return experiment["kind"] == "timing" || experiment["kind"] == "roofline";
}

// "<path>: <pointer>: expected <expected> (as in <first>), found <found>".
[[noreturn]] void mismatch(const std::string& path, const std::string& pointer,
                           const json& expected, const std::string& first, const json& found) {
  throw InputError(path + ": " + pointer + ": expected " + expected.dump() + " (as in " + first +
                   "), found " + found.dump() +
                   ": shards of one sweep share the config, seed "
                   "and suite commit");
}

// "--array" or "--dependency" when sbatch would read `option` as one of them, else null.
// sbatch parses with getopt_long: a long option may be cut to any prefix that names it alone
// (--arr=0-9, --depen=afterok:1), and short options may be bundled (-Ha 0-9) until one that
// takes an argument. Prefixes that sbatch finds ambiguous are refused too: they set nothing.
const char* sets_array_or_dependency(const std::string& option) {
  if (option.starts_with("--")) {
    const std::string name = option.substr(2, option.find('=') - 2);
    if (name.empty()) return nullptr;  // "--": the end of the options
    for (const char* taken : {"array", "dependency"})
      if (std::string_view(taken).starts_with(name))
        return taken[0] == 'a' ? "--array" : "--dependency";
    return nullptr;
  }
  if (!option.starts_with("-")) return nullptr;
  // sbatch's short options that take an argument: the rest of the word is that argument.
  const std::string with_argument = "ABbcCDeFGiJkLmMnNopqStUwx";
  for (std::size_t i = 1; i < option.size(); ++i) {
    if (option[i] == 'a') return "--array";
    if (option[i] == 'd') return "--dependency";
    if (with_argument.find(option[i]) != std::string::npos) break;
  }
  return nullptr;
}

}  // namespace

Shard parse_shard_option(const std::string& option, const std::string& text) {
  if (text == "slurm") return slurm_shard(option);
  const auto slash = text.find('/');
  const std::string expected = "I/N (shard I, from 0 to N-1, of N) or \"slurm\"";
  if (slash == std::string::npos)
    throw InputError(option + ": expected " + expected + ", found \"" + text + "\"");
  Shard s;
  s.count = parse_index(option, text.substr(slash + 1), 1, long(kMaxCells),
                        expected + " with N " + range_text(1, long(kMaxCells)));
  s.index = parse_index(option, text.substr(0, slash), 0, s.count - 1,
                        expected + " with I " + range_text(0, s.count - 1));
  return s;
}

double estimated_cost(const Cell& cell) {
  const json& p = cell.params;
  // Attention work: n_q·n_kv·(d_k + d_v) per head and trial; training's sequences are
  // n_pairs + 1 tokens long, its work per step grows with the batch. Integers all, so the
  // products are exact on every machine.
  const double d_k = number(p, "d_k", 1), d_v = number(p, "d_v", d_k);
  const double n_q = number(p, "n_q", number(p, "n_pairs", 0) + 1);
  const double n_kv = number(p, "n_kv", n_q);
  const double heads = number(p, "batch_heads", 1) * number(p, "heads", 1);
  const double repeats = number(p, "trials", 1) * number(p, "steps", 1) * number(p, "batch", 1) *
                         number(p, "seeds", 1);
  const double work = n_q * n_kv * (d_k + d_v) * heads * repeats;
  // Measurements run for their minimum time per repetition whatever their size: counted at
  // 1e9 units a second, about what one core computes of the work above.
  const double seconds =
      number(p, "repetitions", 1) * (number(p, "min_time", 0) + number(p, "warmup_time", 0));
  return work + seconds * 1e9;
}

std::vector<std::vector<std::vector<std::int64_t>>> shard_cells(
    const std::vector<ExperimentPlan>& plans, int count) {
  if (const std::size_t cells = total_cells(plans); std::size_t(count) > cells)
    throw InputError("the config has " + std::to_string(cells) + " cell(s), expected at most " +
                     std::to_string(cells) + " shards (every shard runs a cell at least), found " +
                     std::to_string(count));
  struct Item {
    double cost;
    std::uint32_t experiment;
    std::int64_t cell;
  };
  std::vector<Item> items;
  items.reserve(total_cells(plans));
  for (const auto& plan : plans)
    for (const auto& cell : plan.cells)
      items.push_back({estimated_cost(cell), plan.index, cell.index});
  // Longest processing time first: costliest cells first (ties in plan order), each to the
  // shard with the least cost so far (ties: the lowest index).
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.cost > b.cost; });
  using Load = std::pair<double, int>;
  std::priority_queue<Load, std::vector<Load>, std::greater<>> loads;
  for (int s = 0; s < count; ++s) loads.emplace(0.0, s);
  std::vector<std::vector<std::vector<std::int64_t>>> shards(
      std::size_t(count), std::vector<std::vector<std::int64_t>>(plans.size()));
  for (const auto& item : items) {
    auto [load, s] = loads.top();
    loads.pop();
    shards[std::size_t(s)][item.experiment].push_back(item.cell);
    loads.emplace(load + item.cost, s);
  }
  for (auto& shard : shards)
    for (auto& cells : shard) std::sort(cells.begin(), cells.end());
  return shards;
}

std::vector<std::vector<std::int64_t>> cells_of_shard(const std::vector<ExperimentPlan>& plans,
                                                      const Shard& shard) {
  try {
    return shard_cells(plans, shard.count)[std::size_t(shard.index)];
  } catch (const InputError& e) {
    throw InputError("--shard " + shard.text() + ": " + e.what());
  }
}

std::string result_stem(const std::string& config_name, const std::optional<Shard>& shard) {
  if (!shard) return config_name;
  return config_name + "-shard-" + std::to_string(shard->index) + "-of-" +
         std::to_string(shard->count);
}

json merge_shards(const std::vector<std::pair<std::string, json>>& shards) {
  if (shards.empty()) throw InputError("merge: expected the result files of a sweep's shards");
  // In shard order; each a shard of the same sweep as the first.
  std::vector<const std::pair<std::string, json>*> by_index;
  const auto& [first_path, first] = shards.front();
  for (const auto& shard : shards) {
    const auto& [path, doc] = shard;
    if (!doc.contains("shard"))
      throw InputError(path +
                       ": /shard: not a shard of a sweep (a result file of `run --shard`), "
                       "found a whole run's result file");
    const json& expected_count = first["shard"]["count"];
    if (doc["shard"]["count"] != expected_count)
      mismatch(path, "/shard/count", expected_count, first_path, doc["shard"]["count"]);
    for (const char* pointer : {"/config/sha256", "/seed", "/suite/git_commit"}) {
      const json::json_pointer p(pointer);
      if (doc.at(p) != first.at(p)) mismatch(path, pointer, first.at(p), first_path, doc.at(p));
    }
    // The same SHA-256 names the same config: a document that differs was edited after.
    if (doc["config"]["document"] != first["config"]["document"])
      throw InputError(path + ": /config/document: differs from " + first_path +
                       "'s, yet both carry the config's SHA-256 " +
                       first["config"]["sha256"].get<std::string>().substr(0, 12) +
                       "...: one was edited after it was written");
    by_index.resize(expected_count.get<std::size_t>(), nullptr);
    const auto index = doc["shard"]["index"].get<std::size_t>();
    if (index >= by_index.size())
      throw InputError(path + ": /shard/index: expected an integer from 0 to " +
                       std::to_string(by_index.size() - 1) + " (a shard of " +
                       expected_count.dump() + "), found " + std::to_string(index));
    if (by_index[index] != nullptr)
      throw InputError(path + ": shard " + doc["shard"]["index"].dump() + " of " +
                       expected_count.dump() + " again (also " + by_index[index]->first +
                       "): expected each shard once");
    by_index[index] = &shard;
  }
  for (std::size_t i = 0; i < by_index.size(); ++i)
    if (by_index[i] == nullptr)
      throw InputError("merge: shard " + std::to_string(i) + " of " +
                       std::to_string(by_index.size()) +
                       " is missing: expected the result files of all shards, 0 to " +
                       std::to_string(by_index.size() - 1) + ", found " +
                       std::to_string(shards.size()) + " file(s)");

  // The plan of the config every shard ran, whose cells each must hold exactly once.
  static const JsonSchema config_checker(config_schema().dump());
  Config config;
  config.path = first_path + ": /config/document";
  config.document = first["config"]["document"];
  if (const auto problems = config_checker.problems(config.document); !problems.empty())
    throw InputError(config.path + ": not a valid config: " + problems.front());
  const auto plans = make_plan(config);

  json merged = by_index.front()->second;
  merged.erase("shard");
  json& experiments = merged["experiments"];
  if (experiments.size() != plans.size())
    throw InputError(by_index.front()->first + ": /experiments: expected " +
                     std::to_string(plans.size()) + " experiments (the config's), found " +
                     std::to_string(experiments.size()));
  std::vector<std::map<std::int64_t, std::pair<const std::string*, json>>> records(plans.size());
  json peaks = json::array(), sources = json::array();
  const std::pair<std::string, json>* timed_on = nullptr;  // the first shard with timings
  double duration = 0;
  for (const auto* shard : by_index) {
    const auto& [path, doc] = *shard;
    const json& xs = doc["experiments"];
    if (xs.size() > plans.size())
      throw InputError(path + ": /experiments/" + std::to_string(plans.size()) +
                       "/name: " + xs[plans.size()]["name"].dump() +
                       " is not in the config's plan (" + std::to_string(plans.size()) +
                       " experiment(s)): expected the config's "
                       "experiments only");
    for (std::size_t e = 0; e < plans.size(); ++e) {
      const std::string at = "/experiments/" + std::to_string(e);
      if (e < xs.size() && xs[e]["params"] != plans[e].params)
        throw InputError(path + ": " + at + "/params: differ from the config's (its experiment " +
                         std::to_string(e) + ", \"" + plans[e].name + "\")");
      if (e >= xs.size() || xs[e]["name"] != plans[e].name)
        throw InputError(path + ": " + at + "/name: expected \"" + plans[e].name +
                         "\" (the config's experiment " + std::to_string(e) + "), found " +
                         (e < xs.size() ? xs[e]["name"].dump() : std::string("none")));
      const json& listed = doc["shard"]["cells"];
      if (listed.size() != plans.size() || listed[e].size() != xs[e]["records"].size())
        throw InputError(path + ": /shard/cells: does not list the cells of its records");
      for (std::size_t r = 0; r < xs[e]["records"].size(); ++r) {
        const json& record = xs[e]["records"][r];
        const auto cell = record["cell"].get<std::int64_t>();
        const std::string where = path + ": " + at + "/records/" + std::to_string(r) + ": cell " +
                                  std::to_string(cell) + " of experiment \"" + plans[e].name + "\"";
        if (listed[e][r] != cell)
          throw InputError(path + ": /shard/cells/" + std::to_string(e) + "/" + std::to_string(r) +
                           ": expected " + std::to_string(cell) + " (its record's cell), found " +
                           listed[e][r].dump());
        if (std::size_t(cell) >= plans[e].cells.size())
          throw InputError(where + " is not in the config's plan (" +
                           std::to_string(plans[e].cells.size()) + " cells)");
        // The cell's parameters, re-derived from the plan: records swapped between cells or
        // edited are refused, not merged under another cell's name.
        json expected = json::object();
        for (const auto& axis : plans[e].kind->axes)
          expected[axis] = plans[e].cells[std::size_t(cell)].params[axis];
        if (record["params"] != expected)
          throw InputError(path + ": " + at + "/records/" + std::to_string(r) +
                           "/params: expected " + expected.dump() + " (cell " +
                           std::to_string(cell) + "'s parameters in the config's plan), found " +
                           record["params"].dump());
        const auto [it, added] = records[e].try_emplace(cell, &path, record);
        if (!added)
          throw InputError(where + " is also in " + *it->second.first +
                           ": expected every cell in exactly one shard");
      }
      if (is_measurement(xs[e]) && !xs[e]["records"].empty()) {
        if (timed_on == nullptr) timed_on = shard;
        const json &machine = doc["machine_id"], &reference = timed_on->second["machine_id"];
        if (machine != reference)
          throw InputError(path + ": " + at + " (" + xs[e]["kind"].get<std::string>() +
                           "): measured on " + machine.get<std::string>() + ", but " +
                           timed_on->first + " was measured on " + reference.get<std::string>() +
                           ": timings of different machines are compared (`sdpa-bench compare`), "
                           "not merged");
      }
      experiments[e]["duration_s"] =
          (shard == by_index.front() ? 0.0 : experiments[e]["duration_s"].get<double>()) +
          xs[e]["duration_s"].get<double>();
    }
    if (doc["machine"].contains("peak"))
      for (const json& peak : doc["machine"]["peak"])
        if (std::find(peaks.begin(), peaks.end(), peak) == peaks.end()) peaks.push_back(peak);
    if (doc["started_at"] < merged["started_at"]) merged["started_at"] = doc["started_at"];
    duration += doc["duration_s"].get<double>();
    sources.push_back({{"file", path},
                       {"shard", doc["shard"]["index"]},
                       {"machine_id", doc["machine_id"]},
                       {"started_at", doc["started_at"]},
                       {"duration_s", doc["duration_s"]}});
  }
  for (std::size_t e = 0; e < plans.size(); ++e) {
    if (records[e].size() != plans[e].cells.size()) {
      std::int64_t missing = 0;
      while (records[e].contains(missing)) ++missing;
      throw InputError("merge: cell " + std::to_string(missing) + " of experiment \"" +
                       plans[e].name + "\" is in none of the " + std::to_string(by_index.size()) +
                       " shards (" + std::to_string(plans[e].cells.size() - records[e].size()) +
                       " of its " + std::to_string(plans[e].cells.size()) +
                       " cells missing): expected every cell of the config in one shard");
    }
    json& out = experiments[e]["records"];
    out = json::array();
    for (auto& [cell, source] : records[e]) out.push_back(std::move(source.second));
  }
  if (peaks.empty())
    merged["machine"].erase("peak");
  else
    merged["machine"]["peak"] = peaks;
  merged["duration_s"] = duration;
  merged["merged_from"] = sources;
  // A shard read with --allow-edited marks the merge too.
  merged.erase("edited");
  for (const auto* shard : by_index)
    if (report::edited(shard->second)) merged["edited"] = true;
  return merged;
}

SlurmScripts slurm_scripts(const Config& config, int shards, const std::string& folder,
                           const std::string& program,
                           const std::vector<std::string>& sbatch_options) {
  namespace fs = std::filesystem;
  for (const auto& o : sbatch_options)
    if (const char* taken = sets_array_or_dependency(o))
      throw InputError("slurm: " + o + ": " + taken +
                       " is set by the scripts (the array of --shards tasks, the merge after "
                       "it), expected other sbatch options");
  shard_cells(make_plan(config), shards);  // refuses more shards than cells now
  const fs::path dir = fs::absolute(folder);
  const std::string bin = shell_quoted(program), cfg = shell_quoted(fs::absolute(config.path));
  auto in_dir = [&](const std::string& name) { return (dir / name).string(); };
  SlurmScripts s;
  s.merged = in_dir(config.name + ".json");
  const std::string header = "#!/bin/sh\n# Written by `sdpa-bench slurm` for " +
                             shell_comment(config.path) + " (SHA-256 " + config.sha256 + "), " +
                             std::to_string(shards) + " shards.\n";
  const std::string last = std::to_string(shards - 1);
  s.files.emplace_back(
      in_dir("array.sbatch"),
      header + "#SBATCH --array=0-" + last +
          "\n# Task I runs shard I into shard-I.json. A finished shard is kept; an interrupted "
          "one\n# (time limit, preemption, requeue) resumes from its journal, shard-I.json."
          "journal.\nset -eu\nshard=" +
          shell_quoted(in_dir("shard-")) +
          "\"${SLURM_ARRAY_TASK_ID:?not a Slurm array task}.json\"\n" +
          "if [ -f \"$shard\" ]; then echo \"$shard: done before\"; exit 0; fi\n" + "exec " + bin +
          " run " + cfg +
          " --shard slurm -o \"$shard\" --resume ${SLURM_CPUS_PER_TASK:+-j "
          "\"$SLURM_CPUS_PER_TASK\"}\n");
  std::string inputs;
  for (int i = 0; i < shards; ++i)
    inputs += " " + shell_quoted(in_dir("shard-" + std::to_string(i) + ".json"));
  s.files.emplace_back(in_dir("merge.sbatch"),
                       header + "# The merge of the shards' result files.\n" + "exec " + bin +
                           " merge" + inputs + " -o " + shell_quoted(s.merged) + "\n");
  std::string options;
  for (const auto& o : sbatch_options) options += " " + shell_quoted(o);
  const std::string name = shell_quoted("sdpa-" + config.name);
  s.files.emplace_back(
      in_dir("submit.sh"),
      header +
          "# Submits the job array, then the merge once every task has succeeded (a failed task\n"
          "# cancels it: resubmit, and finished shards are kept).\nset -eu\n" +
          "array=$(sbatch --parsable --job-name=" + name +
          " --output=" + shell_quoted(in_dir("shard-%a.log")) + options + " " +
          shell_quoted(in_dir("array.sbatch")) + ")\narray=${array%%;*}\n" +
          "merge=$(sbatch --parsable --dependency=afterok:$array --kill-on-invalid-dep=yes "
          "--job-name=" +
          shell_quoted("sdpa-" + config.name + "-merge") + " --output=" +
          shell_quoted(in_dir("merge.log")) + options + " " + shell_quoted(in_dir("merge.sbatch")) +
          ")\nmerge=${merge%%;*}\n" + "echo \"array job $array (" + std::to_string(shards) +
          " tasks), merge job $merge: \"" + shell_quoted(s.merged) + "\n");
  return s;
}

}  // namespace sdpa
