// The "ggml" peer: llama.cpp's CPU flash attention, ggml_flash_attn_ext of ggml's CPU backend,
// called through ggml's C API as llama.cpp calls it (cmake/ggml.cmake builds it from the release
// tools/fetch_ggml.sh fetches; without it this family has no entries). K and V in f32 (read in
// place), f16, q8_0 or q4_0 (blocks of 32 values with an fp16 scale each), converted once by
// ggml's own row conversion (Kernel::store_kv, outside the timed call, as llama.cpp's KV cache
// is written once); grouped heads by ggml's broadcast; every mask by an f16 mask tensor of 0 and
// -inf, made with the stored K/V for the call's n_q (as llama.cpp keeps its mask per batch
// shape); the soft-cap as logit_softcap, sinks by ggml_flash_attn_ext_add_sinks, and ALiBi as
// llama.cpp runs it: max_bias, and the mask holding -|p - j| where a row sees key j, ggml
// multiplying it by its slope of the head (only slopes that are ggml's for some max_bias; no
// temperature per row: one scale per call); the graph computed on the call's threads through a ggml
// threadpool (OpenMP threads, as llama.cpp's Linux builds). What ggml rounds, per path of the
// release (ggml-cpu/ops.cpp):
//  - one query per head and f32/f16 K/V with at least 512 keys: the keys split among the
//    threads, partial results merged (not the same bits on every thread count);
//  - at least 64 queries per head, f32/f16 K/V: tiles of 64 queries x 64 keys, Q in fp32;
//  - otherwise one query row at a time: Q rounded to the K type's dot format (f16 for f16 K,
//    q8_0 for q8_0 and q4_0 K), and with f16 V the output accumulated in f16.
// ggml returns O only: no row log-sum-exp and no probes (Kernel::row_statistics).
#include "registry_entries.hpp"

namespace sdpa {
namespace {
// The entries' names, in both builds: without ggml they are kernel_elsewhere's absent kernels.
constexpr const char* kNames[] = {"ggml", "ggml-kv-f16", "ggml-kv-q8_0", "ggml-kv-q4_0"};
}  // namespace
}  // namespace sdpa

#ifdef SDPA_GGML_RELEASE

#include <ggml-cpu.h>
#include <ggml.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include "cached_scratch.hpp"
#include "kv_formats.hpp"
#include "sdpa/aligned.hpp"

