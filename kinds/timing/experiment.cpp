// Experiment `timing`: how long one attention call takes, per kernel, shape, thread count and
// direction, timed by Google Benchmark. Every repetition is kept; the record gives the median
// with an order-statistic interval, GFLOP/s, the share of this machine's measured peak for the
// kernel's instruction set, and the conditions of the measurement (frequency governor, load,
// affinity), so a noisy cell is seen as noisy rather than as slow.
#include <sched.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>
#include <tuple>

#include "benchmark_session.hpp"
#include "checks.hpp"
#include "kinds.hpp"
#include "peak_measure.hpp"
#include "sdpa/aligned.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/nonparametric.hpp"
#include "sdpa/peak.hpp"
#include "sdpa/rng.hpp"
#include "thread_count.hpp"

namespace sdpa {
namespace {

struct TimingCell {
  std::string kernel_name;
  const Kernel* kernel;  // null for another machine's or build's kernel (kernel_elsewhere)
  Shape shape;
  bool causal;
  std::int64_t prefix, window_left = -1, window_right = -1, chunk;
  float softcap;
  std::vector<float> alibi, sinks;               // one per query head, or empty
  std::vector<std::int64_t> documents;           // document starts (Mask::documents); empty: one
  std::vector<float> temperature;                // one per query row, or empty
  std::string documents_name, temperature_name;  // how the config gave them, for name()
  std::string direction;
  int threads;

  // Q, O, lse [batch_heads x batch x heads_q, n_q, d], K and V [batch_heads x batch x heads_kv,
  // n_kv, d]: batch_heads (the axis older configs use) and batch both multiply the batch.
  // Precondition (check_timing): heads_q a multiple of heads_kv. Without `per_position`, the
  // arrays of one entry per document or query row are left empty: a config check or a memory
  // estimate must not allocate them for a cell too large to run.
  TimingCell(const json& p, int run_threads, bool per_position = true)
      : kernel_name(p["kernel"]),
        kernel(find_kernel(kernel_name)),
        shape{.batch_heads = p["batch_heads"].get<std::int64_t>() * p["batch"].get<std::int64_t>() *
                             p["heads_q"].get<std::int64_t>(),
              .n_q = p["n_q"],
              .n_kv = p["n_kv"],
              .d_k = p["d_k"],
              .d_v = p["d_v"],
              .group = p["heads_q"].get<std::int64_t>() / p["heads_kv"].get<std::int64_t>()},
        causal(p["causal"]),
        prefix(p["prefix"]),
        chunk(p["chunk"]),
        softcap(config_fp32(p["softcap"])),
        direction(p["direction"]),
        threads(resolve_threads(p["threads"], run_threads)) {
    // A window of W keys is the models' sliding_window: the row's own position and W - 1
    // before it; {"left", "right"} gives both extents, null leaving a side unbounded.
    const json& w = p["window"];
    const auto extent = [](const json& x) { return x.is_null() ? -1 : x.get<std::int64_t>(); };
    if (w.is_number()) window_left = w.get<std::int64_t>() - 1, window_right = 0;
    if (w.is_object()) window_left = extent(w["left"]), window_right = extent(w["right"]);
    const std::int64_t heads = p["heads_q"];
    if (p["alibi"].get<bool>()) alibi = alibi_slopes(heads);
    const json& x = p["sinks"];
    if (x.is_number()) sinks.assign(std::size_t(heads), config_fp32(x));
    if (x.is_object())
      for (const json& sink : x["per_head"]) sinks.push_back(config_fp32(sink));
    // Documents of L tokens packed along the n_kv keys (the last one shorter), or their starts.
    const json& docs = p["documents"];
    const std::int64_t length = docs.is_number() ? docs.get<std::int64_t>() : 0;
    if (length > 0) documents_name = docs.dump();
    for (std::int64_t d = 0; per_position && length > 0 && d <= (shape.n_kv - 1) / length; ++d)
      documents.push_back(d * length);
    if (docs.is_object()) {
      documents = docs["starts"].get<std::vector<std::int64_t>>();
      for (const std::int64_t start : documents)
        documents_name += (documents_name.empty() ? "" : ",") + std::to_string(start);
    }
    const json& t = p["temperature"];
    if (!t.is_null()) temperature_name = t.is_string() ? t.get<std::string>() : t.dump();
    if (per_position && t.is_number()) temperature.assign(std::size_t(shape.n_q), config_fp32(t));
    if (per_position && t == "llama4") temperature = llama4_temperature(shape);
  }

