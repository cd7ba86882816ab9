// sdpa_kernels: attention forward/backward variants and their registry. Compute only: no I/O,
// no JSON, no knowledge of experiments. Every tensor is row-major contiguous fp32: Q, O and the
// lse [batch_heads, n_q, d], K and V [kv_batch_heads(), n_kv, d] (Shape::group); d_k and d_v
// may differ; the scale is chosen by the caller.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sdpa/mask.hpp"

namespace sdpa {

struct Shape {
  std::int64_t batch_heads = 1;  // batch x query heads: the leading dimension of Q, O and lse
  std::int64_t n_q = 1;
  std::int64_t n_kv = 1;
  std::int64_t d_k = 1;
  std::int64_t d_v = 1;
  // Query heads per K/V head (grouped-query attention): heads_q / heads_kv. 1 is multi-head
  // attention (every query head has its own K and V), heads_q is multi-query attention (one K/V
  // head for all). Query head h (an index in batch_heads) reads K/V head kv_head(h) = h / group,
  // which is what the batch-major layouts Q [batch, heads_q, n, d] and K, V [batch, heads_kv,
  // n, d] give. Last, so that positional initialisers written before it keep their meaning.
  std::int64_t group = 1;

  std::int64_t kv_batch_heads() const { return batch_heads / group; }  // batch x K/V heads
  std::int64_t kv_head(std::int64_t head) const { return head / group; }
  // Every size at least 1 and batch_heads a multiple of group: what every kernel assumes.
  bool valid() const {
    return batch_heads >= 1 && n_q >= 1 && n_kv >= 1 && d_k >= 1 && d_v >= 1 && group >= 1 &&
           batch_heads % group == 0;
  }

  std::int64_t rows() const { return batch_heads * n_q; }
  std::int64_t q_elements() const { return batch_heads * n_q * d_k; }
  std::int64_t k_elements() const { return kv_batch_heads() * n_kv * d_k; }
  std::int64_t v_elements() const { return kv_batch_heads() * n_kv * d_v; }
  std::int64_t out_elements() const { return batch_heads * n_q * d_v; }
};

// Statistics a forward kernel fills per query row while it runs (docs/design.md, "Probes"), so
// every experiment can measure any variant without an N x N matrix. Scores here are the logits
// the softmax sees (sdpa/mask.hpp: the scaled scores after the soft-cap and ALiBi) of the
// visible keys; the weights, entropy and sums of p^2 and p^3 count a sink as one more outcome. A
// kernel writes only its own rows, so the pooled values (`pooled()`) are summed in row order:
// identical on any thread count.
struct RowProbes {
  explicit RowProbes(std::int64_t rows = 0) { resize(rows); }
  void resize(std::int64_t rows);

  std::vector<double> score_sum;        // sum of s over the row's visible keys
  std::vector<double> score_sumsq;      // sum of s^2
  std::vector<double> entropy;          // H = -sum p ln p of the row's attention weights (nats)
  std::vector<double> max_weight;       // max_j p_j
  std::vector<double> sum_p2;           // sum_j p_j^2 (the softmax Jacobian's norm needs it)
  std::vector<double> sum_p3;           // sum_j p_j^3
  std::vector<std::int64_t> nonfinite;  // non-finite scores, weights or outputs in the row

  struct Pooled {
    std::int64_t rows = 0;
    double score_sum = 0, score_sumsq = 0;
    double entropy_mean = 0, max_weight_mean = 0;
    std::int64_t nonfinite = 0, nonfinite_rows = 0;
  };
  Pooled pooled() const;
};

// K and V held in a kernel's own storage format (Kernel::store_kv: fp16, bf16), made once from
// fp32 K and V before the calls that read them, as an inference engine keeps its KV cache.
struct StoredKv {
  virtual ~StoredKv() = default;
};

struct ForwardArgs {
  Shape shape;
  const float* q = nullptr;  // [batch_heads, n_q, d_k]
  const float* k = nullptr;  // [kv_batch_heads, n_kv, d_k]
  const float* v = nullptr;  // [kv_batch_heads, n_kv, d_v]
  float* out = nullptr;      // [batch_heads, n_q, d_v]
  float* lse = nullptr;      // optional [batch_heads, n_q]: row log-sum-exp of the scaled scores
  float scale = 1.0f;
  Mask mask = {};
  ScoreMod score_mod = {};
  int threads = 1;
  RowProbes* probes = nullptr;  // optional; sized shape.rows()
  // Optional, for kernels with Kernel::store_kv: k and v as that kernel stored them (the same
  // shape); the call then reads them and not k and v. Null: the kernel stores k and v itself
  // on every call (correct, but the conversion is timed with the call).
  const StoredKv* stored_kv = nullptr;
};

// Statistics a backward kernel fills per query row: the gradient dS_j = dL/ds_j reaching the
// row's scaled scores s_j = scale q.k (through the soft-cap's derivative where there is one;
// the gradient at the raw scores q.k is scale * dS).
struct GradProbes {
  explicit GradProbes(std::int64_t rows = 0) { resize(rows); }
  void resize(std::int64_t rows);