namespace sdpa {
namespace {

// K and V as ggml stores them (rows of d values in `type`, heads and keys as ForwardArgs' k and
// v), and the mask tensor [n_q][n_kv] of the call they were stored for.
struct StoredKvGgml : StoredKv {
  ggml_type type;
  Shape shape;
  AlignedVector<std::uint8_t> k, v;
  Mask mask_of;            // the call's mask (its documents in `documents`)
  bool distances = false;  // whether `mask` holds ALiBi's -|p - j| (else 0) where a row sees j
  std::vector<std::int64_t> documents;
  AlignedVector<ggml_fp16_t> mask;
};

bool same_mask(const Mask& a, const Mask& b) {
  return a.causal == b.causal && a.prefix == b.prefix && a.window_left == b.window_left &&
         a.window_right == b.window_right && a.chunk == b.chunk &&
         std::equal(a.documents.begin(), a.documents.end(), b.documents.begin(), b.documents.end());
}

// The mask tensor of a call: 0 where a row sees a key (with ALiBi, `distances`: -|p - j|, which
// ggml multiplies by the head's slope), -inf elsewhere (llama.cpp's KQ mask).
AlignedVector<ggml_fp16_t> mask_tensor(const Shape& s, const Mask& m, bool distances) {
  AlignedVector<ggml_fp16_t> mask(std::size_t(s.n_q * s.n_kv));
  const ggml_fp16_t seen = ggml_fp32_to_fp16(0.0f), hidden = ggml_fp32_to_fp16(-INFINITY);
  for (std::int64_t i = 0; i < s.n_q; ++i) {
    const KeyRange keys = m.visible(s, i);
    const std::int64_t p = i + s.n_kv - s.n_q;
    ggml_fp16_t* row = mask.data() + i * s.n_kv;
    std::fill(row, row + s.n_kv, hidden);
    for (std::int64_t j = keys.begin; j < keys.end; ++j)
      row[j] = distances ? ggml_fp32_to_fp16(-float(std::abs(p - j))) : seen;
  }
  return mask;
}

// f16 holds integers exactly up to 2^11: the farthest ALiBi distance the mask may carry.
constexpr std::int64_t kExactDistance = 2048;

std::int64_t farthest_distance(const Shape& s, const Mask& m) {
  std::int64_t far = 0;
  for (std::int64_t i = 0; i < s.n_q; ++i) {
    const KeyRange keys = m.visible(s, i);
    const std::int64_t p = i + s.n_kv - s.n_q;
    if (keys.size() > 0)
      far = std::max({far, std::abs(p - keys.begin), std::abs(keys.end - 1 - p)});
  }
  return far;
}

// ggml's heads per sequence: ggml numbers heads within a sequence (its dimension 2) from 0 and
// reads a head's slope and sink by that number, so with per-head arrays a sequence is their
// length. Otherwise, one sequence of every head for a decode, one per K/V head for a prefill.
std::int64_t ggml_heads(const Shape& s, const ScoreMod& mod) {
  if (!mod.alibi_slopes.empty()) return std::int64_t(mod.alibi_slopes.size());
  if (!mod.sinks.empty()) return std::int64_t(mod.sinks.size());
  return s.n_q == 1 ? s.batch_heads : s.group;
}

// ggml's slope of head h of n: 2^(-max_bias (h + 1) / n2) for h < n2, the largest power of two
// <= n, then 2^(-max_bias (2 (h - n2) + 1) / (2 n2)) (ggml-cpu/ops.cpp).
double ggml_slope(double max_bias, std::int64_t h, std::int64_t n) {
  const double n2 = std::exp2(std::floor(std::log2(double(n))));
  return h < n2 ? std::exp2(-max_bias * double(h + 1) / n2)
                : std::exp2(-max_bias * double(2 * (h - std::int64_t(n2)) + 1) / (2 * n2));
}

// The max_bias whose ggml slopes are `slopes` (to float's rounding), or 0 when there is none.
float max_bias_of(std::span<const float> slopes) {
  const std::int64_t n = std::int64_t(slopes.size());
  if (!(slopes[0] > 0 && slopes[0] < 1)) return 0;
  const double max_bias =
      -std::log2(double(slopes[0])) * std::exp2(std::floor(std::log2(double(n))));
  for (std::int64_t h = 0; h < n; ++h)
    if (std::abs(double(slopes[h]) - ggml_slope(max_bias, h, n)) >
        1e-6 * ggml_slope(max_bias, h, n))
      return 0;
  return float(max_bias);
}

// Why ggml cannot store K and V of this shape in `type` ("" when it can): a row of a block type
// is whole blocks.
std::string shape_problem(const Shape& s, ggml_type type) {
  const std::int64_t block = ggml_blck_size(type);
  if (s.d_k % block == 0 && s.d_v % block == 0) return "";
  return std::string("ggml's ") + ggml_type_name(type) + " stores rows in blocks of " +
         std::to_string(block) + " values: d_k (" + std::to_string(s.d_k) + ") and d_v (" +
         std::to_string(s.d_v) + ") must be multiples of " + std::to_string(block);
}

template <ggml_type kType>
std::string refuses(const Shape& s, const Mask& mask, const ScoreMod& mod) {
  if (!mod.temperature.empty())
    return "ggml_flash_attn_ext takes one scale per call: no temperature per query row";
  if (!mod.alibi_slopes.empty() && !mod.sinks.empty() &&
      mod.alibi_slopes.size() != mod.sinks.size())
    return "ggml reads ALiBi slopes and sinks by one head number: their lists must have one "
           "length";
  if (ggml_heads(s, mod) % s.group != 0)
    return "ggml broadcasts a K/V head over consecutive query heads of a sequence: the per-head "
           "lists' length must be a multiple of the group (" +
           std::to_string(s.group) + ")";
  if (!mod.alibi_slopes.empty()) {
    if (max_bias_of(mod.alibi_slopes) == 0)
      return "these ALiBi slopes are not ggml's for any max_bias and " +
             std::to_string(mod.alibi_slopes.size()) +
             " heads (2^(-max_bias (h + 1) / n) for n a power of two)";
    if (farthest_distance(s, mask) > kExactDistance)
      return "ggml's f16 mask holds ALiBi's distances exactly only up to 2048 keys; this mask "
             "shows rows keys farther away";
  }
  return shape_problem(s, kType);
}

void convert_rows(const float* x, std::int64_t rows, std::int64_t d, ggml_type type,
                  std::uint8_t* y, int threads) {
  const auto from_float = ggml_get_type_traits_cpu(type)->from_float;
  const std::size_t row_bytes = ggml_row_size(type, d);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) from_float(x + r * d, y + r * row_bytes, d);
}

template <ggml_type kType>
std::unique_ptr<StoredKv> store_kv(const ForwardArgs& a) {
  const Shape& s = a.shape;
  if (const std::string p = shape_problem(s, kType); !p.empty()) throw std::invalid_argument(p);
  auto stored = std::make_unique<StoredKvGgml>();
  stored->type = kType;
  stored->shape = s;
  const std::int64_t rows = s.kv_batch_heads() * s.n_kv;
  stored->k.resize(rows * ggml_row_size(kType, s.d_k));
  stored->v.resize(rows * ggml_row_size(kType, s.d_v));
  convert_rows(a.k, rows, s.d_k, kType, stored->k.data(), a.threads);
  convert_rows(a.v, rows, s.d_v, kType, stored->v.data(), a.threads);
  stored->documents.assign(a.mask.documents.begin(), a.mask.documents.end());
  stored->mask_of = a.mask;
  stored->mask_of.documents = stored->documents;
  stored->distances = !a.score_mod.alibi_slopes.empty();
  if (!a.mask.none() || stored->distances || a.score_mod.softcap > 0)
    stored->mask = mask_tensor(s, a.mask, stored->distances);
  return stored;
}

// The calling thread's ggml threadpool, made anew when the thread count changes.
struct Threadpool {
  ggml_threadpool* pool = nullptr;
  int threads = 0;
  ~Threadpool() {
    if (pool) ggml_threadpool_free(pool);
  }
  ggml_threadpool* get(int n) {
    if (n != threads) {
      if (pool) ggml_threadpool_free(pool);
      ggml_threadpool_params params = ggml_threadpool_params_default(n);
      pool = ggml_threadpool_new(&params);
      threads = n;
    }
    return pool;
  }
};
thread_local Threadpool t_threadpool;
thread_local detail::CachedScratch t_work;  // the graph's work buffer (ggml_cplan::work_data)
thread_local detail::CachedScratch t_out;   // O in ggml's layout, where it is not ours

// Whether ggml's O [d_v, heads, n_q, sequences] differs from ForwardArgs' [heads, n_q, d_v].
bool permuted_out(const Shape& s, std::int64_t heads) { return s.n_q > 1 && heads > 1; }

// ggml's O of several queries per head (build) into ForwardArgs' layout.
void permute_out(const float* from, const Shape& s, std::int64_t heads, float* to, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t h = 0; h < s.batch_heads; ++h)
    for (std::int64_t i = 0; i < s.n_q; ++i)
      std::memcpy(to + (h * s.n_q + i) * s.d_v,
                  from + ((h / heads * s.n_q + i) * heads + h % heads) * s.d_v,
                  sizeof(float) * std::size_t(s.d_v));
}