  Mask mask() const {
    return {.causal = causal,
            .prefix = prefix,
            .window_left = window_left,
            .window_right = window_right,
            .chunk = chunk,
            .documents = documents};
  }
  ScoreMod score_mod() const {
    return {.softcap = softcap, .alibi_slopes = alibi, .sinks = sinks, .temperature = temperature};
  }
  bool needs_backward() const { return direction != "forward"; }
  // "both" times one call of each. Another machine's kernel is credited by the same convention
  // (Kernel::flops is one formula for every kernel), so its record compares with that machine's.
  double flops() const {
    const Kernel elsewhere{};
    const Kernel& k = kernel ? *kernel : elsewhere;
    return (direction == "backward" ? 0 : k.flops(shape, mask(), Pass::forward)) +
           (direction == "forward" ? 0 : k.flops(shape, mask(), Pass::backward));
  }
  // Bytes one call must move, each tensor once at its storage width (Kernel::bytes: fp32, K and
  // V at the kernel's K/V format): a backward reads Q, K, V, O and dO and writes dQ, dK, dV,
  // shaped like them: twice the forward's.
  double bytes() const {
    const double forward = kernel ? kernel->bytes(shape, mask()) : forward_bytes(shape, mask());
    return (direction == "backward" ? 0 : forward) + (direction == "forward" ? 0 : 2 * forward);
  }
  // The tensors, and the larger workspace of the calls made: a backward cell calls the forward
  // once before it is timed. Nothing for another machine's kernel: the cell is not run.
  double memory_bytes() const {
    if (!kernel) return 0;
    const double bh = double(shape.batch_heads), bh_kv = double(shape.kv_batch_heads());
    const double n_q = double(shape.n_q), n_kv = double(shape.n_kv);
    const double d = double(shape.d_k + shape.d_v);
    // Q, O and lse per query head; K and V per K/V head, as Tensors allocates them.
    const double elements = bh * n_q * (d + 1) + bh_kv * n_kv * d;
    // A backward adds dO and the gradients: as much again.
    const double tensors = (needs_backward() ? 8.0 : 4.0) * elements;
    const double forward = kernel->workspace_bytes(shape, Pass::forward, threads);
    return tensors +
           (needs_backward()
                ? std::max(forward, kernel->workspace_bytes(shape, Pass::backward, threads))
                : forward);
  }
  // Google Benchmark's name of the cell, so --benchmark_filter can pick cells.
  // bh counts query heads; the group (query heads per K/V head) is named only when above 1, so
  // ungrouped cells keep the names of earlier runs.
  std::string name() const {
    return kernel_name + "/" + direction + "/bh:" + std::to_string(shape.batch_heads) +
           (shape.group > 1 ? "/group:" + std::to_string(shape.group) : "") +
           "/nq:" + std::to_string(shape.n_q) + "/nkv:" + std::to_string(shape.n_kv) +
           "/dk:" + std::to_string(shape.d_k) + "/dv:" + std::to_string(shape.d_v) +
           "/causal:" + (causal ? "1" : "0") + mask_name() + "/threads:" + std::to_string(threads);
  }
  // The mask and modifier beyond causal, named only when set, so plain cells keep their names.
  std::string mask_name() const {
    const auto extent = [](std::int64_t e) {
      return e < 0 ? std::string("inf") : std::to_string(e);
    };
    std::string n;
    if (prefix > 0) n += "/prefix:" + std::to_string(prefix);
    if (window_left >= 0 || window_right >= 0)
      n += "/window:" + extent(window_left) + "," + extent(window_right);
    if (chunk > 0) n += "/chunk:" + std::to_string(chunk);
    if (!documents_name.empty()) n += "/documents:" + documents_name;
    if (softcap > 0) n += "/softcap:" + json(softcap).dump();
    if (!alibi.empty()) n += "/alibi";
    if (!sinks.empty()) n += "/sinks";
    if (!temperature_name.empty()) n += "/temperature:" + temperature_name;
    return n;
  }
};

// The stream of a timing experiment's inputs: one for all its cells (cell and trial 0), apart
// from cell 0's own by its purpose.
constexpr std::uint32_t kSharedInputs = 1;

// The tensors of one cell; inputs drawn from the experiment's Philox stream.
struct Tensors {
  AlignedVector<float> q, k, v, out, lse, d_out, d_q, d_k, d_v;

