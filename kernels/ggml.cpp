// The "ggml" peer: llama.cpp's CPU flash attention, ggml_flash_attn_ext of ggml's CPU backend,
// called through ggml's C API as llama.cpp calls it (cmake/ggml.cmake builds it from the release
// tools/fetch_ggml.sh fetches; without it this family has no entries). K and V in f32 (read in
// place), f16, q8_0 or q4_0 (blocks of 32 values with an fp16 scale each), converted once by
// ggml's own row conversion (Kernel::store_kv, outside the timed call, as llama.cpp's KV cache
// is written once); grouped heads by ggml's broadcast; causal by an f16 mask tensor of 0 and
// -inf, made with the stored K/V for the call's n_q (as llama.cpp keeps its mask per batch
// shape); the graph computed on the call's threads through a ggml threadpool (OpenMP threads,
// as llama.cpp's Linux builds). What ggml rounds, per path of the release (ggml-cpu/ops.cpp):
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

#include <cmath>
#include <cstring>
#include <memory>
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
  Mask mask_of;  // the call's mask (its documents in `documents`)
  std::vector<std::int64_t> documents;
  AlignedVector<ggml_fp16_t> mask;
};

bool same_mask(const Mask& a, const Mask& b) {
  return a.causal == b.causal && a.prefix == b.prefix && a.window_left == b.window_left &&
         a.window_right == b.window_right && a.chunk == b.chunk &&
         std::equal(a.documents.begin(), a.documents.end(), b.documents.begin(), b.documents.end());
}