// Tensors of Q, K, V, the mask and O and a graph of them: metadata only, the data is the
// caller's.
constexpr std::size_t kGraphNodes = 8;  // the graph's node and leaf arrays: 1 node, 6 leaves
std::size_t context_bytes() {
  return 7 * ggml_tensor_overhead() + ggml_graph_overhead_custom(kGraphNodes, false);
}

// Q, K, V and O in ggml's order of dimensions [d, rows, heads, sequences] (K and V broadcast
// over the heads of a group, not over sequences), `heads` = ggml_heads per sequence. One query
// per head: the heads as ggml's heads, as llama.cpp's decode (only then does ggml split the
// keys among threads). Several: each K/V head a sequence of `group` query heads, which ggml
// takes row by row in the order of llama.cpp's [d, n_q, heads, 1]. O [d_v, heads, n_q,
// sequences] is ForwardArgs' layout when heads is 1, and is otherwise copied into it after the
// call (permute_out). The modifiers: logit_softcap, max_bias, and an F32 sink per head.
struct Graph {
  ggml_context* ctx = nullptr;
  ggml_cgraph* graph = nullptr;
  ~Graph() {
    if (ctx) ggml_free(ctx);
  }
};

struct Modifiers {
  float max_bias = 0, softcap = 0;
  bool sinks = false;
};