  Tensors(const TimingCell& c, const StreamKey& key)
      : q(c.shape.q_elements()),
        k(c.shape.k_elements()),
        v(c.shape.v_elements()),
        out(c.shape.out_elements()),
        lse(c.shape.rows()) {
    PhiloxStream rng(key);
    fill_normal<float>(rng, q);
    fill_normal<float>(rng, k);
    fill_normal<float>(rng, v);
    if (c.needs_backward()) {
      d_out.resize(c.shape.out_elements());
      fill_normal<float>(rng, d_out);
      d_q.resize(q.size()), d_k.resize(k.size()), d_v.resize(v.size());
    }
  }
};

// The error of the output the timed calls left against the fp64 reference of the same inputs,
// so a kernel's speed is read beside what its number formats cost: O relative to its size, RMS
// (||O - O_ref|| / ||O_ref||) and max (max |O - O_ref| / max |O_ref|), as the precision kind
// measures it. Over a sample of rows, so a prefill cell costs little beside its timing: up to 8
// query heads and 8 rows of each, evenly spread (the last of each included), each against its
// visible keys, its logits as RowLogits defines them (the cell's soft-cap, ALiBi bias and sink);
// rows that see no key are left out.
json output_error(const TimingCell& c, const Tensors& t) {
  const Shape& s = c.shape;
  const auto spread = [](std::int64_t n, std::int64_t j, std::int64_t of) {
    return (j + 1) * n / of - 1;
  };
  const std::int64_t heads = std::min<std::int64_t>(s.batch_heads, 8);
  const std::int64_t rows = std::min<std::int64_t>(s.n_q, 8);
  const float scale = float(1 / std::sqrt(double(s.d_k)));
  const ScoreMod mod = c.score_mod();
  double err2 = 0, ref2 = 0, err_max = 0, ref_max = 0;
  std::int64_t used = 0;
  std::vector<double> logits, ref(s.d_v);
  for (std::int64_t a = 0; a < heads; ++a)
    for (std::int64_t b = 0; b < rows; ++b) {
      const std::int64_t h = spread(s.batch_heads, a, heads), i = spread(s.n_q, b, rows);
      const KeyRange seen = c.mask().visible(s, i);
      if (seen.size() <= 0) continue;
      const RowLogits row = row_logits(s, mod, scale, h, i);
      const float* qr = t.q.data() + (h * s.n_q + i) * s.d_k;
      const float* k = t.k.data() + s.kv_head(h) * s.n_kv * s.d_k;
      const float* v = t.v.data() + s.kv_head(h) * s.n_kv * s.d_v;
      logits.clear();
      double top = double(row.sink);
      for (std::int64_t j = seen.begin; j < seen.end; ++j) {
        double dot = 0;
        for (std::int64_t e = 0; e < s.d_k; ++e) dot += double(qr[e]) * double(k[j * s.d_k + e]);
        logits.push_back(row.logit(dot, j));
        top = std::max(top, logits.back());
      }
      double sum = std::exp(double(row.sink) - top);  // the sink: a weight without a value
      std::fill(ref.begin(), ref.end(), 0.0);
      for (std::int64_t j = seen.begin; j < seen.end; ++j) {
        const double w = std::exp(logits[std::size_t(j - seen.begin)] - top);
        sum += w;
        for (std::int64_t e = 0; e < s.d_v; ++e) ref[e] += w * double(v[j * s.d_v + e]);
      }
      const float* o = t.out.data() + (h * s.n_q + i) * s.d_v;
      for (std::int64_t j = 0; j < s.d_v; ++j) {
        const double r = ref[j] / sum, e = std::abs(double(o[j]) - r);
        err2 += e * e, ref2 += r * r;
        err_max = std::max(err_max, std::isnan(e) ? INFINITY : e);
        ref_max = std::max(ref_max, std::abs(r));
      }
      ++used;
    }
  if (used == 0) return nullptr;
  return {{"o_rms", std::sqrt(err2 / ref2)}, {"o_max", err_max / ref_max}, {"rows", used}};
}

// What one call of the timed body does, per direction.
std::function<void()> timed_call(const TimingCell& c, Tensors& t) {
  ForwardArgs f{
      .shape = c.shape, .q = t.q.data(), .k = t.k.data(), .v = t.v.data(), .out = t.out.data()};
  f.scale = float(1 / std::sqrt(double(c.shape.d_k)));
  f.mask = c.mask();
  f.score_mod = c.score_mod();
  f.threads = c.threads;
  // A kernel with a K/V storage format reads K and V stored once, before the timed calls, as
  // an inference engine's KV cache is (the lambda keeps the storage alive).
  std::shared_ptr<const StoredKv> stored;
  if (c.kernel->store_kv) stored = c.kernel->store_kv(f);
  f.stored_kv = stored.get();
  if (!c.needs_backward()) return [&c, f, stored] { c.kernel->forward(f); };
  f.lse = t.lse.data();
  c.kernel->forward(f);  // the backward reads the forward's output and row log-sum-exp
  const BackwardArgs b = backward_of(f, t.d_out.data(), t.d_q.data(), t.d_k.data(), t.d_v.data());
  if (c.direction == "backward") return [&c, b, stored] { c.kernel->backward(b); };
  return [&c, f, b, stored] { c.kernel->forward(f), c.kernel->backward(b); };
}

// ---- conditions of the measurement

json load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0, five = 0, fifteen = 0;
  if (!(in >> one >> five >> fifteen)) return nullptr;
  return {one, five, fifteen};
}

// The CPUs this thread may run on (OpenMP threads inherit them), as a list like "0-3,8".
std::string affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "unknown";
  std::string list;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    list += (list.empty() ? "" : ",") + std::to_string(cpu) +
            (last > cpu ? "-" + std::to_string(last) : "");
    cpu = last;
  }
  return list;
}

