// The pages of a report as a model (sdpa/site.hpp): the index (machines side by side, the
// headline cells), one page per experiment and the claims. The writers are site_markdown.cpp
// and site_html.cpp; the tables are the kinds' own (report.cpp) and the claims' (claims.cpp).
#include "sdpa/site.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "ggml_peer.hpp"
#include "grouping.hpp"
#include "kind_report.hpp"
#include "sdpa/claims.hpp"
#include "sdpa/escape.hpp"
#include "sdpa/input_error.hpp"
#include "sdpa/json_read.hpp"
#include "sdpa/nonparametric.hpp"

namespace sdpa::site {
namespace {

using report::number;
using report::ResultFile;
using report::Table;

std::string text(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return "-";
  const json& v = object[key];
  return v.is_string() ? v.get<std::string>() : v.is_null() ? "-" : v.dump();
}

std::string join(const json& list) {
  if (!list.is_array()) return "-";
  std::string out;
  for (const auto& x : list)
    out += (out.empty() ? "" : ", ") + (x.is_string() ? x.get<std::string>() : x.dump());
  return out.empty() ? "-" : out;
}

// A result file's config name ("models"), as its config document says, else "-".
std::string config_name(const json& doc) {
  return doc.contains("config") ? text(doc["config"].value("document", json::object()), "name")
                                : "-";
}

std::string commit_of(const json& doc) {
  return text(doc.value("suite", json::object()), "git_commit");
}

bool dirty(const std::string& commit) { return commit.ends_with("-dirty"); }

// A machine.caches size in KiB or MiB; text it cannot read as it is.
std::string cache_size(const std::string& size) {
  const double bytes = cache_size_bytes(size);
  if (bytes <= 0 || bytes >= 1e15) return size;
  const auto kib = static_cast<long long>(bytes / 1024);
  return kib % 1024 == 0 ? std::to_string(kib / 1024) + " MiB" : std::to_string(kib) + " KiB";
}

// The data caches of machine.caches by level ("L1d 48 KiB, L2 2 MiB, L3 480 MiB"), "-" when
// the file lists none.
std::string data_caches(const json& machine) {
  std::string out;
  for (const auto& c : machine.value("caches", json::array())) {
    if (!c.is_object() || text(c, "type") == "Instruction") continue;
    out += (out.empty() ? "L" : ", L") + text(c, "level") + (text(c, "type") == "Data" ? "d" : "") +
           " " + cache_size(text(c, "size"));
  }
  return out.empty() ? "-" : out;
}

// The machines of the files, in the order report::machine_ids gives, each with its files.
struct Machine {
  std::string id;
  std::vector<std::size_t> files;
};

std::vector<Machine> machines_of(const std::vector<ResultFile>& results) {
  std::vector<const json*> docs;
  for (const auto& r : results) docs.push_back(&r.doc);
  std::vector<Machine> out;
  for (const auto& id : report::machine_ids(docs)) out.push_back({id, {}});
  for (std::size_t i = 0; i < results.size(); ++i)
    for (auto& m : out)
      if (m.id == report::machine_of(results[i].doc)) m.files.push_back(i);
  return out;
}

// The file of a machine whose measured peaks the index shows: the first with any.
std::optional<std::size_t> peaks_file(const Machine& m, const std::vector<ResultFile>& results) {
  for (std::size_t f : m.files) {
    const json& machine = results[f].doc.value("machine", json::object());
    if (machine.contains("peak") && machine["peak"].is_array() && !machine["peak"].empty())
      return f;
  }
  return std::nullopt;
}

std::string threads_label(const json& t) {
  return t.dump() + (t == json(1) ? " thread" : " threads");
}

Table machines_table(const std::vector<Machine>& machines, const std::vector<ResultFile>& results) {
  Table t;
  t.title = "Machines side by side";
  t.header = {""};
  for (const auto& m : machines) t.header.push_back(m.id);
  const auto row = [&](const std::string& name, const auto& cell) {
    std::vector<std::string> r = {name};
    for (const auto& m : machines) r.push_back(cell(m));
    t.rows.push_back(std::move(r));
  };
  const auto first_machine = [&](const Machine& m) {
    return results[m.files.front()].doc.value("machine", json::object());
  };
  row("CPU model", [&](const Machine& m) { return text(first_machine(m), "cpu_model"); });
  row("microarchitecture",
      [&](const Machine& m) { return text(first_machine(m), "microarchitecture"); });
  row("ISA extensions",
      [&](const Machine& m) { return join(first_machine(m).value("isa_extensions", json())); });
  row("logical cores", [&](const Machine& m) { return text(first_machine(m), "logical_cores"); });
  row("data caches", [&](const Machine& m) { return data_caches(first_machine(m)); });
  row("hypervisor", [&](const Machine& m) { return text(first_machine(m), "hypervisor"); });
  row("transparent huge pages",
      [&](const Machine& m) { return text(first_machine(m), "transparent_hugepages"); });
  row("compiler", [&](const Machine& m) {
    const json& suite = results[m.files.front()].doc.value("suite", json::object());
    return text(suite, "compiler") + " " + text(suite, "flags");
  });
  row("suite commit (config)", [&](const Machine& m) {
    std::map<std::string, std::string> by_commit;  // sorted: the same order every time
    for (std::size_t f : m.files) {
      std::string& configs = by_commit[commit_of(results[f].doc)];
      configs += (configs.empty() ? "" : ", ") + config_name(results[f].doc);
    }
    std::string out;
    for (const auto& [commit, configs] : by_commit)
      out += (out.empty() ? "" : "; ") + commit + (dirty(commit) ? " **dirty tree**" : "") + " (" +
             configs + ")";
    return out;
  });
  row("dates", [&](const Machine& m) {
    std::set<std::string> days;
    for (std::size_t f : m.files) days.insert(text(results[f].doc, "started_at").substr(0, 10));
    return days.size() == 1 ? *days.begin() : *days.begin() + " to " + *days.rbegin();
  });
  row("peaks measured by", [&](const Machine& m) {
    const auto f = peaks_file(m, results);
    return f ? config_name(results[*f].doc) + " run" : std::string("-");
  });
  // Peaks per (ISA, threads) in the order first seen; triad per thread count, its range over
  // the ISAs' runs of it.
  std::vector<std::pair<std::string, json>> keys;
  std::vector<json> thread_counts;
  for (const auto& m : machines)
    if (const auto f = peaks_file(m, results))
      for (const auto& p : results[*f].doc["machine"]["peak"]) {
        const std::pair<std::string, json> key{text(p, "isa"), p.value("threads", json())};
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
        if (std::find(thread_counts.begin(), thread_counts.end(), key.second) ==
            thread_counts.end())
          thread_counts.push_back(key.second);
      }
  const auto peaks = [&](const Machine& m) {
    const auto f = peaks_file(m, results);
    return f ? results[*f].doc["machine"]["peak"] : json::array();
  };
  for (const auto& key : keys) {
    const std::string& isa = key.first;  // not a structured binding: clang 14 cannot capture one
    const json& threads = key.second;
    row("peak, " + isa + ", " + threads_label(threads) + " (GFLOP/s)", [&](const Machine& m) {
      for (const auto& p : peaks(m))
        if (text(p, "isa") == isa && p.value("threads", json()) == threads &&
            p["fma_gflops"].is_number())
          return number(p["fma_gflops"].get<double>());
      return std::string("-");
    });
  }
  for (const auto& threads : thread_counts)
    row("triad bandwidth, " + threads_label(threads) + " (GB/s)", [&](const Machine& m) {
      double low = INFINITY, high = -INFINITY;
      for (const auto& p : peaks(m))
        if (p.value("threads", json()) == threads && p["triad_gbs"].is_number()) {
          low = std::min(low, p["triad_gbs"].get<double>());
          high = std::max(high, p["triad_gbs"].get<double>());
        }
      if (low > high) return std::string("-");
      return low == high ? number(low) : number(low) + " to " + number(high);
    });
  t.note =
      "Microarchitecture: named from cpuid's family and model, which a hypervisor may present as "
      "another CPU's (the ISA extensions and caches tell). Data caches: machine.caches; a cell "
      "whose K and V fit in the last level is read from it, not from memory. Peaks: the "
      "multiply-add throughput each ISA's kernels were measured to reach (machine.peak: fp32 "
      "FMAs, or the bf16 or int8 dot products of the dot-product ISAs); triad: the STREAM-like "
      "bandwidth measured beside each, its range over the ISAs' runs. Transparent huge pages: "
      "Linux's mode (always, madvise or never; - where not recorded), which can change the time "
      "of the cells that read K and V from memory. A dirty tree: built with uncommitted "
      "changes, so the commit does not name the code that ran.";
  return t;
}

// A headline cell: one timing record per machine, found by experiment name and parameters.
struct Headline {
  std::string label, experiment, kernel, direction;
  long n_kv = 0;  // 0: any
  bool causal = false;
  bool all_threads = false;  // else one thread
};

const std::vector<Headline>& headlines() {
  static const std::vector<Headline> cells = {
      {"Llama-3-8B decode, 16 384 keys, fp32 K/V, 1 thread", "llama3-8b-mistral-7b", "flash",
       "forward", 16384},
      {"Llama-3-8B decode, 16 384 keys, fp16 K/V, 1 thread", "llama3-8b-mistral-7b", "flash-kv-f16",
       "forward", 16384},
      {"Llama-3-8B decode, 16 384 keys, int8 K/V, 1 thread", "llama3-8b-mistral-7b",
       "flash-kv-int8", "forward", 16384},
      {"Llama-3-8B decode, 16 384 keys, fp32 K/V, all threads", "llama3-8b-mistral-7b", "flash",
       "forward", 16384, false, true},
      {"Qwen2.5-7B decode, 16 384 keys, 1 thread", "qwen2.5-7b", "flash", "forward", 16384},
      {"Gemma-2-9B decode, 16 384 keys, 1 thread", "gemma-2-9b", "flash", "forward", 16384},
      {"Falcon-7B decode (compute-bound), 16 384 keys, 1 thread", "falcon-7b", "flash", "forward",
       16384},
      {"Llama-3-8B prefill, 4096 tokens, fp32, all threads", "llama3-8b-mistral-7b-prefill-4096",
       "flash", "forward", 4096, true, true},
      {"Llama-3-8B prefill, 4096 tokens, bf16, all threads", "llama3-8b-mistral-7b-prefill-4096",
       "flash-bf16", "forward", 4096, true, true},
      {"Gemma-2-9B prefill, 4096 tokens, all threads", "gemma-2-9b-prefill-4096", "flash",
       "forward", 4096, true, true},
      {"backward, 1024 x 1024, d 64, causal, 1 thread", "backward", "flash", "backward", 1024,
       true},
      {"backward, 1024 x 1024, d 64, causal, all threads", "backward", "flash", "backward", 1024,
       true, true},
  };
  return cells;
}

struct Found {
  const json* record = nullptr;
  std::size_t file = 0;
};

std::optional<Found> find_cell(const Headline& h, const Machine& m,
                               const std::vector<ResultFile>& results) {
  for (std::size_t f : m.files)
    for (const auto& e : results[f].doc["experiments"]) {
      if (e.value("name", "") != h.experiment || e.value("kind", "") != "timing") continue;
      int most = 0;
      for (const auto& r : e["records"]) most = std::max(most, r.value("threads", 0));
      for (const auto& r : e["records"]) {
        const json& p = r["params"];
        if (!r.contains("time_s") || p.value("kernel", "") != h.kernel ||
            p.value("direction", "") != h.direction || p.value("causal", false) != h.causal ||
            (h.n_kv && p.value("n_kv", 0L) != h.n_kv) ||
            r.value("threads", 0) != (h.all_threads ? most : 1))
          continue;
        return Found{&r, f};
      }
    }
  return std::nullopt;
}

std::vector<double> samples(const json& record) {
  std::vector<double> x;
  for (const auto& v : record["time_s"].value("samples", json::array()))
    if (v.is_number()) x.push_back(v.get<double>());
  return x;
}

std::string ratio_cell(double ratio, const stats::Interval& ci) {
  return number(ratio) + " [" + number(ci.low) + ", " + number(ci.high) + "]";
}

Table headline_table(const std::vector<Machine>& machines, const std::vector<ResultFile>& results,
                     std::vector<std::size_t>& used) {
  Table t;
  t.title = "Headline cells";
  t.header = {"cell"};
  for (const auto& m : machines) t.header.push_back(m.id);
  for (std::size_t i = 1; i < machines.size(); ++i)
    t.header.push_back(machines[i].id + " / " + machines[0].id);
  // Per other machine, the log ratios, for the geometric mean.
  std::vector<std::vector<double>> logs(machines.size());
  for (const auto& h : headlines()) {
    std::vector<std::optional<Found>> found;
    for (const auto& m : machines) found.push_back(find_cell(h, m, results));
    if (std::none_of(found.begin(), found.end(), [](const auto& f) { return f.has_value(); }))
      continue;
    std::vector<std::string> row = {h.label};
    for (const auto& f : found) {
      if (!f) {
        row.push_back("-");
        continue;
      }
      used.push_back(f->file);
      const json& r = *f->record;
      const json roof = r.value("percent_of_roof", json(nullptr));
      row.push_back(report::duration(number_in(r["time_s"]["value"])) +
                    (roof.is_number() ? " (" + number(roof.get<double>()) + " % of roof" +
                                            (report::reads_cache(r) ? ", fits LLC)" : ")")
                                      : ""));
    }
    for (std::size_t i = 1; i < machines.size(); ++i) {
      if (!found[0] || !found[i]) {
        row.push_back("-");
        continue;
      }
      const json &a = *found[0]->record, &b = *found[i]->record;
      const double ratio = number_in(b["time_s"]["value"]) / number_in(a["time_s"]["value"]);
      const auto sa = samples(a), sb = samples(b);
      if (sa.empty() || sb.empty()) {
        row.push_back(number(ratio));
        continue;
      }
      const auto ci = stats::median_ratio_ci(sb, sa);
      row.push_back(ratio_cell(ratio, ci));
      logs[i].push_back(std::log(ratio));
    }
    t.rows.push_back(std::move(row));
  }
  if (machines.size() > 1) {
    std::vector<std::string> row = {"geometric mean of the ratios"};
    for (std::size_t i = 0; i < machines.size(); ++i) row.push_back("");
    for (std::size_t i = 1; i < machines.size(); ++i) {
      if (logs[i].empty()) {
        row.push_back("-");
        continue;
      }
      const auto g = stats::geometric_mean(logs[i]);
      row.push_back((logs[i].size() > 1 ? ratio_cell(g.value, g.ci) : number(g.value)) + ", " +
                    std::to_string(logs[i].size()) + " cells");
    }
    t.rows.push_back(std::move(row));
  }
  t.note =
      "Each machine's median time per call and its % of its own roof (min of the compute peak "
      "of the kernel's ISAs and thread count, intensity x its triad bandwidth). Fits LLC: a "
      "memory-bound cell whose bytes fit in that machine's last-level cache (Machines: data "
      "caches) stays there between calls, so its % of roof reads a cache, not memory (and can "
      "pass 100 %; files from before fits_llc do not say). Ratio: time on the machine over time "
      "on " +
      (machines.empty() ? std::string("the first") : machines[0].id) +
      " (below 1: faster), its 95 % interval a bootstrap of the ratio of medians over the "
      "repetitions; where the machines' files come from different suite commits (Machines), "
      "it holds the code's changes as well as the machines'. Geometric mean: of the ratios of the "
      "cells both machines ran, its interval Student's t of the mean log ratio (the spread "
      "across cells, as compare's summary reads it). \"All threads\" is each machine's own "
      "count.";
  return t;
}

// Where the pages link to the files a page was built from.
std::vector<Link> file_links(const std::vector<std::size_t>& files, const Inputs& in) {
  std::vector<std::size_t> sorted = files;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<Link> links;
  for (std::size_t f : sorted) links.push_back({(*in.results)[f].path, in.data_links[f]});
  return links;
}

struct Experiment {
  std::string name, path;
  std::vector<std::pair<std::size_t, const json*>> runs;  // file, experiment
};

std::vector<Experiment> experiments_of(const std::vector<ResultFile>& results) {
  std::vector<Experiment> out;
  std::set<std::string> paths;
  for (std::size_t f = 0; f < results.size(); ++f)
    for (const auto& e : results[f].doc["experiments"]) {
      const std::string name = e.value("name", "");
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& x) { return x.name == name; });
      if (it == out.end()) {
        std::string path = "experiments/" + safe_file_name(name);
        for (int n = 2; paths.count(path); ++n)
          path = "experiments/" + safe_file_name(name) + "-" + std::to_string(n);
        paths.insert(path);
        it = out.insert(out.end(), {name, path, {}});
      }
      it->runs.emplace_back(f, &e);
    }
  return out;
}