void build(Graph& g, const Shape& s, std::int64_t heads, ggml_type type, bool masked, float scale,
           const Modifiers& mod = {}) {
  g.ctx = ggml_init({.mem_size = context_bytes(), .mem_buffer = nullptr, .no_alloc = true});
  if (!g.ctx) throw std::bad_alloc();
  const std::int64_t kv_heads = heads / s.group;
  const std::int64_t seqs = s.batch_heads / heads, kv_seqs = seqs;
  ggml_tensor* q = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, s.d_k, s.n_q, heads, seqs);
  ggml_tensor* k = ggml_new_tensor_4d(g.ctx, type, s.d_k, s.n_kv, kv_heads, kv_seqs);
  ggml_tensor* v = ggml_new_tensor_4d(g.ctx, type, s.d_v, s.n_kv, kv_heads, kv_seqs);
  ggml_tensor* mask =
      masked ? ggml_new_tensor_4d(g.ctx, GGML_TYPE_F16, s.n_kv, s.n_q, 1, 1) : nullptr;
  ggml_tensor* out = ggml_flash_attn_ext(g.ctx, q, k, v, mask, scale, mod.max_bias, mod.softcap);
  if (mod.sinks)
    ggml_flash_attn_ext_add_sinks(out, ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, heads));
  g.graph = ggml_new_graph_custom(g.ctx, kGraphNodes, false);
  ggml_build_forward_expand(g.graph, out);
}

template <ggml_type kType>
void forward(const ForwardArgs& a) {
  const Shape& s = a.shape;
  if (const std::string why = refuses<kType>(s, a.mask, a.score_mod); !why.empty())
    throw std::invalid_argument(why);
  if (a.lse || a.probes)
    throw std::invalid_argument(
        "ggml_flash_attn_ext returns the output only: no row log-sum-exp, no probes");
  std::unique_ptr<StoredKv> own;
  const void *k = a.k, *v = a.v;
  const ggml_fp16_t* mask = nullptr;
  AlignedVector<ggml_fp16_t> own_mask;
  // With a soft-cap, a mask even where every row sees every key: ggml's 64-query tiles pad the
  // last key tile with -inf scores, which its tanh turns into -softcap (weights for keys that
  // are not there) unless the mask's padding adds -inf after it, as llama.cpp's always does.
  const bool alibi = !a.score_mod.alibi_slopes.empty();
  const bool masked = !a.mask.none() || alibi || a.score_mod.softcap > 0;
  if constexpr (kType != GGML_TYPE_F32) {
    if (!a.stored_kv) own = store_kv<kType>(a);
    const auto* kv = dynamic_cast<const StoredKvGgml*>(own ? own.get() : a.stored_kv);
    if (!kv || kv->type != kType || !detail::same_kv_shape(kv->shape, s))
      throw std::invalid_argument("stored K/V of another format or shape than the call's");
    k = kv->k.data(), v = kv->v.data();
    if (masked && !kv->mask.empty() && kv->shape.n_q == s.n_q && same_mask(kv->mask_of, a.mask) &&
        kv->distances == alibi)
      mask = kv->mask.data();
  }
  if (masked && !mask) {  // a call without its mask stored for its n_q makes its own
    own_mask = mask_tensor(s, a.mask, alibi);
    mask = own_mask.data();
  }
  // A sink of -inf takes nothing; ggml's exp(sink - max) would be NaN on a row that sees no key.
  std::vector<float> sinks(a.score_mod.sinks.begin(), a.score_mod.sinks.end());
  for (float& x : sinks) x = std::max(x, -FLT_MAX);

  Graph g;
  const std::int64_t heads = ggml_heads(s, a.score_mod);
  build(g, s, heads, kType, masked, a.scale,
        {.max_bias = alibi ? max_bias_of(a.score_mod.alibi_slopes) : 0.0f,
         .softcap = a.score_mod.softcap,
         .sinks = !sinks.empty()});
  ggml_tensor* out = ggml_graph_node(g.graph, -1);
  out->src[0]->data = const_cast<float*>(a.q);
  out->src[1]->data = const_cast<void*>(k);
  out->src[2]->data = const_cast<void*>(v);
  if (mask) out->src[3]->data = const_cast<ggml_fp16_t*>(mask);
  if (!sinks.empty()) out->src[4]->data = sinks.data();
  float* o = permuted_out(s, heads) ? t_out.floats(s.out_elements()) : a.out;
  out->data = o;
  ggml_threadpool* pool = t_threadpool.get(a.threads);
  ggml_cplan plan = ggml_graph_plan(g.graph, a.threads, pool);
  plan.work_data = reinterpret_cast<std::uint8_t*>(
      t_work.floats(std::int64_t((plan.work_size + sizeof(float) - 1) / sizeof(float))));
  if (ggml_graph_compute(g.graph, &plan) != GGML_STATUS_SUCCESS)
    throw std::runtime_error("ggml_graph_compute failed");
  if (o != a.out) permute_out(o, s, heads, a.out, a.threads);
}