json environment_at_start() {
  std::string governor = frequency_governor();
  const std::string scaling = governor.empty()            ? "unknown"
                              : governor == "performance" ? "off"
                                                          : "on";
  if (governor.empty()) governor = "unknown";
  return {{"cpu_governor", governor},
          {"frequency_scaling", scaling},
          {"affinity", affinity()},
          {"load_average_start", load_average()}};
}

// ---- statistics of the repetitions

json time_statistics(const BenchmarkRuns& runs) {
  const auto& x = runs.seconds;
  const auto median = stats::median_ci(x);
  json t = measured(stats::median(x), median.ci, std::nullopt, "none");
  t["ci_coverage"] = median.coverage;
  t["mean"] = stats::mean(x);
  t["stddev"] = stats::stddev(x);
  t["cv"] = x.size() < 2 ? json(nullptr) : json(stats::coefficient_of_variation(x));
  t["samples"] = x;
  t["iterations"] = runs.iterations;
  return t;
}

// The share of the machine's peak for the kernel's own roofline ISAs (Kernel::roofs: an @isa
// entry's ISA, not the widest here; an int8 decode's scores at its dot peak and its P V at its
// fp32 peak) at this thread count, and of the roof that binds at the cell's intensity:
// min(compute peak, intensity x triad bandwidth), both from a roofline measured earlier in the
// run, else measured now (briefly), never assumed.
void add_peak(json& record, const TimingCell& c, double gflops, RunShared& shared) {
  record.erase("value_peak");  // (a journal's record, derived again)
  const Kernel::Roofs roofs = c.kernel->roofs(c.shape);
  if (roofs.scores.empty() || roofs.values.empty()) {
    for (const char* k : {"percent_of_peak", "peak", "roof_gflops", "percent_of_roof", "bound"})
      record[k] = nullptr;
    record["peak_note"] =
        "no peak measured: no roofline ISA for kernel ISA \"" + c.kernel->product_isa() + "\"";
    return;
  }
  const auto peak_of = [&](const std::string& isa) -> const json& {
    if (!find_peak(shared.peaks, isa, c.threads)) {
      const PeakMeasurement m = measure_peak(isa, c.threads, kQuickPeak);
      store_peak(shared.peaks, peak_entry(isa, c.threads, m, "quick measurement by a timing cell"));
    }
    return *find_peak(shared.peaks, isa, c.threads);
  };
  record["peak"] = peak_of(roofs.scores);
  double compute = record["peak"]["fma_gflops"];
  if (roofs.values != roofs.scores) {
    record["value_peak"] = peak_of(roofs.values);
    compute = roofs.peak(compute, record["value_peak"]["fma_gflops"]);
  }
  const double triad = record["peak"]["triad_gbs"];
  const double intensity = c.flops() / c.bytes();
  const double roof = peak::roof_gflops(compute, triad, intensity);
  record["percent_of_peak"] = 100 * gflops / compute;
  record["roof_gflops"] = roof;
  record["percent_of_roof"] = 100 * gflops / roof;
  record["bound"] = intensity * triad < compute ? "memory" : "compute";
}