// The experiment's entry in its file's config, if the file carries its config.
json config_entry(const json& doc, const std::string& name) {
  const json& document = doc.value("config", json::object()).value("document", json::object());
  for (const auto& e : document.value("experiments", json::array()))
    if (e.is_object() && e.value("name", "") == name) return e;
  return nullptr;
}

Page experiment_page(const Experiment& x, const Inputs& in) {
  const auto& results = *in.results;
  Page page{x.path, x.name, {}};
  Section intro;
  const json& first = *x.runs.front().second;
  const json config = config_entry(results[x.runs.front().first].doc, x.name);
  intro.paragraphs.push_back("Kind: " + text(first, "kind") + ".");
  if (config.is_object() && config.contains("description"))
    intro.paragraphs.push_back(text(config, "description"));
  if (config.is_object()) intro.code = config.dump(2);
  // The runs' tables, and the legend: a note under more than one table is stated once here.
  std::vector<std::vector<Table>> tables;
  std::map<std::string, int> notes;
  for (const auto& [f, e] : x.runs) {
    tables.push_back(
        report::experiment_tables(*e, report::edited(results[f].doc) ? " [edited]" : ""));
    for (const auto& t : tables.back()) ++notes[t.note];
  }
  std::vector<std::string> legend;
  for (auto& run : tables)
    for (auto& t : run)
      if (!t.note.empty() && notes[t.note] > 1) {
        if (std::find(legend.begin(), legend.end(), t.note) == legend.end())
          legend.push_back(t.note);
        t.note.clear();
      }
  for (const auto& l : legend) intro.paragraphs.push_back("Legend: " + l);
  page.sections.push_back(std::move(intro));
  std::vector<std::size_t> files;
  for (const auto& run : x.runs) files.push_back(run.first);
  // Figures drawn from several files (machines side by side) first.
  Section across{"Machines side by side"};
  for (const auto& p : in.plots)
    if (p.experiment == x.name && p.sources.size() > 1)
      across.figures.push_back({"plots/" + p.name, p.caption});
  if (!across.figures.empty()) page.sections.push_back(std::move(across));
  for (std::size_t i = 0; i < x.runs.size(); ++i) {
    const auto& file = results[x.runs[i].first];
    Section s{report::machine_of(file.doc) + ", " + config_name(file.doc) + " run"};
    for (const auto& p : in.plots)
      if (p.experiment == x.name && p.sources == std::vector<std::string>{file.path})
        s.figures.push_back({"plots/" + p.name, p.caption});
    s.tables = std::move(tables[i]);
    s.links = file_links({x.runs[i].first}, in);
    page.sections.push_back(std::move(s));
  }
  return page;
}