// The stored K and V (none for f32, read in place), the mask (counted whether or not the call
// is causal: the formula does not know), ggml's work buffer for the call's graph on `threads`
// (ggml_graph_plan's own size), the graph's metadata and O in ggml's layout where it differs.
template <ggml_type kType>
double workspace(const Shape& s, Pass, int threads) {
  const double rows = double(s.kv_batch_heads() * s.n_kv);
  const double stored =
      kType == GGML_TYPE_F32
          ? 0.0
          : rows * double(ggml_row_size(kType, s.d_k) + ggml_row_size(kType, s.d_v));
  Graph g;
  const std::int64_t heads = ggml_heads(s, {});
  build(g, s, heads, kType, true, 1.0f);
  const ggml_cplan plan = ggml_graph_plan(g.graph, threads, nullptr);
  const double out = permuted_out(s, heads) ? sizeof(float) * double(s.out_elements()) : 0.0;
  return stored + sizeof(ggml_fp16_t) * double(s.n_q * s.n_kv) + double(plan.work_size) +
         double(context_bytes()) + out;
}

// The instruction set ggml was compiled for (GGML_NATIVE: this machine's best).
std::string ggml_isa() {
  if (ggml_cpu_has_avx512()) return "avx512";
  if (ggml_cpu_has_avx2()) return "avx2";
  if (ggml_cpu_has_neon()) return "neon";
  return "scalar";
}

template <ggml_type kType>
Kernel entry(const char* name, const char* precision, const std::string& what) {
  const double block = double(ggml_blck_size(kType));
  return {.name = name,
          .family = "ggml",
          .isa = ggml_isa(),
          .precision = precision,
          .description = "ggml_flash_attn_ext, " + what + "; " SDPA_GGML_RELEASE,
          .forward = &forward<kType>,
          .workspace = &workspace<kType>,
          .same_bits_on_any_threads = false,
          .store_kv = kType == GGML_TYPE_F32 ? nullptr : &store_kv<kType>,
          .kv_element_bytes = double(ggml_type_size(kType)) / block,
          .row_statistics = false,
          .refuses = &refuses<kType>};
}

}  // namespace

std::vector<Kernel> detail::ggml_kernels() {
  ggml_cpu_init();  // ggml's conversion tables, before store_kv converts anything
  return {entry<GGML_TYPE_F32>(kNames[0], "fp32", "K and V in f32"),
          entry<GGML_TYPE_F16>(kNames[1], "kv-fp16", "K and V stored in f16"),
          entry<GGML_TYPE_Q8_0>(kNames[2], "kv-q8_0",
                                "K and V stored in q8_0 (int8, an f16 scale per 32 values)"),
          entry<GGML_TYPE_Q4_0>(kNames[3], "kv-q4_0",
                                "K and V stored in q4_0 (4 bits, an f16 scale per 32 values)")};
}

std::vector<detail::AbsentKernel> detail::ggml_absent_kernels() { return {}; }

}  // namespace sdpa

#else

std::vector<sdpa::Kernel> sdpa::detail::ggml_kernels() { return {}; }

// SDPA_GGML_ABSENT: cmake/ggml.cmake's reason.
std::vector<sdpa::detail::AbsentKernel> sdpa::detail::ggml_absent_kernels() {
  std::vector<AbsentKernel> absent;
  for (const char* name : kNames) absent.push_back({name, SDPA_GGML_ABSENT});
  return absent;
}

#endif  // SDPA_GGML_RELEASE