json run_timing_cell(const CellContext& ctx) {
  const TimingCell c(ctx.cell.params, ctx.threads);
  // A kernel that does not run the cell's mask or modifier (yet) is recorded as not run, with
  // its reason, rather than timed on something else.
  const std::string refused =
      c.kernel ? c.kernel->refusal(c.shape, c.mask(), c.score_mod()) : std::string();
  if (!c.kernel || !refused.empty()) {
    // Another machine's ISA names itself; a peer this build lacks has none here.
    const auto at = c.kernel_name.find('@');
    json environment = environment_at_start();
    environment["load_average_end"] = environment["load_average_start"];  // nothing ran between
    return {{"threads", c.threads},
            {"kernel_isa", c.kernel                  ? c.kernel->isa
                           : at == std::string::npos ? ""
                                                     : c.kernel_name.substr(at + 1)},
            {"flops", c.flops()},
            {"bytes", c.bytes()},
            {"intensity", c.flops() / c.bytes()},
            {"benchmark_name", c.name()},
            {"skipped", "not run: " + (c.kernel ? "the kernel refuses the cell: " + refused
                                                : kernel_elsewhere(c.kernel_name).value_or(""))},
            {"environment", environment}};
  }
  RunShared alone;  // outside a run (tests): peaks and a session of this cell's own
  RunShared& shared = ctx.shared ? *ctx.shared : alone;
  std::unique_ptr<BenchmarkSession> own;
  if (!shared.benchmark) own = std::make_unique<BenchmarkSession>(std::vector<std::string>{}, "");
  BenchmarkSession& session = shared.benchmark ? *shared.benchmark : *own;

  const json& p = ctx.cell.params;
  const BenchmarkSettings settings{p["repetitions"], p["min_time"], p["warmup_time"]};
  // Every cell of the experiment draws from one stream: the same shape gets the same Q, K and V
  // whatever the kernel or thread count, so their errors (output_error) compare on equal inputs.
  Tensors tensors(c, {.seed = ctx.seed, .experiment = ctx.experiment, .purpose = kSharedInputs});
  const auto call = timed_call(c, tensors);

  json record = {{"threads", c.threads},
                 {"kernel_isa", c.kernel->isa},
                 {"flops", c.flops()},
                 {"bytes", c.bytes()},
                 {"intensity", c.flops() / c.bytes()}};
  // A call whose bytes fit in the last-level cache reads that cache between its calls, not
  // memory: its % of a memory roof is no reading of memory (absent where the OS lists no cache).
  if (const auto llc = last_level_cache_bytes()) record["fits_llc"] = c.bytes() <= *llc;
  json environment = environment_at_start();
  const BenchmarkRuns runs = session.run(c.name(), call, settings);
  release_cached_workspaces();  // the next cell runs without this one's kept workspace
  environment["load_average_end"] = load_average();
  record["benchmark_name"] = runs.name.empty() ? c.name() : runs.name;
  if (runs.filtered_out) {
    record["skipped"] = "not run: not selected by --benchmark_filter";
    record["environment"] = environment;
    return record;
  }
  const json time = time_statistics(runs);
  const double median = time["value"];
  const double low = time["ci95"][0], high = time["ci95"][1];
  record["repetitions"] = runs.seconds.size();
  record["time_s"] = time;
  record["gflops"] =
      measured(c.flops() / median / 1e9, {c.flops() / high / 1e9, c.flops() / low / 1e9},
               std::nullopt, "none");
  record["gbs"] = measured(c.bytes() / median / 1e9,
                           {c.bytes() / high / 1e9, c.bytes() / low / 1e9}, std::nullopt, "none");
  add_peak(record, c, record["gflops"]["value"], shared);
  record["noisy"] = stats::noisy(runs.seconds);
  if (c.direction != "backward") record["error"] = output_error(c, tensors);
  record["environment"] = environment;
  return record;
}