std::optional<Page> claims_page(const Inputs& in) {
  const auto& results = *in.results;
  // The claims read the first run of each config their registry names, as `make report` gives
  // them to `sdpa-bench claims` (which refuses a file no claim reads).
  const auto config_name = [](const std::string& path) {
    return std::filesystem::path(path).filename().string();
  };
  std::vector<claims::Source> sources;
  for (const auto& input : claims::inputs())
    for (const auto& r : results)
      if (config_name(r.doc.value(json::json_pointer("/config/path"), std::string())) ==
          config_name(input.config)) {
        sources.push_back({&r.doc, r.path});
        break;
      }
  if (sources.empty()) return std::nullopt;
  std::vector<claims::Claim> cs;
  try {
    cs = claims::evaluate(sources);
  } catch (const InputError&) {
    return std::nullopt;  // the files lack an experiment the claims need
  }
  Page page{"claims", "Claims about scaled dot-product attention, tested", {}};
  Section verdicts{"Verdicts"};
  verdicts.paragraphs.push_back(
      "Each verdict is computed from the cited records of these result files (thresholds in "
      "analysis/claims.cpp); the evidence follows, one section per claim.");
  Table v{"Verdicts", {"claim", "verdict"}, {}, ""};
  for (const auto& c : cs)
    v.rows.push_back({std::to_string(c.number) + ". " + c.statement,
                      "**" + claims::to_string(c.verdict) + "**"});
  verdicts.tables.push_back(std::move(v));
  // The files whose experiments the claims cite.
  std::vector<std::size_t> cited;
  for (std::size_t f = 0; f < results.size(); ++f)
    for (const auto& e : results[f].doc["experiments"])
      for (const auto& c : cs)
        if (c.source.find(e.value("name", std::string("\x01"))) != std::string::npos)
          cited.push_back(f);
  verdicts.links = file_links(cited, in);
  page.sections.push_back(std::move(verdicts));
  for (const auto& c : cs) {
    Section s{"Claim " + std::to_string(c.number)};
    s.paragraphs = {c.statement,
                    "Verdict: **" + claims::to_string(c.verdict) + "**: " + c.reason + "."};
    s.tables.push_back({"Evidence for claim " + std::to_string(c.number), c.header, c.rows,
                        "Source: " + c.source + "."});
    page.sections.push_back(std::move(s));
  }
  return page;
}

}  // namespace

