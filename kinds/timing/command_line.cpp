// `sdpa-bench time`: a one-shot timing given on the command line, as the config it stands for.
// The config is then checked, planned and run like a config file, so the two cannot differ.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <regex>

#include "sdpa/experiments.hpp"
#include "sdpa/json_schema.hpp"
#include "sdpa/kernels.hpp"

namespace sdpa {
namespace {

// A word as a config would hold it: a number where it reads as one, else the text, which the
// schema then refuses or accepts ("all" threads, a kernel's name) as it would in a file.
json value_of(const std::string& word) {
  if (std::regex_match(word, std::regex("[0-9]{1,15}"))) return std::stoll(word);
  char* end = nullptr;
  const double x = word.empty() ? 0.0 : std::strtod(word.c_str(), &end);
  if (!word.empty() && end == word.c_str() + word.size() && std::isfinite(x)) return x;
  return word;
}

// "a,b,c" as a grid: one value, or a list of them.
json grid_of(const std::string& text) {
  const auto words = split(text, ',');
  if (words.size() == 1) return value_of(words[0]);
  json list = json::array();
  for (const auto& w : words) list.push_back(value_of(w));
  return list;
}

struct TimingFlag {
  std::string flag, parameter;
};

const std::vector<TimingFlag>& timing_flags() {
  static const std::vector<TimingFlag> flags = {{"--kernel", "kernel"},
                                                {"--heads", "heads_q"},
                                                {"--heads", "heads_kv"},
                                                {"--n-q", "n_q"},
                                                {"--n-kv", "n_kv"},
                                                {"--d", "d_k"},
                                                {"--d", "d_v"},
                                                {"--batch", "batch"},
                                                {"--causal", "causal"},
                                                {"-j/--threads", "threads"},
                                                {"--direction", "direction"},
                                                {"--repetitions", "repetitions"},
                                                {"--min-time", "min_time"},
                                                {"--warmup-time", "warmup_time"}};
  return flags;
}

}  // namespace

json timing_config(const TimingOptions& o) {
  json timing = {{"name", "time"}, {"kind", "timing"}, {"kernel", grid_of(o.kernel)}};
  const auto set = [&](const char* parameter, const std::string& text, bool list) {
    if (!text.empty()) timing[parameter] = list ? grid_of(text) : value_of(text);
  };
  set("n_q", o.n_q, true);
  set("n_kv", o.n_kv, true);
  set("batch", o.batch, true);
  if (o.causal) timing["causal"] = true;
  set("threads", o.threads, true);
  set("direction", o.direction, true);
  set("repetitions", o.repetitions, false);
  set("min_time", o.min_time, false);
  set("warmup_time", o.warmup_time, false);

  // The peaks that % of peak and % of roof read: of the kernels' instruction sets
  // (Kernel::roof_isas; where known: the config check names a kernel that is not), on the thread
  // counts timed.
  json roofline = {{"name", "roofline"}, {"kind", "roofline"}};
  json isas = json::array();
  for (const auto& name : split(o.kernel, ','))
    if (const Kernel* k = find_kernel(name))
      for (const std::string& isa : k->roof_isas())
        if (std::find(isas.begin(), isas.end(), isa) == isas.end()) isas.push_back(isa);
  if (!isas.empty()) roofline["isa"] = isas;
  if (timing.contains("threads")) roofline["threads"] = timing["threads"];
  json config = {{"name", "time"}, {"seed", o.seed}, {"experiments", {roofline}}};
  if (!o.description.empty()) config["description"] = o.description;

  // --heads and --d are pairs (query/K-V heads, d_k/d_v), which a grid would cross: one timing
  // experiment per pair given. A pair not given is left to the schema's default.
  using Pairs = std::vector<std::optional<std::pair<json, json>>>;
  const auto pairs = [](const std::string& text) {
    Pairs out;
    if (text.empty()) return Pairs{std::nullopt};
    for (const auto& item : split(text, ',')) {
      const auto halves = split(item, '/');
      const json second = halves.size() == 1   ? value_of(halves[0])
                          : halves.size() == 2 ? value_of(halves[1])
                                               : json(item);  // the schema names it a non-number
      out.emplace_back(std::pair{value_of(halves[0]), second});
    }
    return out;
  };
  const Pairs heads = pairs(o.heads), dims = pairs(o.d);
  for (const auto& h : heads)
    for (const auto& d : dims) {
      json e = timing;
      std::string name = "time";
      if (h) {
        e["heads_q"] = h->first, e["heads_kv"] = h->second;
        name += "-heads-" + h->first.dump() + "-" + h->second.dump();
      }
      if (d) {
        e["d_k"] = d->first, e["d_v"] = d->second;
        name += "-d-" + d->first.dump() + (d->first == d->second ? "" : "-" + d->second.dump());
      }
      if (heads.size() * dims.size() > 1) e["name"] = name;
      config["experiments"].push_back(e);
    }
  return config;
}

std::string timing_message(std::string message) {
  for (const auto& f : timing_flags())
    message = std::regex_replace(
        message, std::regex("/experiments/[0-9]+/" + f.parameter + "(/[0-9]+)?\\b"), f.flag);
  return message;
}

}  // namespace sdpa