// The mask tensor of a call: 0 where a row sees a key, -inf elsewhere (llama.cpp's KQ mask).
AlignedVector<ggml_fp16_t> mask_tensor(const Shape& s, const Mask& m) {
  AlignedVector<ggml_fp16_t> mask(std::size_t(s.n_q * s.n_kv));
  const ggml_fp16_t seen = ggml_fp32_to_fp16(0.0f), hidden = ggml_fp32_to_fp16(-INFINITY);
  for (std::int64_t i = 0; i < s.n_q; ++i) {
    const KeyRange keys = m.visible(s, i);
    ggml_fp16_t* row = mask.data() + i * s.n_kv;
    std::fill(row, row + s.n_kv, hidden);
    std::fill(row + keys.begin, row + keys.begin + keys.size(), seen);
  }
  return mask;
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
std::string refuses(const Shape& s, const Mask&, const ScoreMod& mod) {
  if (!mod.none()) return "the ggml entries do not map score modifiers yet";
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
  if (!a.mask.none()) stored->mask = mask_tensor(s, a.mask);
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

// Whether ggml's O [d_v, group, n_q, kv heads] differs from ForwardArgs' [heads, n_q, d_v].
bool permuted_out(const Shape& s) { return s.n_q > 1 && s.group > 1; }

// ggml's O of several queries per head (build) into ForwardArgs' layout.
void permute_out(const float* from, const Shape& s, float* to, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t h = 0; h < s.batch_heads; ++h)
    for (std::int64_t i = 0; i < s.n_q; ++i)
      std::memcpy(to + (h * s.n_q + i) * s.d_v,
                  from + ((s.kv_head(h) * s.n_q + i) * s.group + h % s.group) * s.d_v,
                  sizeof(float) * std::size_t(s.d_v));
}

// Tensors of Q, K, V, the mask and O and a graph of them: metadata only, the data is the
// caller's.
constexpr std::size_t kGraphNodes = 8;  // the graph's node and leaf arrays: 1 node, 5 leaves
std::size_t context_bytes() {
  return 6 * ggml_tensor_overhead() + ggml_graph_overhead_custom(kGraphNodes, false);
}

// Q, K, V and O in ggml's order of dimensions [d, rows, heads, sequences] (K and V broadcast
// over the heads of a group, not over sequences). One query per head: the heads as ggml's
// heads, as llama.cpp's decode (only then does ggml split the keys among threads). Several: each
// K/V head a sequence of `group` query heads, which ggml takes row by row in the order of
// llama.cpp's [d, n_q, heads, 1]; O [d_v, group, n_q, kv heads] is ForwardArgs' layout when
// group is 1, and is otherwise copied into it after the call (permute_out).
struct Graph {
  ggml_context* ctx = nullptr;
  ggml_cgraph* graph = nullptr;
  ~Graph() {
    if (ctx) ggml_free(ctx);
  }
};

void build(Graph& g, const Shape& s, ggml_type type, bool masked, float scale) {
  g.ctx = ggml_init({.mem_size = context_bytes(), .mem_buffer = nullptr, .no_alloc = true});
  if (!g.ctx) throw std::bad_alloc();
  const bool decode = s.n_q == 1;
  const std::int64_t heads = decode ? s.batch_heads : s.group;
  const std::int64_t kv_heads = decode ? s.kv_batch_heads() : 1;
  const std::int64_t seqs = decode ? 1 : s.kv_batch_heads(), kv_seqs = seqs;
  ggml_tensor* q = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, s.d_k, s.n_q, heads, seqs);
  ggml_tensor* k = ggml_new_tensor_4d(g.ctx, type, s.d_k, s.n_kv, kv_heads, kv_seqs);
  ggml_tensor* v = ggml_new_tensor_4d(g.ctx, type, s.d_v, s.n_kv, kv_heads, kv_seqs);
  ggml_tensor* mask =
      masked ? ggml_new_tensor_4d(g.ctx, GGML_TYPE_F16, s.n_kv, s.n_q, 1, 1) : nullptr;
  ggml_tensor* out = ggml_flash_attn_ext(g.ctx, q, k, v, mask, scale, 0.0f, 0.0f);
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
  if constexpr (kType != GGML_TYPE_F32) {
    if (!a.stored_kv) own = store_kv<kType>(a);
    const auto* kv = dynamic_cast<const StoredKvGgml*>(own ? own.get() : a.stored_kv);
    if (!kv || kv->type != kType || !detail::same_kv_shape(kv->shape, s))
      throw std::invalid_argument("stored K/V of another format or shape than the call's");
    k = kv->k.data(), v = kv->v.data();
    if (!a.mask.none() && kv->shape.n_q == s.n_q && same_mask(kv->mask_of, a.mask))
      mask = kv->mask.data();
  }
  if (!a.mask.none() && !mask) {  // a call without its mask stored for its n_q makes its own
    own_mask = mask_tensor(s, a.mask);
    mask = own_mask.data();
  }

  Graph g;
  build(g, s, kType, !a.mask.none(), a.scale);
  ggml_tensor* out = ggml_graph_node(g.graph, -1);
  out->src[0]->data = const_cast<float*>(a.q);
  out->src[1]->data = const_cast<void*>(k);
  out->src[2]->data = const_cast<void*>(v);
  if (mask) out->src[3]->data = const_cast<ggml_fp16_t*>(mask);
  float* o = permuted_out(s) ? t_out.floats(s.out_elements()) : a.out;
  out->data = o;
  ggml_threadpool* pool = t_threadpool.get(a.threads);
  ggml_cplan plan = ggml_graph_plan(g.graph, a.threads, pool);
  plan.work_data = reinterpret_cast<std::uint8_t*>(
      t_work.floats(std::int64_t((plan.work_size + sizeof(float) - 1) / sizeof(float))));
  if (ggml_graph_compute(g.graph, &plan) != GGML_STATUS_SUCCESS)
    throw std::runtime_error("ggml_graph_compute failed");
  if (o != a.out) permute_out(o, s, a.out, a.threads);
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
  build(g, s, kType, true, 1.0f);
  const ggml_cplan plan = ggml_graph_plan(g.graph, threads, nullptr);
  const double out = permuted_out(s) ? sizeof(float) * double(s.out_elements()) : 0.0;
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