// A kernel without a backward cannot be timed backward: refused before anything runs.
std::vector<std::string> check_timing(const json& e) {
  std::vector<std::string> lacking;
  for (const auto& name : grid_values(e["kernel"])) {
    const Kernel* k = find_kernel(name.get<std::string>());  // null: another machine's
    if (k && !k->backward) lacking.push_back(name);
  }
  const std::vector<std::string> with = kernels_with_backward();
  std::vector<std::string> problems;
  // Query heads share K/V heads in equal groups (MHA: equal counts, MQA: one K/V head).
  const json heads_q = grid_values(e["heads_q"]), heads_kv = grid_values(e["heads_kv"]);
  for (std::size_t q = 0; q < heads_q.size(); ++q)
    for (const auto& kv : heads_kv)
      if (heads_q[q].get<std::int64_t>() % kv.get<std::int64_t>() != 0)
        problems.push_back(grid_path(e, "heads_q", q) + ": expected a multiple of heads_kv (" +
                           kv.dump() + "), found " + heads_q[q].dump());
  const json directions = grid_values(e["direction"]);
  for (std::size_t d = 0; d < directions.size() && !lacking.empty(); ++d) {
    if (directions[d] == "forward") continue;
    problems.push_back(grid_path(e, "direction", d) + ": direction " + directions[d].dump() +
                       " needs a backward pass, but kernel(s) " + join_quoted(lacking) +
                       " have none; time them \"forward\" only" +
                       (with.empty() ? " (no kernel on this machine has a backward)"
                                     : " or choose one of " + join_quoted(with)));
  }
  return problems;
}

// The cell's mask and modifier, each checked where the config gives it: a window of fewer than
// one key or an extent below 0, a chunk or prefix below 0, a soft-cap that is not positive and
// finite, sinks per head of another length than heads_q or not finite, documents of fewer than
// one token or starts that do not begin at 0, ascend and stay before n_kv, a temperature that is
// not positive and finite (mask_problem's rules).
std::string mask_cell_problem(const json& params, const json& cell) {
  const auto at = [&](const char* key) { return cell_path(params, cell, key) + ": "; };
  const json& w = cell["window"];
  if (w.is_number() && w.get<std::int64_t>() < 1)
    return at("window") + "a window of " + w.dump() + " keys: expected at least 1";
  for (const char* side : {"left", "right"})
    if (w.is_object() && w[side].is_number() && w[side].get<std::int64_t>() < 0)
      return at("window") + "the " + side + " extent " + w[side].dump() +
             " is below 0 (null: unbounded)";
  const json& sinks = cell["sinks"];
  if (sinks.is_object() && sinks["per_head"].size() != cell["heads_q"].get<std::size_t>())
    return at("sinks") + "per_head has " + std::to_string(sinks["per_head"].size()) +
           " sinks, expected one per query head (heads_q " + cell["heads_q"].dump() + ")";
  const json& docs = cell["documents"];
  if (docs.is_number() && docs.get<std::int64_t>() < 0)
    return at("documents") + "documents of " + docs.dump() +
           " tokens: expected at least 1 (0: one document)";
  const TimingCell c(cell, 1, false);
  const Shape& s = c.shape;
  for (const auto& [key, mask, mod] :
       {std::tuple{"prefix", Mask{.prefix = c.prefix}, ScoreMod{}},
        std::tuple{"chunk", Mask{.chunk = c.chunk}, ScoreMod{}},
        std::tuple{"softcap", Mask{}, ScoreMod{.softcap = c.softcap}},
        std::tuple{"sinks", Mask{}, ScoreMod{.sinks = c.sinks}},
        std::tuple{"documents", Mask{.documents = c.documents}, ScoreMod{}}})
    if (const std::string why = mask_problem(s, mask, mod); !why.empty()) return at(key) + why;
  // One temperature for every row is checked as one row; "llama4" gives none below 1.
  const json& t = cell["temperature"];
  const std::vector<float> one(1, t.is_number() ? config_fp32(t) : 1.0f);
  const std::string why = mask_problem({.n_q = 1, .n_kv = 1}, {}, {.temperature = one});
  return why.empty() ? "" : at("temperature") + why;
}