  std::vector<double> ds_sumsq;             // sum_j dS_j^2
  std::vector<double> ds_max_abs;           // max_j |dS_j|
  std::vector<std::int64_t> participating;  // keys with |dS_j| > 1e-3 max_j |dS_j|
  std::vector<std::int64_t> visible;        // keys the row sees
};

// Keys whose gradient is at least this fraction of the row's largest count as participating.
inline constexpr double kParticipationThreshold = 1e-3;

struct BackwardArgs {
  Shape shape;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* out = nullptr;    // forward output
  const float* lse = nullptr;    // forward row log-sum-exp
  const float* d_out = nullptr;  // upstream gradient [batch_heads, n_q, d_v]
  float* d_q = nullptr;
  float* d_k = nullptr;  // shaped like k: summed over the query heads of each K/V head's group
  float* d_v = nullptr;
  float scale = 1.0f;
  Mask mask = {};
  ScoreMod score_mod = {};
  int threads = 1;
  GradProbes* probes = nullptr;  // optional; sized shape.rows()
  // Optional, with score_mod.sinks: dL/d sink per entry of score_mod.sinks (a learned sink),
  // summed over the rows and batches that read it.
  float* d_sinks = nullptr;
};

// The backward of a forward call: its shape, inputs, output, lse, scale, mask and threads, with
// the upstream gradient and where dQ, dK, dV go (no probes). f.lse must be set.
inline BackwardArgs backward_of(const ForwardArgs& f, const float* d_out, float* d_q, float* d_k,
                                float* d_v) {
  return {.shape = f.shape,
          .q = f.q,
          .k = f.k,
          .v = f.v,
          .out = f.out,
          .lse = f.lse,
          .d_out = d_out,
          .d_q = d_q,
          .d_k = d_k,
          .d_v = d_v,
          .scale = f.scale,
          .mask = f.mask,
          .score_mod = f.score_mod,
          .threads = f.threads};
}

using ForwardFn = void (*)(const ForwardArgs&);
// K and V of a call (a.k, a.v, a.shape) in the kernel's storage format.
using StoreKvFn = std::unique_ptr<StoredKv> (*)(const ForwardArgs&);
using BackwardFn = void (*)(const BackwardArgs&);

// The two calls a kernel offers.
enum class Pass { forward, backward };

// FLOPs of one forward (docs/design.md, "Conventions"): 4 * d per visible (query, key) pair per
// head, d the mean of d_k and d_v: N_q * N_kv pairs without a mask, and with one the exact count
// (visible_pairs: N (N + 1) / 2 when square and causal, the whole cache for one decode query,
// the window's pairs under a sliding window). A backward counts 2.5 forwards.
double forward_flops(const Shape& shape, const Mask& mask);
// Bytes one forward must move (docs/design.md, "Conventions for inference shapes and precision"):
// Q, K, V and O at their storage width (fp32), each counted once, K and V once per K/V head (not
// once per query head reading them) and only the keys some row sees (visible_keys_union: a
// decode step with a 128-key window reads 128 keys of its cache). Arithmetic intensity is
// forward_flops / forward_bytes.
// kv_element_bytes: the storage width of K and V (2 for fp16 and bf16 K/V, 1 for int8);
// kv_row_bytes: what each row of K and of V (a token in one K/V head) stores beside its elements
// (4 for the fp32 scale of an int8 row).
double forward_bytes(const Shape& shape, const Mask& mask, double kv_element_bytes = 4,
                     double kv_row_bytes = 0);

// Bytes one call allocates beyond its arguments when it runs on `threads` threads: the scores it
// materialises (a row, a block of rows, or all n_q x n_kv of a head), packed blocks and
// per-thread scratch. Each kernel has its own formula, written beside its code.
using WorkspaceFn = double (*)(const Shape& shape, Pass pass, int threads);

// One entry of the kernel registry. Everything that enumerates kernels (the CLI's `list`,
// config validation, tests, benchmarks) reads `kernel_registry()`, and asks an entry what it
// costs and promises rather than deciding anything from its family's name.
struct Kernel {
  std::string name;    // e.g. "flash", "simd@avx2"
  std::string family;  // e.g. "flash", "flash-kv-int8", "eigen", "ggml" (docs/design.md lists them)
  std::string isa;     // instruction set the entry runs on, e.g. "scalar", "avx2", "avx512"
  // The roofline ISA (sdpa/peak.hpp) of its dot-product instructions, where not `isa`:
  // flash-kv-int8@avx2's "avx2-int8", @sse4's "sse4-int8" (its scores are int8 dot products,
  // not fp32 FMAs).
  std::string dot_isa = {};
  // The ISA whose fp32 multiply-adds do the rest where product_isa's dot products do only a
  // decode shape's scores: flash-kv-int8's native entries, which widen V to fp32 for P V and
  // run fp32 tiles on every other shape. Empty: product_isa does every product.
  std::string fp32_isa = {};
  // The ISA its products run on: dot_isa, else isa.
  const std::string& product_isa() const { return dot_isa.empty() ? isa : dot_isa; }
  // The roofline ISA of product_isa (peak::roof_isa), so flash@avx2 reads against AVX2's peak on
  // an AVX-512 host; "" when none applies.
  std::string roof_isa() const;
  // What a timing of a call of `shape` (the timing kind, bench_kernels) divides by: the roofline
  // ISAs of its scores' products (Q K^T) and of its values' (P V). Both roof_isa() but where
  // fp32_isa is set: flash-kv-int8@avx-vnni's decode reads {"avx-vnni", "avx2"}, its prefill
  // {"avx2", "avx2"}.
  struct Roofs {
    std::string scores, values;
    double scores_share = 1;  // the scores' part of the FLOPs: d_k / (d_k + d_v)
    // The call's compute peak from its two ISAs' peaks: each product's FLOPs at its own
    // (peak::mixed_peak), or the one peak where both products run on one ISA.
    double peak(double scores_gflops, double values_gflops) const;
  };
  Roofs roofs(const Shape& shape) const;
  // Every roofline ISA roofs() names for some shape: what a roofline run ahead of the entry's
  // timings measures.
  std::vector<std::string> roof_isas() const;
  // Number format of the arithmetic (docs/design.md,
  // "Conventions for inference shapes and precision"): "fp32", or "bf16" (Q, K, V
  // rounded to bf16 on entry, bf16 products accumulated in fp32, softmax in fp32, P rounded to
  // bf16 before P V; a backward rounds dO too, and P and dS before their products), "kv-fp16" and
  // "kv-bf16" (K and V stored in fp16 or bf16, everything else fp32: Kernel::store_kv), "kv-int8"
  // (K and V stored as int8 with an fp32 scale per token and K/V head, Q rounded the same way per
  // row at the call, integer Q K^T, fp32 softmax and P V), "kv-q8_0" and "kv-q4_0" (K and V stored
  // in ggml's block formats: 32 values share an fp16 scale). Every entry takes and returns fp32
  // tensors.
  std::string precision = "fp32";
  std::string description;  // one line for `sdpa-bench list`
  ForwardFn forward = nullptr;
  BackwardFn backward = nullptr;    // absent when the variant has no backward
  bool unstable_softmax = false;    // exp without max subtraction (overflow study)
  bool fp64 = false;                // computes in double (the oracle)
  WorkspaceFn workspace = nullptr;  // every entry has one (a test checks)
  // Whether the output is the same to the bit on any thread count. Ours are (each output row
  // has one writer); library GEMMs (Eigen, OpenBLAS) split their sums by the thread count.
  bool same_bits_on_any_threads = true;
  // Kernels that read K and V in a storage format of their own: makes that storage from a
  // call's fp32 K and V (ForwardArgs::stored_kv), and its bytes per K/V element.
  StoreKvFn store_kv = nullptr;
  double kv_element_bytes = 4;
  double kv_row_bytes = 0;  // per row of K and of V beside its elements: int8's scale
  // Whether forward fills lse and probes when asked; a peer that returns O only (ggml) refuses
  // such calls, and only the timing kind runs it.
  bool row_statistics = true;
  // Why the kernel cannot run a shape with a mask and score modifier, "" when it can (null: it
  // runs every valid one), e.g. a block format's row length, or a modifier a peer lacks.
  // Config validation names it; forward throws it.
  std::string (*refuses)(const Shape& shape, const Mask& mask, const ScoreMod& mod) = nullptr;
  std::string refusal(const Shape& shape, const Mask& mask, const ScoreMod& mod) const {
    return refuses ? refuses(shape, mask, mod) : "";
  }