std::string markdown_file(const std::string& page) {
  return (page == "index" ? std::string("README") : page) + ".md";
}

std::string html_file(const std::string& page) { return page + ".html"; }

std::string to_root(const std::string& page) {
  std::string up;
  for (char c : page)
    if (c == '/') up += "../";
  return up;
}

std::vector<std::string> data_files(const std::vector<ResultFile>& results) {
  std::vector<std::string> names;
  for (const auto& r : results) {
    const std::string file = safe_file_name(std::filesystem::path(r.path).filename().string());
    std::string name = "data/" + safe_file_name(report::machine_of(r.doc)) + "-" + file;
    for (int n = 2; std::find(names.begin(), names.end(), name) != names.end(); ++n)
      name = "data/" + safe_file_name(report::machine_of(r.doc)) + "-" + std::to_string(n) + "-" +
             file;
    names.push_back(name);
  }
  return names;
}

std::vector<Page> pages(const Inputs& in) {
  const auto& results = *in.results;
  const auto machines = machines_of(results);
  const auto experiments = experiments_of(results);
  auto claims = claims_page(in);
  Page index{"index", "sdpa-bench results", {}};
  Section intro;
  intro.paragraphs.push_back(
      "Generated by `sdpa-bench report` from the result files below alone (`make report` "
      "writes these pages as Markdown into results/, `make site` as HTML); the same files give "
      "the same pages byte for byte.");
  if (claims)
    intro.links.push_back({"Claims about scaled dot-product attention, tested", "claims", true});
  index.sections.push_back(std::move(intro));
  std::vector<std::size_t> all(results.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  Section side{"Machines side by side"};
  side.tables.push_back(machines_table(machines, results));
  index.sections.push_back(std::move(side));
  Section head{"Headline cells"};
  std::vector<std::size_t> used;
  head.tables.push_back(headline_table(machines, results, used));
  head.links = file_links(used, in);
  index.sections.push_back(std::move(head));
  // Ours against llama.cpp's ggml: per file the summary here, every cell on a page of its own.
  Section ggml{"Ours against llama.cpp's ggml"};
  Page ggml_page{"ggml", "Ours against llama.cpp's ggml, per cell", {}};
  for (std::size_t f = 0; f < results.size(); ++f) {
    const std::string source =
        " [" + report::machine_of(results[f].doc) + ", " + config_name(results[f].doc) + " run]";
    Table summary = report::ggml_summary_table(results[f].doc, source);
    if (summary.rows.empty()) continue;
    ggml.tables.push_back(std::move(summary));
    Section cells{report::machine_of(results[f].doc) + ", " + config_name(results[f].doc) + " run"};
    cells.tables.push_back(report::ggml_cells_table(results[f].doc, ""));
    cells.links = file_links({f}, in);
    ggml_page.sections.push_back(std::move(cells));
  }
  if (!ggml.tables.empty()) {
    // Each note once, under the last table of its kind.
    for (std::size_t i = 0; i + 1 < ggml.tables.size(); ++i) ggml.tables[i].note.clear();
    for (std::size_t i = 0; i + 1 < ggml_page.sections.size(); ++i)
      ggml_page.sections[i].tables.front().note.clear();
    ggml.links.push_back({ggml_page.title, ggml_page.path, true});
    index.sections.push_back(std::move(ggml));
  }
  Section list{"Experiments"};
  for (const auto& x : experiments) {
    std::string on;
    for (const auto& [f, e] : x.runs) {
      const std::string id = report::machine_of(results[f].doc);
      if (on.find(id) == std::string::npos) on += (on.empty() ? "" : ", ") + id;
    }
    list.links.push_back(
        {x.name + " (" + text(*x.runs.front().second, "kind") + "; " + on + ")", x.path, true});
  }
  index.sections.push_back(std::move(list));
  Section files{"Result files"};
  Table t{"Result files", {"file", "machine", "config", "suite commit", "seed", "started"}, {}, ""};
  for (const auto& r : results)
    t.rows.push_back({"`" + r.path + "`" + (report::edited(r.doc) ? " (edited)" : ""),
                      report::machine_of(r.doc), config_name(r.doc), commit_of(r.doc),
                      text(r.doc, "seed"), text(r.doc, "started_at")});
  files.tables.push_back(std::move(t));
  files.links = file_links(all, in);
  index.sections.push_back(std::move(files));
  if (!in.csv_files.empty()) {
    Section csv{"CSV, one row per record"};
    for (const auto& c : in.csv_files) csv.links.push_back({c, c});
    index.sections.push_back(std::move(csv));
  }
  std::vector<Page> out = {std::move(index)};
  if (!ggml_page.sections.empty()) out.push_back(std::move(ggml_page));
  for (const auto& x : experiments) out.push_back(experiment_page(x, in));
  if (claims) out.push_back(std::move(*claims));
  return out;
}

}  // namespace sdpa::site