// A cell whose shape its kernel cannot run (Kernel::refuses: a block format's row length) is
// refused with the kernel's reason, not run another way. A mask or modifier the kernel does not
// run is not a config error: run_timing_cell records the cell as not run.
std::string timing_cell_problem(const json& params, const json& cell) {
  if (std::string why = mask_cell_problem(params, cell); !why.empty()) return why;
  const Kernel* k = find_kernel(cell["kernel"].get<std::string>());  // null: another machine's
  if (!k) return "";
  const TimingCell c(cell, 1, false);
  const std::string why = k->refusal(c.shape, Mask{.causal = c.causal}, {});
  return why.empty() ? ""
                     : cell_path(params, cell, "kernel") + ": kernel " + cell["kernel"].dump() +
                           " cannot run the cell with d_k " + cell["d_k"].dump() + ", d_v " +
                           cell["d_v"].dump() + ": " + why;
}

}  // namespace

ExperimentKind timing_experiment() {
  return {
      .name = "timing",
      .description = "time per call, GFLOP/s and % of peak per kernel, shape, threads, direction",
      .axes = {"kernel",      "direction", "causal",      "prefix", "window",
               "chunk",       "documents", "softcap",     "alibi",  "sinks",
               "temperature", "threads",   "batch_heads", "batch",  "heads_q",
               "heads_kv",    "n_q",       "n_kv",        "d_k",    "d_v"},
      .run_cell = run_timing_cell,
      .memory_bytes = [](const json& p,
                         int threads) { return TimingCell(p, threads, false).memory_bytes(); },
      // A cell finished before a resumption: the peaks it was read against go back into the
      // machine section (one a timing cell measured for itself is in no roofline record), those
      // of its own thread count only.
      .resumed =
          [](const json& record, RunShared& shared) {
            for (const char* key : {"peak", "value_peak"})
              if (const auto peak = record.find(key); peak != record.end() && !peak->is_null()) {
                if (!peak->is_object() ||
                    peak->value("threads", json()) != record.value("threads", json()))
                  throw InputError(std::string("its /") + key +
                                   "/threads: expected the record's /threads");
                restore_peak(shared.peaks, *peak, std::string("/") + key, false);
              }
          },
      // Once the run has measured its peaks again: % of peak and of roof against the better of
      // each ceiling's two measurements, at the thread count the cell ran (a resumption's -j
      // changes the run's, not a journaled cell's).
      .rechecked =
          [](json& record, const json& params, int threads, RunShared& shared) {
            // (A journal's record is not held to the schema until the file is written.)
            static const NumberRange range = config_range("/properties/threads");
            const json ran = record.value("threads", json());
            if (ran.is_number_integer() && ran.get<double>() >= range.min &&
                ran.get<double>() <= range.max)
              threads = ran.get<int>();
            const TimingCell c(params, threads, false);
            const auto gflops = record.find("gflops");
            if (c.kernel && gflops != record.end() && gflops->is_object() &&
                gflops->value("value", json()).is_number())
              add_peak(record, c, (*gflops)["value"], shared);
          },
      .check = check_timing,
      .cell_check = timing_cell_problem,
  };
}

}  // namespace sdpa