  double workspace_bytes(const Shape& shape, Pass pass, int threads) const {
    return workspace(shape, pass, threads);
  }
  // The FLOPs a call is credited with (docs/design.md, "Conventions"), the same for every kernel so
  // that GFLOP/s compare across kernels (flash's single-pass backward does five tile products to
  // its forward's two: the 2.5, see kernels/flash_backward.cpp).
  // The bytes a forward must move, K and V at their storage width (sdpa::forward_bytes).
  double bytes(const Shape& shape, const Mask& mask) const {
    return forward_bytes(shape, mask, kv_element_bytes, kv_row_bytes);
  }
  double flops(const Shape& shape, const Mask& mask, Pass pass) const {
    return forward_flops(shape, mask) * (pass == Pass::forward ? 1.0 : 2.5);
  }
};

// Only the entries this machine can run (ISA targets it lacks are left out).
const std::vector<Kernel>& kernel_registry();
const Kernel* find_kernel(std::string_view name);
std::vector<std::string> kernel_names();
// A kernel of another machine or build, and why it cannot run here: "family@isa" with a family
// this build registers and an ISA the suite knows (sdpa/peak.hpp) that this CPU or build lacks,
// e.g. "flash@avx2" on aarch64; or an entry of a peer this build was made without (the ggml
// entries where cmake/ggml.cmake built no ggml). Nothing for a kernel that runs here or a name
// the suite does not know. A timing config naming one runs anywhere; the cell is recorded as not
// run, with this reason.
std::optional<std::string> kernel_elsewhere(std::string_view name);

// ---- the fp64 oracle, callable on double tensors (tests compare every variant with it)
struct ReferenceResult {
  std::vector<double> out;  // [batch_heads, n_q, d_v]
  std::vector<double> lse;  // [batch_heads, n_q], the sink included
};
ReferenceResult reference_attention(const Shape& shape, std::span<const double> q,
                                    std::span<const double> k, std::span<const double> v,
                                    double scale, const Mask& mask, const ScoreMod& mod = {});

struct ReferenceGradients {
  std::vector<double> d_q, d_k, d_v;  // shaped like q, k, v
  std::vector<double> d_sinks;        // shaped like mod.sinks
};
// dQ, dK, dV (and d sinks) of L = sum(O * dO), materialising S and P per batch-head, in double.
ReferenceGradients reference_attention_backward(const Shape& shape, std::span<const double> q,
                                                std::span<const double> k,
                                                std::span<const double> v,
                                                std::span<const double> d_out, double scale,
                                                const Mask& mask, const ScoreMod& mod = {});

// ---- per-ISA helpers of the SIMD targets (Highway) this CPU runs, best first. isa names match
// Kernel::isa: "avx512", "avx2", "sse4", ..., and "scalar" for the baseline fallback.
struct SimdTarget {
  std::string isa;
  // Independent fp32 FMA chains on the calling thread; returns the flops done (2 per lane-FMA).
  double (*fma_chains)(std::int64_t iterations) = nullptr;
  // The vectorised exp and tanh (the soft-cap's) the SIMD kernels use, on an array (exposed for
  // their accuracy tests).
  void (*exp)(const float* x, float* y, std::int64_t n) = nullptr;
  void (*tanh)(const float* x, float* y, std::int64_t n) = nullptr;
};
const std::vector<SimdTarget>& simd_targets();
const SimdTarget* find_simd_target(std::string_view isa);
// Measured fp32 FMA peak of a target on `threads` threads in GFLOP/s, best of five runs of
// about seconds / 5 each: the denominator of "% of peak".
double measure_fma_peak(const SimdTarget& target, int threads, double seconds = 0.5);

// Kept workspace (flash's decode partials, the peers' scores) lives per calling thread until a
// call of another shape or this: frees the calling thread's, e.g. between timing cells so one
// cell's workspace is not held while the next runs.
void release_cached_workspaces();

}  // namespace sdpa
